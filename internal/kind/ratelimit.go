package kind

import (
	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/redisread"
	"github.com/slotexporter/slot_exporter/internal/snapshot"
	"github.com/slotexporter/slot_exporter/internal/track"
)

// A rate limit is a fixed-window counter per caller: INCR on every hit,
// PEXPIRE window on the first. It reads a bounded GET (GETRANGE 0
// redisread.MaxValueBytes) and PTTL; a value longer than that is skipped
// as value_too_large, one Redis would not INCR as bad_value. used is the value (a negative one
// counts as 0); at the limit is "refused right now", and over it is
// routine (refused hits still count), so it raises no anomaly and
// slot_users_over_limit is not emitted.
//
// The floor's baseline is the counter restarting. A key restarted between
// two sweeps when:
//   - its value went down (INCR never lowers it; a new window starts at 1);
//   - or the expiry seen in the previous sweep has passed: that key is gone,
//     whatever the value now says. A writer that PEXPIREs on every hit moves
//     the expiry forward with every hit, so its key never passes the expiry
//     last seen and never restarts, which is the bug the floor shows; a
//     caller hitting once per window, whose value stays 1, restarts.
//   - or the key vanished (it is then at 0 for the sweep, as any kind).
//
// The previous expiry is the sweep's start plus PTTL, with PTTL counted
// from the sweep's Redis time (redisread.Plan.Now), so it is the key's
// expiry to within the batch's round trip however long a paced sweep takes
// to reach the key.
//
// What sampling cannot tell: with a window shorter than sampling.interval
// no sweep sees the same window twice, so a writer that PEXPIREs on every
// hit looks like one that restarts (watch such families with an interval
// below the window); and a writer that lowers the value itself (a DECR to
// refund a refused hit) reads as a restart.
//
// Gauges:
//   - slot_ratelimit_keys_without_ttl: PTTL -1 (INCR, then a crash before
//     the EXPIRE: the window never ends).
//   - slot_ratelimit_keys_ttl_beyond_window: PTTL > window + min(window, 1s).
//     A healthy key's PTTL is at most the window; the margin lets a writer
//     round its window up to whole seconds, and a unit bug is 1000 times off.
//   - slot_ratelimit_callers_locked_out: keys at or over limit (when the
//     family has one) with no TTL, or not restarted for longer than
//     2 x window (a key the exporter has just found counts from then).
//     Without a limit nobody is locked out.
//
// A user with any of the three conditions carries AnomalyKind, so that the
// series cap shows them first.
func init() { register(config.KindRateLimit, newRateLimit) }

type rateLimit struct {
	limit  int64
	window int64 // ms
	keys   map[uint64]rateKey
	gen    uint32
	cur    rateGauges
	last   rateGauges
}

// rateKey is what the last sweep saw of one counter.
type rateKey struct {
	user   uint64
	value  int64
	expiry int64 // Redis time (ms) the key expires; -1 none
	since  int64 // when it last restarted, or was first seen (ms)
	gen    uint32
}

type rateGauges struct {
	withoutTTL, beyondWindow, lockedOut int
}

func newRateLimit(f *config.Family, _ *config.Sampling) Tracker {
	return &rateLimit{limit: int64(f.Limit), window: f.Window.Milliseconds(), keys: map[uint64]rateKey{}}
}

func (t *rateLimit) Reconfigure(f *config.Family, _ *config.Sampling) {
	t.limit, t.window = int64(f.Limit), f.Window.Milliseconds()
}

func (t *rateLimit) Limits() track.Limits {
	return track.Limits{Limit: t.limit, OverLimitIsAnomaly: false}
}

func (t *rateLimit) Begin(*Sweep) redisread.Reads {
	t.gen++
	t.cur = rateGauges{}
	return &redisread.IntReads{WithTTL: true}
}

// ttlMargin is how far past the window a PTTL may reach before it counts
// as beyond it.
func (t *rateLimit) ttlMargin() int64 { return min(t.window, 1000) }

func (t *rateLimit) Apply(sw *Sweep, k Key) {
	kr := k.Read
	value := kr.Value
	expiry := int64(-1)
	if kr.PTTL >= 0 {
		expiry = sw.Now + kr.PTTL
	}
	prev, seen := t.keys[k.Hash]
	restarted := seen && prev.gen != t.gen &&
		(value < prev.value || prev.expiry >= 0 && sw.Now > prev.expiry)
	since := sw.Now
	if seen && !restarted {
		// Time stepping back never makes a run older than now.
		since = min(prev.since, sw.Now)
	}
	t.keys[k.Hash] = rateKey{user: k.UserHash, value: value, expiry: expiry, since: since, gen: t.gen}

	var flags uint8
	if kr.PTTL == -1 {
		t.cur.withoutTTL++
		flags |= track.AnomalyKind
	}
	if kr.PTTL > t.window+t.ttlMargin() {
		t.cur.beyondWindow++
		flags |= track.AnomalyKind
	}
	if t.limit > 0 && value >= t.limit && (kr.PTTL == -1 || sw.Now-since > 2*t.window) {
		t.cur.lockedOut++
		flags |= track.AnomalyKind
	}
	if restarted {
		sw.Floor.Restarted(k.UserHash, k.User)
	}
	sw.Floor.Add(k.UserHash, k.User, max(value, 0), flags)
}

func (t *rateLimit) Held(h uint64) bool { _, ok := t.keys[h]; return ok }

func (t *rateLimit) Forget(h uint64) { delete(t.keys, h) }

// Replay: a counter's value changes only by writes, and its window only
// ends by expiring, which Redis reports as a deletion; a held expiry
// already passed is a key gone.
func (t *rateLimit) Replay(sw *Sweep) int {
	n := 0
	for h, r := range t.keys {
		if r.gen == t.gen {
			continue
		}
		if _, ok := sw.Carry[uint32(h)]; ok {
			continue
		}
		pttl, ok := remaining(r.expiry, sw.Now)
		if !ok {
			delete(t.keys, h)
			continue
		}
		kr := redisread.KeyRead{Status: redisread.OK, Value: r.value, PTTL: pttl, At: sw.Now}
		t.Apply(sw, Key{Read: &kr, Hash: h, UserHash: r.user})
		n++
	}
	return n
}

func (t *rateLimit) End(sw *Sweep, _, deferEnds bool) Ended {
	t.last = t.cur
	if deferEnds {
		return Ended{}
	}
	// A counter not seen is gone (expired, deleted, or lost with the
	// data): if it comes back, it is a new window. One that could not be
	// read keeps its history.
	for h, r := range t.keys {
		if r.gen == t.gen {
			continue
		}
		if _, ok := sw.Carry[uint32(h)]; !ok {
			delete(t.keys, h)
		}
	}
	return Ended{}
}

func (t *rateLimit) Publish(f *snapshot.Family) {
	f.Gauges = append(f.Gauges,
		gauge(snapshot.RateNoTTL, float64(t.last.withoutTTL)),
		gauge(snapshot.RateTTLBeyond, float64(t.last.beyondWindow)),
		gauge(snapshot.RateLockedOut, float64(t.last.lockedOut)))
}

func (t *rateLimit) UserExtra(track.UserView) []snapshot.Value { return nil }
