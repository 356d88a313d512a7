package kind

import (
	"fmt"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/redisread"
	"github.com/slotexporter/slot_exporter/internal/track"
)

// BenchmarkSlotSetReplay replays a million held slot sets (two million
// members) that no write touched: the work of a change-driven sweep on a
// quiet keyspace. go test -run '^$' -bench SlotSetReplay ./internal/kind
func BenchmarkSlotSetReplay(b *testing.B) {
	const keys = 1_000_000
	fam := &config.Family{Kind: config.KindSlotSet, TTL: time.Minute, HeartbeatInterval: 10 * time.Second,
		StaleAfter: 30 * time.Second, MaxHold: time.Hour, Limit: 2}
	tr := newSlotSet(fam, &config.Sampling{MaxMembersPerKey: 1000}).(*slotSet)
	now := int64(1e12)
	floor := track.NewFloorTracker()
	begin := func() *Sweep {
		now += 5000
		sw := &Sweep{Now: now, ReadBy: now, Floor: floor, Carry: track.Carry{}, Hold: true}
		floor.Begin()
		tr.Begin(sw)
		return sw
	}
	end := func(sw *Sweep) {
		tr.End(sw, false, false)
		floor.Commit(now, 60_000, 3_600_000, tr.Limits())
	}
	sw := begin()
	for i := range keys {
		key, user := fmt.Sprintf("s:{u%d}", i), fmt.Sprintf("u%d", i)
		ms := make([]redisread.Member, 1+i%3)
		for j := range ms {
			ms[j] = redisread.Member{Hash: xxhash.Sum64String(fmt.Sprint(key, j)), Score: float64(now + 50_000)}
		}
		kr := redisread.KeyRead{Status: redisread.OK, PTTL: 3_600_000, At: now, Members: ms}
		tr.Apply(sw, Key{Read: &kr, Hash: xxhash.Sum64String(key), User: user, UserHash: xxhash.Sum64String(user)})
	}
	end(sw)
	var took time.Duration
	b.ResetTimer()
	for range b.N {
		sw := begin()
		t0 := time.Now()
		// A key whose hash shares its low half with another's is not
		// held (about a hundred here): a sweep reads it every time.
		if n := tr.Replay(sw); n != tr.held.Len() || n < keys-1000 {
			b.Fatalf("replayed %d keys of %d held, %d read", n, tr.held.Len(), keys)
		}
		took += time.Since(t0)
		end(sw)
	}
	b.ReportMetric(float64(took.Nanoseconds())/float64(b.N)/float64(tr.members.Len()), "ns/member")
}
