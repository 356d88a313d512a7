// Package snapshot holds what one sweep of each family found, as the
// collector and the web pages read it, and the catalog of the metrics that
// carry it. A snapshot is immutable once published: scrapes read it while
// the next sweep builds another.
package snapshot

import (
	"time"

	"github.com/slotexporter/slot_exporter/internal/track"
)

// Value is one sample of a catalog metric. Labels are the metric's own
// labels after family (and after user, for per-user metrics), in the
// order Metric.Labels names them.
type Value struct {
	Metric *Metric
	Labels []string
	V      float64
}

// Count is a counter split by one label, such as keys skipped by reason.
type Count struct {
	Label string
	N     uint64
}

// Histogram is a cumulative histogram, as Prometheus exposes it.
type Histogram struct {
	Bounds []float64 // upper bounds, seconds
	Counts []uint64  // cumulative, one per bound
	Count  uint64
	Sum    float64
}

// HoldBuckets are the upper bounds (seconds) of slot_hold_duration_seconds.
var HoldBuckets = []float64{0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200}

// NewHoldHistogram returns an empty histogram with HoldBuckets.
func NewHoldHistogram() Histogram {
	return Histogram{Bounds: HoldBuckets, Counts: make([]uint64, len(HoldBuckets))}
}

// Observe adds one observation. A negative one (it cannot happen: hold
// durations are clamped where they are measured) counts as 0, so the sum
// never goes down.
func (h *Histogram) Observe(v float64) {
	v = max(v, 0)
	for i, b := range h.Bounds {
		if v <= b {
			h.Counts[i]++
		}
	}
	h.Count++
	h.Sum += v
}

// Clone returns a copy that does not share the counts.
func (h Histogram) Clone() Histogram {
	h.Counts = append([]uint64(nil), h.Counts...)
	return h
}

// User is one user's per-user series.
type User struct {
	track.UserView
	// Extra are the kind's own per-user values (a queue's head wait, a
	// stream group's oldest pending entry), labels after user.
	Extra []Value
}

// Family is one family's state after its latest sweep attempt.
type Family struct {
	Name string
	Kind string
	// Limit is the family's limit; HasLimit is false where it has none.
	Limit    float64
	HasLimit bool
	// FloorWindow is the family's floor threshold; 0 turns the floor
	// alert off for it.
	FloorWindow time.Duration
	// MaxWait is the family's max_wait (lists, queue frameworks); 0: none.
	MaxWait time.Duration

	// OK is true when the latest sweep succeeded.
	OK bool
	// LastSuccess is the exporter-clock end time of the last successful
	// sweep; zero before the first.
	LastSuccess time.Time
	// Duration is the wall time of the latest sweep attempt.
	Duration time.Duration
	// StaleAfter is how long the domain values may be served after
	// LastSuccess before they are dropped (2 x interval).
	StaleAfter time.Duration

	// The exporter's own counters since it started; they survive reloads.
	SweepErrors uint64
	Overruns    uint64
	KeysScanned uint64
	Skipped     []Count // by reason, every reason listed

	// Domain values from the last successful sweep: gauges, and counters
	// since the exporter started (acquires, heartbeats, holds ended).
	Gauges        []Value
	Counters      []Value
	Holds         *Histogram // nil for kinds without holds
	Users         []User     // capped, in priority order
	SeriesDropped int
	// Aggregates are the per-user counts over every user, not only the
	// ones in Users.
	Aggregates     track.FloorAggregates
	OverLimitShown bool // false for rate counters, where refused hits count
	Sets           int
}

// Snapshot is the whole exporter's state, as scrapes read it.
type Snapshot struct {
	Families []*Family
	// ClockSkew is exporter clock minus Redis TIME, from the latest sweep.
	ClockSkew time.Duration
	// HaveClock is false until Redis TIME has been read once.
	HaveClock bool
}

// Up is true when the latest sweep of every family succeeded.
func (s *Snapshot) Up() bool {
	if len(s.Families) == 0 {
		return false
	}
	for _, f := range s.Families {
		if !f.OK {
			return false
		}
	}
	return true
}

// Fresh reports whether a family's domain values may still be served at
// t: data from a sweep older than 2 x interval is dropped so that alerts
// never fire on frozen numbers.
func (f *Family) Fresh(t time.Time) bool {
	return !f.LastSuccess.IsZero() && t.Sub(f.LastSuccess) <= f.StaleAfter
}

// Family returns the named family, or nil.
func (s *Snapshot) Family(name string) *Family {
	for _, f := range s.Families {
		if f.Name == name {
			return f
		}
	}
	return nil
}
