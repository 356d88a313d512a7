package release

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/redisread"
	"github.com/slotexporter/slot_exporter/internal/topology"
	"github.com/slotexporter/slot_exporter/internal/track"
)

// Bounds of a live read: a page is for a person, not a dump.
const (
	// DefaultMaxMembers is how many members of one set are read, lowest
	// scores (the dead ones) first.
	DefaultMaxMembers = 1000
	// MaxHeadBytes is how much of a queue's next element is shown, and
	// of a member longer than MaxMemberBytes.
	MaxHeadBytes = 200
	// MaxMemberBytes bounds the slot-set members read whole, shown whole
	// and released: the bound of a lock's token. A longer member is read
	// as it streams, shown cut, and kept by a release, which would have
	// to send it whole.
	MaxMemberBytes = redisread.MaxValueBytes
	// maxGroups and maxConsumers bound what is shown of a stream.
	maxGroups    = 20
	maxConsumers = 20
)

// FirstSeenFunc returns when the exporter first saw a member of a key
// (Redis time, ms), if its tracker knows it; memberHash is
// track.MemberHash of the key and the member, taken as it streams.
type FirstSeenFunc func(family, key string, memberHash uint64) (int64, bool)

// Holdings is what one user's keys of a family hold, read live.
type Holdings struct {
	Family *config.Family
	User   string
	// Now is Redis TIME at the read, in ms.
	Now    int64
	Search Search
	Keys   []KeyHolding
}

// KeyHolding is one key as read. Which fields are filled depends on the
// family's kind.
type KeyHolding struct {
	Key string
	// PTTL in ms: -1 no expiry (-2 never: missing keys are not listed).
	PTTL int64
	// Problem says why the key could not be read as its kind (it holds
	// another type, the ACL refuses it); nothing else is filled then.
	Problem string

	// Slot sets: members by score, lowest first. A lock is one member:
	// its token, scored by its lease's expiry.
	Members []Member
	// Truncated: the set has more members than were read.
	Truncated bool

	// Counters, rate counters and locks: the value as stored; Int is it
	// as an integer when IsInt.
	Value string
	IsInt bool
	Int   int64

	// Lists: the length and the next element to be popped.
	Length int64
	Head   string
	// HeadCut: Head is the first MaxHeadBytes of the element's
	// HeadBytes.
	HeadBytes int64
	HeadCut   bool

	// Streams.
	Groups    []StreamGroup
	GroupsCut bool
}

// Member is one slot-set member (or a lock's token) with its state.
type Member struct {
	Member string
	Score  float64
	State  track.MemberState
	// Expiry and LastHeartbeat are Redis times in ms; Expiry is +Inf for
	// a lock without a lease, LastHeartbeat NaN where there is none.
	Expiry        float64
	LastHeartbeat float64
	// FirstSeen is when the exporter first saw the member, when Tracked.
	// An untracked member is classified as first seen now: it cannot be
	// told to be a zombie.
	FirstSeen int64
	Tracked   bool
	// Size is the member's length in bytes. Cut: it is longer than
	// MaxMemberBytes, and Member holds its first MaxHeadBytes bytes only;
	// it is neither looked up in the tracker nor released.
	Size int64
	Cut  bool
}

// StreamGroup is one consumer group of a stream.
type StreamGroup struct {
	Name          string
	Pending       int64
	Lag           int64 // -1: Redis cannot tell
	LastDelivered string
	Consumers     []StreamConsumer
	ConsumersCut  bool
}

// StreamConsumer is one consumer of a group.
type StreamConsumer struct {
	Name     string
	Pending  int64
	Idle     time.Duration
	Inactive time.Duration // -1: never active (or Redis before 7.2)
}

// ReadOptions bound and inform a live read.
type ReadOptions struct {
	// MaxMembers is how many members of a set are read (0: the default).
	MaxMembers int
	// FirstSeen, if not nil, supplies first-seen times from the tracker.
	FirstSeen FirstSeenFunc
}

// Readable reports whether a family's kind can be read live.
func Readable(k config.Kind) bool {
	switch k {
	case config.KindSlotSet, config.KindCounter, config.KindRateLimit, config.KindLock, config.KindList, config.KindStream:
		return true
	}
	return false
}

// Read finds a user's keys in a family and reads what they hold, with
// read-only commands. It tries the likely key names first and falls back
// to a bounded SCAN; h.Search says which it took.
func Read(ctx context.Context, topo *topology.Topology, f *config.Family, user string, o ReadOptions) (*Holdings, error) {
	if !Readable(f.Kind) {
		return nil, fmt.Errorf("family %s: kind %q cannot be read", f.Name, f.Kind)
	}
	if o.MaxMembers <= 0 {
		o.MaxMembers = DefaultMaxMembers
	}
	c := topo.Router()
	t, err := c.Time(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("TIME: %w", err)
	}
	h := &Holdings{Family: f, User: user, Now: t.UnixMilli()}
	for _, cand := range candidates(f, user) {
		h.Search.Tried = append(h.Search.Tried, cand.key)
		k, ok, err := readKey(ctx, c, f, cand.key, h.Now, o)
		if err != nil {
			return nil, err
		}
		if ok {
			h.Keys = append(h.Keys, k)
			if h.Search.How == "" {
				h.Search.How = cand.how
			}
		}
	}
	if len(h.Keys) > 0 {
		return h, nil
	}
	keys, err := scanForUser(ctx, topo, f, user, 1000, &h.Search)
	if err != nil {
		return nil, err
	}
	for _, key := range keys {
		k, ok, err := readKey(ctx, c, f, key, h.Now, o)
		if err != nil {
			return nil, err
		}
		if ok {
			h.Keys = append(h.Keys, k)
			h.Search.How = FoundByScan
		}
	}
	return h, nil
}

// readKey reads one key; false when it does not exist.
func readKey(ctx context.Context, c redis.Cmdable, f *config.Family, key string, now int64, o ReadOptions) (KeyHolding, bool, error) {
	k := KeyHolding{Key: key}
	var err error
	var ok bool
	switch f.Kind {
	case config.KindSlotSet:
		ok, err = readSlotSet(ctx, c, f, &k, now, o)
	case config.KindLock:
		ok, err = readLock(ctx, c, f, &k, now, o)
	case config.KindCounter, config.KindRateLimit:
		ok, err = readValue(ctx, c, &k, f.Kind == config.KindRateLimit)
	case config.KindList:
		ok, err = readList(ctx, c, f, &k)
	case config.KindStream:
		ok, err = readStream(ctx, c, &k)
	}
	if errors.Is(err, errNoRaw) {
		k.Problem = err.Error()
		return k, true, nil
	}
	if err != nil {
		if p := keyProblem(err); p != "" {
			k.Problem = p
			return k, true, nil
		}
		return k, false, fmt.Errorf("reading %q: %w", key, err)
	}
	return k, ok, nil
}

// keyProblem turns an error about one key into what the page says about
// it; "" for errors that fail the whole read.
func keyProblem(err error) string {
	var re redis.Error
	if !errors.As(err, &re) {
		return ""
	}
	msg := strings.TrimPrefix(re.Error(), "ERR ")
	switch {
	case strings.HasPrefix(msg, "WRONGTYPE"):
		return "holds a value of another type than the family's kind"
	case isRedirect(msg):
		// Read raw, a key does not follow its slot to another node.
		return "its cluster slot is moving to another node (" + msg + "): read the page again"
	case strings.HasPrefix(msg, "NOPERM") && strings.Contains(msg, " key"):
		// The command is allowed, this key is not (an ACL key pattern
		// narrower than the family's match). A command refused outright
		// fails the read: every key would be refused.
		return "the ACL refuses this key: " + msg
	}
	return ""
}
