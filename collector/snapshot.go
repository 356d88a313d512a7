package collector

import "time"

// Skip reasons for keys that matched a family's pattern but were not used.
const (
	SkipWrongType = iota
	SkipBadUser
	SkipOversized
	SkipBadValue
	numSkipReasons
)

var skipReasonNames = [numSkipReasons]string{"wrong_type", "bad_user", "oversized", "bad_value"}

// Outcomes of ended holds.
const (
	OutcomeReleased = iota
	OutcomeExpired
	OutcomeLost
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"released", "expired", "lost"}

// HoldBuckets are the upper bounds (seconds) of slot_hold_duration_seconds.
var HoldBuckets = []float64{0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200}

// FamilyTotals are a family's counters since the exporter started. They
// survive config reloads for families that keep their name and kind.
type FamilyTotals struct {
	Acquires    uint64
	Heartbeats  uint64
	Ended       [numOutcomes]uint64
	HoldCounts  []uint64 // cumulative per HoldBuckets bound
	HoldCount   uint64
	HoldSum     float64
	SweepErrors uint64
	Overruns    uint64
	KeysScanned uint64
	Skipped     [numSkipReasons]uint64
}

// FamilyGauges are what the last successful sweep of a family saw.
type FamilyGauges struct {
	Sets             int
	Members          [numStates]int
	Users            FloorAggregates
	WithoutTTL       int
	ExpiringEarly    int
	CountersNegative int
	UserSeries       []UserView
	SeriesDropped    int
	MembersTracked   int
	UsersTracked     int
}

// FamilySnapshot is one family's state after its latest sweep attempt. It
// is immutable once published.
type FamilySnapshot struct {
	Name string
	Kind string

	// OK is true when the latest sweep succeeded.
	OK bool
	// LastSuccess is the exporter-clock end time of the last successful
	// sweep; zero before the first.
	LastSuccess time.Time
	// Duration is the wall time of the latest sweep attempt.
	Duration time.Duration
	// StaleAfter is how long the gauges may be served after LastSuccess
	// before they are dropped (2 x interval).
	StaleAfter time.Duration

	Gauges FamilyGauges
	Totals FamilyTotals
}

// Snapshot is the whole exporter's state, as scrapes read it.
type Snapshot struct {
	Families []*FamilySnapshot
	// ClockSkew is exporter clock minus Redis TIME, from the latest sweep.
	ClockSkew time.Duration
	// HaveClock is false until Redis TIME has been read once.
	HaveClock bool
}

// Up is 1 when the latest sweep of every family succeeded.
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

// Fresh reports whether a family's gauges may still be served at t: data
// from a sweep older than 2 x interval is dropped so that alerts never fire
// on frozen numbers.
func (f *FamilySnapshot) Fresh(t time.Time) bool {
	return !f.LastSuccess.IsZero() && t.Sub(f.LastSuccess) <= f.StaleAfter
}
