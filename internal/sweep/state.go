package sweep

import (
	"strings"
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
	// overrunLogged is when an overrun was last logged;
	// overrunsUnlogged counts those since.
	overrunLogged    time.Time
	overrunsUnlogged int
	keysScanned      uint64
	skipped          [redisread.NumSkipReasons]uint64
	// unwatched: a reload changed the match, and the next sweep that ends
	// holds ends those of keys left out uncounted (kind.Sweep.Unwatched).
	unwatched bool
	// waited is how long the last attempt's reads waited for the budget
	// and the pace: what an overrun is blamed on.
	waited time.Duration
	// skipLogged is when a key skipped for each reason was last named
	// in the log.
	skipLogged [redisread.NumSkipReasons]time.Time

	lost lostWatch

	lastSuccess time.Time
	lastGauges  gauges

	// Reading what changed (sampling.track_changes). synced[node] is the
	// change feed's epoch under which the family last read every key of
	// the node; a sweep whose nodes all match reads only what changed.
	// pendingSync is the epochs of the sweep in flight, synced once it
	// succeeds. volatile are the keys the kind cannot replay (oversized
	// sets, skipped keys): read every sweep. cursor[node] is where the
	// slow reconciliation's SCAN has got to.
	synced      map[string]int
	pendingSync map[string]int
	volatile    map[string]struct{}
	cursor      map[string]uint64
	// probes are a few keys read by name, read again after a FLUSHDB to
	// tell whether it emptied the family's database (probe.go), when the
	// kind can tell (kind.Survivals). attempt numbers every attempt of
	// every sweep: the one in flight, or the last.
	probes  []probe
	attempt uint64
	// reconcileCredit is the reconciliation's unspent share of a key.
	reconcileCredit float64
	// known is how many keys the last complete sweep accounted for.
	known int
	// lastStart is when the last successful sweep started; period is the
	// time between the starts of the last two (the sampling period
	// achieved).
	lastStart time.Time
	period    time.Duration
	// partial is a sweep cut off at sampling.timeout, which the next
	// attempt goes on with (resume.go); nil: the next sweep starts anew.
	partial *sweepRun
}

// gauges are the generic figures of the last complete sweep.
type gauges struct {
	// began is when the sweep's first attempt started, attempts how many
	// it took (more than one when cut off at sampling.timeout).
	began         time.Time
	attempts      int
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
	st := &state{tracker: t, floor: track.NewFloorTracker(), lost: newLostWatch(),
		volatile: map[string]struct{}{}, cursor: map[string]uint64{}}
	st.setBudget(s.MaxKeysPerSecond)
	return st, nil
}

// handOver gives the new sweeper this state, reconfigured for f and s.
// readEverySweep adds key to the keys read every sweep. A copy: a key
// name from the change feed points into a chunk of many names, which
// keeping it would keep whole (changefeed.nameSet).
func (st *state) readEverySweep(key string) { st.volatile[strings.Clone(key)] = struct{}{} }

func (st *state) handOver(f *config.Family, s *config.Sampling) *state {
	st.tracker.Reconfigure(f, s)
	st.setBudget(s.MaxKeysPerSecond)
	// A sweep in flight read with the old config (its pattern, its
	// reads): the new one starts anew. Probes may be outside a new
	// pattern.
	st.partial = nil
	st.probes = nil
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
