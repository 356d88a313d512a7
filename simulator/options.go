package simulator

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/slotexporter/slot_exporter/limiter"
)

// Defaults for zero Options fields.
const (
	DefaultUsers          = 100
	DefaultKeyPrefix      = "joishi:streams:"
	DefaultStreamRate     = 10
	DefaultStreamDuration = 60 * time.Second
	DefaultWorkers        = 8
	FreeLimit             = 1
	PaidLimit             = 3
)

// maxBatch bounds the commands of one pipeline.
const maxBatch = 500

// Options configures a simulation. Rates are shares in [0, 1] drawn
// independently per stream, except CrashRate and ZombieRate, which are
// exclusive (their sum must be at most 1).
type Options struct {
	// Users is the number of users, named u0 .. u<Users-1> (default 100).
	Users int
	// FreeShare is the share of users on the free plan (limit FreeLimit);
	// the others are paid (limit PaidLimit). Ignored when Limit > 0.
	FreeShare float64
	// Limit, when > 0, is every user's limit.
	Limit int
	// KeyPrefix prefixes slot sets: KeyPrefix+"{"+user+"}", e.g.
	// "joishi:streams:{u17}" (default "joishi:streams:").
	KeyPrefix string
	// CounterPrefix prefixes legacy counters the same way, e.g.
	// "joishi:streams-legacy:{u17}". Empty disables counters. A stream that
	// got its slot INCRs its user's counter and DECRs it when it ends.
	CounterPrefix string
	// StreamRate is new streams per second across all users, Poisson
	// arrivals (default 10).
	StreamRate float64
	// StreamDuration is the mean stream duration; each stream lasts uniformly
	// 50%..150% of it (default 60s).
	StreamDuration time.Duration
	// TTL and HeartbeatInterval are the limiter's (defaults 120s and 20s).
	TTL, HeartbeatInterval time.Duration
	// CrashRate is the share of streams whose holder dies at a random point
	// mid-stream: it stops heartbeating, never releases, never DECRs.
	CrashRate float64
	// ZombieRate is the share of streams whose heartbeat loop outlives the
	// stream: it keeps heartbeating until Stop and never releases.
	ZombieRate float64
	// FutureRate is the share of acquires whose score is then rewritten with
	// a unit bug: now in microseconds (+ ttl in ms) instead of milliseconds.
	// The holder then heartbeats and releases normally; its heartbeats
	// cannot lower that score (GT), so the member stays "future" until it is
	// released or its holder dies, when it is never pruned.
	FutureRate float64
	// NoRefreshRate is the share of holders heartbeating with
	// limiter.HeartbeatNoRefresh: their key may expire under live slots.
	NoRefreshRate float64
	// CounterLeakRate is the share of counter-holding streams that end
	// without DECR.
	CounterLeakRate float64
	// Seed seeds the random draws (users, plans, fates, durations, kills;
	// which users each recipe actor drives, its phase, holds and work times).
	Seed int64
	// Now is the clock scores are computed from (default time.Now).
	// Scheduling always uses the real clock.
	Now func() time.Time
	// Workers is the number of concurrent acquires (default 8). Arrivals
	// that find all workers busy and the queue full are dropped and
	// counted in Truth.Dropped.
	Workers int

	// NoSlotStreams turns the slot-set stream workload off, and the legacy
	// counters with it: for runs of the other recipes alone.
	NoSlotStreams bool

	// The other recipes, each off unless one of its counts is above zero.
	// Each drives one key per user (users picked from u0..u<Users-1> by
	// Seed, distinct within a kind), healthy or with one failure.
	RateLimits   RateLimitWorkload
	Locks        LockWorkload
	ListQueues   ListQueueWorkload
	StreamQueues StreamQueueWorkload
}

func (o *Options) validate() error {
	if o.Users < 0 || o.Limit < 0 || o.Workers < 0 {
		return errors.New("simulator: Users, Limit and Workers must not be negative")
	}
	if o.StreamRate < 0 || math.IsNaN(o.StreamRate) || math.IsInf(o.StreamRate, 0) {
		return errors.New("simulator: StreamRate must be a finite number >= 0")
	}
	if o.StreamDuration < 0 || o.TTL < 0 || o.HeartbeatInterval < 0 {
		return errors.New("simulator: durations must not be negative")
	}
	for name, r := range map[string]float64{
		"FreeShare": o.FreeShare, "CrashRate": o.CrashRate, "ZombieRate": o.ZombieRate,
		"FutureRate": o.FutureRate, "NoRefreshRate": o.NoRefreshRate, "CounterLeakRate": o.CounterLeakRate,
	} {
		if !(r >= 0 && r <= 1) {
			return fmt.Errorf("simulator: %s %v is not in [0, 1]", name, r)
		}
	}
	if o.CrashRate+o.ZombieRate > 1 {
		return errors.New("simulator: CrashRate + ZombieRate must be at most 1")
	}
	if o.Users == 0 {
		o.Users = DefaultUsers
	}
	if o.KeyPrefix == "" {
		o.KeyPrefix = DefaultKeyPrefix
	}
	if o.StreamRate == 0 {
		o.StreamRate = DefaultStreamRate
	}
	if o.StreamDuration == 0 {
		o.StreamDuration = DefaultStreamDuration
	}
	if o.TTL == 0 {
		o.TTL = limiter.DefaultTTL
	}
	if o.HeartbeatInterval == 0 {
		o.HeartbeatInterval = limiter.DefaultHeartbeatInterval
	}
	if o.HeartbeatInterval >= o.TTL {
		return fmt.Errorf("simulator: HeartbeatInterval %v must be shorter than TTL %v", o.HeartbeatInterval, o.TTL)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Workers == 0 {
		o.Workers = DefaultWorkers
	}
	for _, w := range []interface{ validate(users int) error }{&o.RateLimits, &o.Locks, &o.ListQueues, &o.StreamQueues} {
		if err := w.validate(o.Users); err != nil {
			return err
		}
	}
	return nil
}

// checkCounts refuses negative actor counts, and more actors in one kind
// than there are users: each actor owns one user's key.
func checkCounts(kind string, users int, counts map[string]int) (int, error) {
	total := 0
	for name, n := range counts {
		if n < 0 {
			return 0, fmt.Errorf("simulator: %s.%s %d must not be negative", kind, name, n)
		}
		total += n
	}
	if total > users {
		return 0, fmt.Errorf("simulator: %s drives %d keys, one per user, but there are only %d users", kind, total, users)
	}
	return total, nil
}

// checkDurations refuses negative durations.
func checkDurations(kind string, ds map[string]time.Duration) error {
	for name, d := range ds {
		if d < 0 {
			return fmt.Errorf("simulator: %s.%s %v must not be negative", kind, name, d)
		}
	}
	return nil
}

// orDefault returns d, or def when d is zero.
func orDefault[T comparable](d, def T) T {
	var zero T
	if d == zero {
		return def
	}
	return d
}

func errorf(format string, a ...any) error {
	return fmt.Errorf("simulator: "+format, a...)
}

// modeList lists each mode of order as many times as counts says.
func modeList(counts map[string]int, order []string) []string {
	var out []string
	for _, m := range order {
		for range counts[m] {
			out = append(out, m)
		}
	}
	return out
}
