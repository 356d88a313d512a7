package sweep

import (
	"time"

	"golang.org/x/time/rate"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/kind"
	"github.com/slotexporter/slot_exporter/internal/redisread"
	"github.com/slotexporter/slot_exporter/internal/snapshot"
	"github.com/slotexporter/slot_exporter/internal/track"
)

// state is everything a family keeps across sweeps. A reload hands it to
// the new sweeper as one value, so that no field is forgotten on the way.
type state struct {
	tracker kind.Tracker
	floor   *track.FloorTracker
	// budget is the family's key budget (nil: unbounded). It survives
	// reloads with its tokens: a fresh limiter per reload would start with
	// a full burst, and reloads in a loop would get around the budget.
	budget *rate.Limiter
	// next is when the next sweep may start: a reload keeps the schedule,
	// so reloads in a loop do not sweep more often than sampling.interval.
	next time.Time

	// failures counts failed sweeps in a row; firstFailure is when the
	// run began.
	failures     int
	firstFailure time.Time

	sweepErrors uint64
	overruns    uint64
	keysScanned uint64
	skipped     [redisread.NumSkipReasons]uint64

	lost lostWatch

	lastSuccess time.Time
	lastGauges  gauges
}

// gauges are the generic figures of the last complete sweep.
type gauges struct {
	sets          int
	users         track.FloorAggregates
	userSeries    []snapshot.User
	seriesDropped int
}

func newState(f *config.Family, s *config.Sampling) (*state, error) {
	t, err := kind.New(f, s)
	if err != nil {
		return nil, err
	}
	st := &state{tracker: t, floor: track.NewFloorTracker(), lost: newLostWatch()}
	st.setBudget(s.MaxKeysPerSecond)
	return st, nil
}

// handOver gives the new sweeper this state, reconfigured for f and s.
func (st *state) handOver(f *config.Family, s *config.Sampling) *state {
	st.tracker.Reconfigure(f, s)
	st.setBudget(s.MaxKeysPerSecond)
	return st
}

// setBudget sets the key budget, keeping the limiter (and so its spent
// tokens) when there is one.
func (st *state) setBudget(perSecond int) {
	switch {
	case perSecond <= 0:
		st.budget = nil
	case st.budget == nil:
		st.budget = rate.NewLimiter(rate.Limit(perSecond), max(perSecond/10, 1))
	default:
		st.budget.SetLimit(rate.Limit(perSecond))
		st.budget.SetBurst(max(perSecond/10, 1))
	}
}
