package kind

import (
	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/redisread"
	"github.com/slotexporter/slot_exporter/internal/snapshot"
	"github.com/slotexporter/slot_exporter/internal/track"
)

// A counter is the legacy INCR/DECR cap: an integer string per user whose
// value is the user's used. It reads GET; a value below zero (a DECR
// without its INCR) feeds slot_counters_negative and counts as 0.
func init() { register(config.KindCounter, newCounter) }

type counter struct {
	limit     int64
	cur, last int // negative counters
	held      map[uint64]counterHeld
	gen       uint32
}

type counterHeld struct {
	user  uint64
	value int64
	gen   uint32
}

func newCounter(f *config.Family, _ *config.Sampling) Tracker {
	return &counter{limit: int64(f.Limit), held: map[uint64]counterHeld{}}
}

func (c *counter) Reconfigure(f *config.Family, _ *config.Sampling) { c.limit = int64(f.Limit) }

func (c *counter) Limits() track.Limits {
	return track.Limits{Limit: c.limit, OverLimitIsAnomaly: true}
}

func (c *counter) Begin(*Sweep) redisread.Reads {
	c.cur = 0
	c.gen++
	return &redisread.IntReads{}
}

func (c *counter) Apply(sw *Sweep, k Key) {
	if sw.Hold {
		c.held[k.Hash] = counterHeld{user: k.UserHash, value: k.Read.Value, gen: c.gen}
	}
	c.apply(sw, k.UserHash, k.User, k.Read.Value)
}

func (c *counter) Held(h uint64) bool { _, ok := c.held[h]; return ok }

func (c *counter) Forget(h uint64) { delete(c.held, h) }

// Replay: a counter's value changes only by writes.
func (c *counter) Replay(sw *Sweep) int {
	n := 0
	for h, e := range c.held {
		if e.gen == c.gen {
			continue
		}
		if _, ok := sw.Carry[uint32(h)]; ok {
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

func (c *counter) UserExtra(string) []snapshot.Value { return nil }
