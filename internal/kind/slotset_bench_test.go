package kind

import (
	"fmt"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/slotexporter/slot_exporter/internal/redisread"
)

// BenchmarkSlotSetReplay replays a million held slot sets (two million
// members) that no write touched: the work of a change-driven sweep on a
// quiet keyspace. go test -run '^$' -bench SlotSetReplay ./internal/kind
func BenchmarkSlotSetReplay(b *testing.B) {
	const keys = 1_000_000
	r := newSlotSetRig(2)
	tr := r.tr
	sw := r.begin()
	for i := range keys {
		key, user := fmt.Sprintf("s:{u%d}", i), fmt.Sprintf("u%d", i)
		ms := make([]redisread.Member, 1+i%3)
		for j := range ms {
			ms[j] = redisread.Member{Hash: xxhash.Sum64String(fmt.Sprint(key, j)), Score: float64(r.now + 50_000)}
		}
		r.read(sw, xxhash.Sum64String(key), user, ms)
	}
	r.end(sw)
	var took time.Duration
	b.ResetTimer()
	for range b.N {
		sw := r.begin()
		t0 := time.Now()
		// A key whose hash shares its low half with another's is not
		// held (about a hundred here): a sweep reads it every time.
		if n := tr.Replay(sw); n != tr.held.Len() || n < keys-1000 {
			b.Fatalf("replayed %d keys of %d held, %d read", n, tr.held.Len(), keys)
		}
		took += time.Since(t0)
		r.end(sw)
	}
	b.ReportMetric(float64(took.Nanoseconds())/float64(b.N)/float64(tr.members.Len()), "ns/member")
}
