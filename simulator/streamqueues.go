package simulator

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/slotexporter/slot_exporter/recipe/streamqueue"
)

// Stream queue modes, besides ModeHealthy.
const (
	// StreamDeadConsumer: two consumers, no claim loop; one is killed right
	// after its first read that returned an entry and never comes back. Its
	// entry stays pending for ever (stuck), and it stays in the group, dead.
	StreamDeadConsumer = "dead_consumer"
	// StreamPoison: the stream's third entry kills every consumer that takes
	// it. Its consumer comes back after RestartDelay under the same name and
	// claims the entry again once it has been idle for MinIdle: its delivery
	// count climbs for ever.
	StreamPoison = "poison"
	// StreamLagging: a consumer that needs 2 × AddInterval per entry; the
	// group falls behind.
	StreamLagging = "lagging"
)

// Stream queue workload defaults.
const (
	DefaultStreamPrefix      = "stream:events:"
	DefaultStreamGroup       = "workers"
	DefaultStreamAddInterval = time.Second
	DefaultStreamMinIdle     = 2 * time.Second
	DefaultStreamMaxHold     = time.Minute
	DefaultMaxDeliveries     = 5
	// poisonEntry is the number of the entry that kills its consumers.
	poisonEntry = 3
)

// StreamQueueWorkload drives streams with consumer groups (package
// recipe/streamqueue): one stream per user, Prefix+"{"+user+"}", with one
// group, a producer adding an entry every AddInterval, and consumers that
// read one entry at a time (XREADGROUP COUNT 1), work on it and XACK it.
// Healthy, poison and lagging consumers run the claim loop (XAUTOCLAIM of
// entries idle for MinIdle) before each read. The counts say how many
// streams run in each mode; all zero (the default) turns the workload off.
type StreamQueueWorkload struct {
	// Prefix prefixes the streams (default "stream:events:").
	Prefix string
	// Group is the consumer group (default "workers").
	Group string
	// AddInterval is the time between two entries of one stream (default 1s).
	AddInterval time.Duration
	// Process is the mean time a consumer spends on an entry; each takes
	// uniformly 50%..150% of it (default AddInterval/2).
	Process time.Duration
	// MinIdle is the claim loop's XAUTOCLAIM min-idle-time (default 2s); it
	// must exceed 1.5 × Process.
	MinIdle time.Duration
	// RestartDelay is how long a consumer killed by a poison entry stays
	// down (default 1s).
	RestartDelay time.Duration
	// MaxHold and MaxDeliveries are the exporter's, used to count stuck
	// entries, dead consumers and poison entries in the truth (defaults 1m
	// and 5). MaxHold must exceed every healthy wait: 1.5 × Process,
	// 2 × AddInterval and MinIdle + RestartDelay.
	MaxHold       time.Duration
	MaxDeliveries int64

	Healthy      int // streams with a healthy consumer
	DeadConsumer int // StreamDeadConsumer streams
	Poison       int // StreamPoison streams
	Lagging      int // StreamLagging streams
}

func (w *StreamQueueWorkload) validate(users int) error {
	total, err := checkCounts("StreamQueues", users, map[string]int{
		"Healthy": w.Healthy, "DeadConsumer": w.DeadConsumer, "Poison": w.Poison, "Lagging": w.Lagging,
	})
	if err != nil {
		return err
	}
	if err := checkDurations("StreamQueues", map[string]time.Duration{
		"AddInterval": w.AddInterval, "Process": w.Process, "MinIdle": w.MinIdle,
		"RestartDelay": w.RestartDelay, "MaxHold": w.MaxHold,
	}); err != nil {
		return err
	}
	if w.MaxDeliveries < 0 {
		return errorf("StreamQueues.MaxDeliveries %d must not be negative", w.MaxDeliveries)
	}
	if total == 0 {
		return nil
	}
	w.Prefix = orDefault(w.Prefix, DefaultStreamPrefix)
	w.Group = orDefault(w.Group, DefaultStreamGroup)
	w.AddInterval = orDefault(w.AddInterval, DefaultStreamAddInterval)
	w.Process = orDefault(w.Process, w.AddInterval/2)
	w.MinIdle = orDefault(w.MinIdle, DefaultStreamMinIdle)
	w.RestartDelay = orDefault(w.RestartDelay, DefaultRestartDelay)
	w.MaxHold = orDefault(w.MaxHold, DefaultStreamMaxHold)
	w.MaxDeliveries = orDefault(w.MaxDeliveries, DefaultMaxDeliveries)
	if w.MinIdle <= w.Process*3/2 {
		return errorf("StreamQueues.MinIdle %v must exceed 1.5 × StreamQueues.Process %v", w.MinIdle, w.Process)
	}
	if w.MaxHold <= max(w.Process*3/2, 2*w.AddInterval, w.MinIdle+w.RestartDelay) {
		return errorf("StreamQueues.MaxHold %v must exceed 1.5 × Process, 2 × AddInterval and MinIdle + RestartDelay", w.MaxHold)
	}
	return nil
}

// StreamQueueTruth is the stream workload's ground truth. Gauges describe
// the streams and their group in Redis at Truth.At. An entry's idle time is
// the time since its last delivery (read or claim); a consumer's, the time
// since its last XREADGROUP or XAUTOCLAIM.
type StreamQueueTruth struct {
	Group          string  `json:"group"`
	MaxHoldSeconds float64 `json:"max_hold_seconds"`
	MaxDeliveries  int64   `json:"max_deliveries"`
	// Users maps each stream's user to its mode.
	Users map[string]string `json:"users"`

	Added     int64 `json:"added"`     // entries added
	Delivered int64 `json:"delivered"` // first deliveries (XREADGROUP >)
	Claimed   int64 `json:"claimed"`   // redeliveries (XAUTOCLAIM)
	Acked     int64 `json:"acked"`     // entries acknowledged

	Entries int64 `json:"entries"` // XLEN over all streams (nothing is trimmed)
	Pending int64 `json:"pending"` // delivered, not acked
	Lag     int64 `json:"lag"`     // added, never delivered
	// PendingStuck counts pending entries idle for longer than MaxHold.
	PendingStuck int64 `json:"pending_stuck"`
	// ConsumersDead counts consumers with pending entries, idle for longer
	// than MaxHold.
	ConsumersDead int64 `json:"consumers_dead"`
	// Redelivered counts pending entries delivered more than MaxDeliveries
	// times.
	Redelivered int64 `json:"redelivered"`

	// By user, where not zero.
	Used                 map[string]int64   `json:"used"` // pending
	LagUsers             map[string]int64   `json:"lag_users"`
	StuckUsers           map[string]int64   `json:"stuck_users"`
	DeadConsumerUsers    map[string]int64   `json:"dead_consumer_users"`
	RedeliveredUsers     map[string]int64   `json:"redelivered_users"`
	MaxDeliveriesByUser  map[string]int64   `json:"max_deliveries_by_user"` // highest delivery count of a pending entry
	OldestPendingSeconds map[string]float64 `json:"oldest_pending_seconds"` // age of the oldest pending entry, from its ID's time

	// Of StuckUsers and DeadConsumerUsers, those Redis may not count yet.
	// The truth dates a delivery (or a consumer's last command) at the
	// command's sending, Redis when it ran, up to the reply. Where the
	// reply came less than MaxHold ago, Redis's verdict goes either way: a
	// busy machine can leave a command in flight for longer than the
	// distance to the edge. Where not zero.
	StuckUnsureUsers map[string]int64 `json:"stuck_unsure_users"`
	DeadUnsureUsers  map[string]int64 `json:"dead_unsure_users"`
}

type streamWorkload struct {
	s *Sim
	o StreamQueueWorkload

	mu        sync.Mutex
	streams   []*streamQueue
	added     int64
	delivered int64
	claimed   int64
	acked     int64
	errors    int64
}

type streamQueue struct {
	user, mode string
	st         *streamqueue.Stream
	rng        *rand.Rand
	ready      chan struct{} // closed once the producer has reset the stream

	// Guarded by streamWorkload.mu.
	added     int64
	delivered int64
	pending   map[string]*pendingEntry // by entry ID
	seen      map[string]span          // by consumer: its last read or claim
}

type pendingEntry struct {
	consumer   string
	delivered  span
	deliveries int64
}

// span is a command's time, from its sending to its reply. Redis dates what
// the command did somewhere in between; an idle time is measured from the
// sending, the longest it can be, and is known to within the span.
type span struct{ sent, replied time.Time }

// beyond reports whether d has passed since the span at now: surely, by
// its reply, or only by its sending.
func (a span) beyond(now time.Time, d time.Duration) (sure, maybe bool) {
	return now.Sub(a.replied) > d, now.Sub(a.sent) > d
}

func newStreamWorkload(s *Sim) *streamWorkload {
	o := s.o.StreamQueues
	modes := modeList(map[string]int{
		ModeHealthy: o.Healthy, StreamDeadConsumer: o.DeadConsumer, StreamPoison: o.Poison, StreamLagging: o.Lagging,
	}, []string{ModeHealthy, StreamDeadConsumer, StreamPoison, StreamLagging})
	if len(modes) == 0 {
		return nil
	}
	w := &streamWorkload{s: s, o: o}
	users := s.pickUsers(saltStreamUsers, len(modes))
	for i, mode := range modes {
		// Options were validated: New cannot fail.
		st, _ := streamqueue.New(s.c, s.StreamKey(users[i]), o.Group)
		w.streams = append(w.streams, &streamQueue{
			user: users[i], mode: mode, st: st, rng: s.actorRng(saltStreamUsers, i), ready: make(chan struct{}),
			pending: map[string]*pendingEntry{}, seen: map[string]span{},
		})
	}
	return w
}

// StreamKey returns user's stream ("" when the workload is off).
func (s *Sim) StreamKey(user string) string {
	if s.o.StreamQueues.Prefix == "" {
		return ""
	}
	return s.o.StreamQueues.Prefix + "{" + user + "}"
}

// idTime is the time in a stream entry ID (milliseconds-sequence).
func idTime(id string) time.Time {
	ms, _, _ := strings.Cut(id, "-")
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.UnixMilli(n)
}

func (w *streamWorkload) fill(t *Truth, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	o := w.o
	st := &StreamQueueTruth{
		Group: o.Group, MaxHoldSeconds: o.MaxHold.Seconds(), MaxDeliveries: o.MaxDeliveries, Users: map[string]string{},
		Added: w.added, Delivered: w.delivered, Claimed: w.claimed, Acked: w.acked,
		Used: map[string]int64{}, LagUsers: map[string]int64{}, StuckUsers: map[string]int64{},
		DeadConsumerUsers: map[string]int64{}, RedeliveredUsers: map[string]int64{},
		StuckUnsureUsers: map[string]int64{}, DeadUnsureUsers: map[string]int64{},
		MaxDeliveriesByUser: map[string]int64{}, OldestPendingSeconds: map[string]float64{},
	}
	for _, sq := range w.streams {
		u := sq.user
		st.Users[u] = sq.mode
		st.Entries += sq.added
		if lag := sq.added - sq.delivered; lag > 0 {
			st.Lag += lag
			st.LagUsers[u] = lag
		}
		owners := map[string]bool{}
		var oldest time.Time
		for id, p := range sq.pending {
			st.Pending++
			st.Used[u]++
			owners[p.consumer] = true
			if sure, maybe := p.delivered.beyond(now, o.MaxHold); maybe {
				st.PendingStuck++
				st.StuckUsers[u]++
				if !sure {
					st.StuckUnsureUsers[u]++
				}
			}
			if p.deliveries > o.MaxDeliveries {
				st.Redelivered++
				st.RedeliveredUsers[u]++
			}
			st.MaxDeliveriesByUser[u] = max(st.MaxDeliveriesByUser[u], p.deliveries)
			if at := idTime(id); oldest.IsZero() || at.Before(oldest) {
				oldest = at
			}
		}
		if !oldest.IsZero() {
			st.OldestPendingSeconds[u] = now.Sub(oldest).Seconds()
		}
		for c := range owners {
			if sure, maybe := sq.seen[c].beyond(now, o.MaxHold); maybe {
				st.ConsumersDead++
				st.DeadConsumerUsers[u]++
				if !sure {
					st.DeadUnsureUsers[u]++
				}
			}
		}
	}
	t.StreamQueues = st
	t.Errors += w.errors
}
