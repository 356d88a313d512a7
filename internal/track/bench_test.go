package track

import (
	"strconv"
	"testing"

	"github.com/cespare/xxhash/v2"
)

// The tracker's share of a sweep, without Redis: `go test -run '^$' -bench
// . -benchmem ./internal/track`. `make bench` measures the whole sweep
// against a real redis-server.

type benchMember struct {
	hash  uint64
	score float64
}

// benchMembers makes n member hashes spread over n/1.6 keys.
func benchMembers(n int) []benchMember {
	ms := make([]benchMember, n)
	for i := range ms {
		ms[i] = benchMember{hash: xxhash.Sum64String(strconv.Itoa(i)), score: 2e12}
	}
	return ms
}

var benchRules = Rules{TTL: 120e3, Heartbeat: 20e3, StaleAfter: 40e3, MaxHold: 900e3, Skew: 5e3, Unit: 1}

// BenchmarkObserve is one steady-state sighting of a member already
// tracked, in a table of 1.6 million: what each member of each sweep
// costs the tracker.
func BenchmarkObserve(b *testing.B) {
	rules := benchRules
	ms := benchMembers(1_600_000)
	tr := NewMemberTracker()
	now := int64(1e12)
	bounds := rules.Bounds(now)
	for _, m := range ms {
		tr.Observe(m.hash, m.hash>>7, float64(now+100e3), now, &bounds, &rules)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		j := i % len(ms)
		if j == 0 {
			now += 5000
			bounds = rules.Bounds(now)
		}
		tr.Observe(ms[j].hash, ms[j].hash>>7, float64(now+100e3), now, &bounds, &rules)
	}
}

// BenchmarkTrackerSweep ends nothing and keeps 1.6 million members: the
// pass over the table at the end of every sweep.
func BenchmarkTrackerSweep(b *testing.B) {
	rules := benchRules
	tr := NewMemberTracker()
	bounds := rules.Bounds(1e12)
	for _, m := range benchMembers(1_600_000) {
		tr.Observe(m.hash, 1, 2e12, 1e12, &bounds, &rules)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tr.Sweep(1e12, nil, false, &rules)
	}
}

// BenchmarkObserveMap is BenchmarkObserve on the map-based reference
// tracker the table replaced, for comparison.
func BenchmarkObserveMap(b *testing.B) {
	rules := benchRules
	ms := benchMembers(1_600_000)
	tr := &refTracker{m: map[uint64]refRec{}}
	now := int64(1e12)
	for _, m := range ms {
		tr.observe(m.hash, m.hash>>7, float64(now+100e3), now, &rules)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		j := i % len(ms)
		if j == 0 {
			now += 5000
		}
		tr.observe(ms[j].hash, ms[j].hash>>7, float64(now+100e3), now, &rules)
	}
}

// BenchmarkObserveNew is a first read's sighting of a member not yet
// tracked: 1.6 million of them into an empty tracker, growth included.
func BenchmarkObserveNew(b *testing.B) {
	rules := benchRules
	ms := benchMembers(1_600_000)
	now := int64(1e12)
	bounds := rules.Bounds(now)
	var tr *MemberTracker
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		j := i % len(ms)
		if j == 0 {
			tr = NewMemberTracker()
		}
		tr.Observe(ms[j].hash, ms[j].hash>>7, float64(now+100e3), now, &bounds, &rules)
	}
}
