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
}

func newCounter(f *config.Family, _ *config.Sampling) Tracker {
	return &counter{limit: int64(f.Limit)}
}

func (c *counter) Reconfigure(f *config.Family, _ *config.Sampling) { c.limit = int64(f.Limit) }

func (c *counter) Limits() track.Limits {
	return track.Limits{Limit: c.limit, OverLimitIsAnomaly: true}
}

func (c *counter) Begin(*Sweep) redisread.Reads {
	c.cur = 0
	return &redisread.IntReads{}
}

func (c *counter) Apply(sw *Sweep, k Key) {
	used, flags := k.Read.Value, uint8(0)
	if used < 0 {
		c.cur++
		flags |= track.AnomalyNegative
		used = 0
	}
	sw.Floor.Add(k.UserHash, k.User, used, flags)
}

func (c *counter) End(*Sweep, bool, bool) Ended {
	c.last = c.cur
	return Ended{}
}

func (c *counter) Publish(f *snapshot.Family) {
	f.Gauges = append(f.Gauges, gauge(snapshot.CountersNeg, float64(c.last)))
}

func (c *counter) UserExtra(string) []snapshot.Value { return nil }
