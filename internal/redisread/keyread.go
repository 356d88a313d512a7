// Package redisread reads a family's keys: it SCANs a node (or takes a
// list of keys from discovery) and reads each key in pipelined batches,
// paced, slot sets over internal/resp's raw connections. Which servers to
// read is internal/topology's, which keys changed internal/changefeed's.
// What to read per key is the kind's choice (Reads); how a reply or an
// error is judged for one key is decided here, in one table, for both the
// go-redis path and the raw one.
package redisread

import (
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/resp"
)

// Status is what became of one key's read.
type Status uint8

const (
	// OK: the key was read; the kind's fields hold what it holds.
	OK Status = iota
	// Gone: deleted between discovery and the read.
	Gone
	// Skipped: matched but not usable; SkipReason says why.
	Skipped
	// Missed: not readable in this sweep for a reason that says nothing
	// about the key (it moved to another cluster node mid-sweep): what
	// it held is carried, not ended.
	Missed
)

// SkipReason says why a key was skipped.
type SkipReason uint8

const (
	SkipWrongType SkipReason = iota
	SkipBadUser
	SkipOversized
	SkipBadValue
	// SkipNoPermission: the ACL lets the exporter list the key but not
	// read it (a pattern narrower than the family's match).
	SkipNoPermission
	// SkipValueTooLarge: a string kind's value is longer than
	// MaxValueBytes; only its first bytes were read.
	SkipValueTooLarge
	NumSkipReasons
)

var skipNames = [NumSkipReasons]string{"wrong_type", "bad_user", "oversized", "bad_value", "no_permission", "value_too_large"}

func (r SkipReason) String() string {
	if r < NumSkipReasons {
		return skipNames[r]
	}
	return "unknown"
}

// SkipReasonNames are the label values of keys_skipped_total{reason}.
func SkipReasonNames() [NumSkipReasons]string { return skipNames }

// KeyRead is what one read returned for one key. Which of the value
// fields are filled depends on the Reads that read it.
type KeyRead struct {
	Key    string
	Status Status
	Skip   SkipReason
	// PTTL is the key's PTTL in ms; -1 no expiry, -2 no key. With a
	// Plan.Now, it is the time left at Now (see At).
	PTTL int64
	// At is the Redis time (ms) PTTL counts from: Plan.Now when the read
	// was stamped with a TIME in its own pipeline, else 0 (PTTL counts
	// from some moment of the read).
	At int64

	// Sorted sets (ZSetReads).
	Members []Member
	// Oversized sets are counted by score range instead of being read.
	Oversized bool
	Ranges    [NumRanges]int64
	// Newest is the highest score of an oversized set (its newest slot).
	Newest float64

	// Strings: Value is the integer value, Text the raw one.
	Value int64
	Text  string

	// Extra is a kind's own decoded value for what the fields above do
	// not cover (a list's head, a stream's groups).
	Extra any
}

// Member is one member of a sorted set as read: known only by its hash
// (key, 0, member), computed as the reply is read, so that no string is
// made per member.
type Member struct {
	Hash  uint64
	Score float64 // in the key's own score unit
}

// skip marks r skipped for reason.
func (r *KeyRead) skip(reason SkipReason) {
	r.Status, r.Skip = Skipped, reason
}

// judgeError decides whether an error reply for one key is about that
// key (mark it and keep sweeping: nil) or about the connection or the
// server (fail the sweep). msg is the error text as Redis sent it.
func judgeError(r *KeyRead, msg string) error {
	m := strings.TrimPrefix(msg, "ERR ") // as redis.HasErrorPrefix does
	switch {
	case strings.HasPrefix(m, "WRONGTYPE"):
		r.skip(SkipWrongType)
		return nil
	case strings.HasPrefix(msg, "MOVED "), strings.HasPrefix(msg, "ASK "), strings.HasPrefix(m, "TRYAGAIN"):
		r.Status = Missed
		return nil
	case strings.HasPrefix(m, "NOPERM") && strings.Contains(m, " key"):
		// "NOPERM ... no permissions to access one of the keys": the
		// command is allowed, this key is not. A command the ACL refuses
		// outright ("to run the 'zrange' command") fails the sweep: every
		// key would be skipped and nothing would say why.
		r.skip(SkipNoPermission)
		return nil
	}
	return fmt.Errorf("reading %q: %w", r.Key, resp.ReplyError(msg))
}

// CommandRefused: msg is the ACL refusing a command outright ("NOPERM
// this user has no permissions to run the 'zscan' command"), not one key.
func CommandRefused(msg string) bool {
	m := strings.TrimPrefix(msg, "ERR ")
	return strings.HasPrefix(m, "NOPERM") && !strings.Contains(m, " key")
}

// judgeErr is judgeError for an error from go-redis: redis.Nil is a key
// that is gone; a Redis error reply goes through judgeError; anything else
// (I/O, timeouts) fails the sweep.
func judgeErr(r *KeyRead, err error) error {
	if errors.Is(err, redis.Nil) {
		r.Status = Gone
		return nil
	}
	var re redis.Error
	if errors.As(err, &re) {
		return judgeError(r, re.Error())
	}
	return fmt.Errorf("reading %q: %w", r.Key, err)
}

// Judge marks r for an error from reading it through go-redis, as the
// built-in Reads do: nil when the error was about this key alone (r says
// how: gone, skipped, missed), the error to fail the sweep with otherwise.
// A kind's own Reads uses it so that every kind judges errors alike.
func (r *KeyRead) Judge(err error) error { return judgeErr(r, err) }

// SkipAs marks r skipped for reason (a kind's own Reads, for a value it
// cannot use).
func (r *KeyRead) SkipAs(reason SkipReason) { r.skip(reason) }
