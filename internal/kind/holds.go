package kind

import (
	"github.com/slotexporter/slot_exporter/internal/snapshot"
	"github.com/slotexporter/slot_exporter/internal/track"
)

// holds are the counters of kinds whose members come and go (slot sets,
// and locks, whose token is a member): acquires, heartbeats, holds ended
// by outcome and their durations. They count since the exporter started
// and survive reloads with the tracker.
type holds struct {
	acquires   uint64
	heartbeats uint64
	ended      [track.NumOutcomes]uint64
	hist       snapshot.Histogram
}

func newHolds() holds { return holds{hist: snapshot.NewHoldHistogram()} }

// end counts the holds that ended, and returns them: none in a sweep
// whose ends are the watch's (Sweep.Unwatched).
func (h *holds) end(sw *Sweep, e track.Ended) track.Ended {
	if sw.Unwatched {
		return track.Ended{}
	}
	for o, n := range e.Count {
		h.ended[o] += uint64(n)
	}
	for _, d := range e.Durations {
		h.hist.Observe(d)
	}
	return e
}

// publish writes the counters; heartbeats only where the kind infers them.
func (h *holds) publish(f *snapshot.Family, withHeartbeats bool) {
	f.Counters = append(f.Counters, gauge(snapshot.Acquires, float64(h.acquires)))
	if withHeartbeats {
		f.Counters = append(f.Counters, gauge(snapshot.Heartbeats, float64(h.heartbeats)))
	}
	for o, name := range track.OutcomeNames() {
		f.Counters = append(f.Counters, gauge(snapshot.HoldsEnded, float64(h.ended[o]), name))
	}
	hist := h.hist.Clone()
	f.Holds = &hist
}

// memberGauges publishes slot_members by state.
func memberGauges(f *snapshot.Family, counts *[track.NumStates]int) {
	for s, name := range track.StateNames() {
		f.Gauges = append(f.Gauges, gauge(snapshot.Members, float64(counts[s]), name))
	}
}
