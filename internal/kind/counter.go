package kind

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/redisread"
	"github.com/slotexporter/slot_exporter/internal/snapshot"
	"github.com/slotexporter/slot_exporter/internal/track"
)

// A counter is the legacy INCR/DECR cap: an integer string per user whose
// value is the user's used. It reads a bounded GET (GETRANGE 0
// redisread.MaxValueBytes; a longer value is skipped as value_too_large,
// one Redis would not INCR as bad_value) and PTTL when it holds keys to
// replay them; a value below zero (a DECR without its INCR) feeds
// slot_counters_negative and counts as 0.
func init() { register(config.KindCounter, newCounter) }

type counter struct {
	limit     int64
	cur, last int // negative counters
	held      map[uint64]counterHeld
	gen       uint32
	// withTTL: this sweep reads PTTL, for the expiry of the keys held.
	withTTL bool
}

type counterHeld struct {
	user   uint64
	value  int64
	expiry int64 // Redis ms; -1 none
	gen    uint32
}

func newCounter(f *config.Family, _ *config.Sampling) Tracker {
	return &counter{limit: int64(f.Limit), held: map[uint64]counterHeld{}}
}

func (c *counter) Reconfigure(f *config.Family, _ *config.Sampling) { c.limit = int64(f.Limit) }

func (c *counter) Limits() track.Limits {
	return track.Limits{Limit: c.limit, OverLimitIsAnomaly: true}
}

func (c *counter) Begin(sw *Sweep) redisread.Reads {
	c.cur = 0
	c.gen++
	// A key held for replay needs its expiry: client tracking names a
	// key whose TTL ran out only once Redis deletes it, which a busy
	// server's expiry cycle may do long after, while a full read finds
	// it gone at once.
	c.withTTL = sw.Hold
	if c.withTTL {
		return counterReads{}
	}
	return &redisread.IntReads{}
}

func (c *counter) Apply(sw *Sweep, k Key) {
	switch {
	case !sw.Hold:
	case !c.withTTL || k.Read.PTTL == pttlUnknown:
		delete(c.held, k.Hash)
	default:
		c.held[k.Hash] = counterHeld{user: k.UserHash, value: k.Read.Value, expiry: expiryOf(k.Read.PTTL, sw.Now), gen: c.gen}
	}
	c.apply(sw, k.UserHash, k.User, k.Read.Value)
}

func (c *counter) Held(h uint64) bool { _, ok := c.held[h]; return ok }

func (c *counter) Forget(h uint64) { delete(c.held, h) }

// Replay: a counter's value changes only by writes; a held expiry
// already passed is a key gone.
func (c *counter) Replay(sw *Sweep) int {
	n := 0
	for h, e := range c.held {
		if e.gen == c.gen {
			continue
		}
		if _, ok := sw.Carry[uint32(h)]; ok {
			continue
		}
		if _, ok := remaining(e.expiry, sw.Now); !ok {
			delete(c.held, h)
			continue
		}
		e.gen = c.gen
		c.held[h] = e
		c.apply(sw, e.user, "", e.value)
		n++
	}
	return n
}

func (c *counter) apply(sw *Sweep, userHash uint64, user string, value int64) {
	used, flags := value, uint8(0)
	if used < 0 {
		c.cur++
		flags |= track.AnomalyNegative
		used = 0
	}
	sw.Floor.Add(userHash, user, used, flags)
}

func (c *counter) End(sw *Sweep, _, deferEnds bool) Ended {
	c.last = c.cur
	if !deferEnds {
		dropUnseen(c.held, c.gen, sw.Carry, func(e counterHeld) uint32 { return e.gen })
	}
	return Ended{}
}

func (c *counter) Publish(f *snapshot.Family) {
	f.Gauges = append(f.Gauges, gauge(snapshot.CountersNeg, float64(c.last)))
}

func (c *counter) UserExtra(track.UserView) []snapshot.Value { return nil }

// counterReads reads a counter held for replay: a bounded GET
// (redisread.BoundedGet) and PTTL, pipelined; values are judged as
// redisread.IntReads judges them.
// A PTTL the ACL refuses leaves the key unheld (pttlUnknown), read every
// sweep, rather than failing the sweep of an ACL written for GET alone.
type counterReads struct{}

func (counterReads) Read(ctx context.Context, c redis.Cmdable, keys []string, reads []redisread.KeyRead) error {
	pipe := c.Pipeline()
	gets := make([]*redis.StringCmd, len(keys))
	ttls := make([]*redis.DurationCmd, len(keys))
	for i, k := range keys {
		gets[i] = redisread.BoundedGet(ctx, pipe, k)
		ttls[i] = pipe.PTTL(ctx, k)
	}
	_, _ = pipe.Exec(ctx)
	for i, k := range keys {
		r := &reads[i]
		r.Key = k
		v, err := gets[i].Result()
		if err != nil {
			if err := r.Judge(err); err != nil {
				return err
			}
			continue
		}
		if r.PTTL, err = heldPTTL(ttls[i]); err != nil {
			if err := r.Judge(err); err != nil {
				return err
			}
			continue
		}
		// GETRANGE answers "" for a missing key; PTTL tells, unless the
		// ACL refused it (then "", no integer either way, is gone).
		if r.PTTL == -2 || r.PTTL == pttlUnknown && v == "" {
			r.Status = redisread.Gone
			continue
		}
		r.SetInt(v)
	}
	return nil
}
