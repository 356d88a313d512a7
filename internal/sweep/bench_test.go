package sweep

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	"github.com/cespare/xxhash/v2"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/kind"
	"github.com/slotexporter/slot_exporter/internal/redisproc"
	"github.com/slotexporter/slot_exporter/internal/redisread"
	"github.com/slotexporter/slot_exporter/internal/track"
)

// The in-process part of a sweep, without Redis: `go test -run '^$' -bench
// . -benchmem ./internal/sweep` (and ./internal/track, ./internal/redisread
// for the tracker and the reply parser alone). `make bench` measures the
// whole sweep against a real redis-server.

// BenchmarkApply folds one key's read (1.8 members on average) into a
// sweep of a family tracking 100k keys: user extraction, member tracking,
// states and the per-user floor. Reported per key.
func BenchmarkApply(b *testing.B) {
	cfg, err := config.Parse([]byte(redisproc.Config{Addr: "127.0.0.1:1", Families: []redisproc.Family{redisproc.Slots()}}.YAML()))
	if err != nil {
		b.Fatal(err)
	}
	s, err := New(context.Background(), cfg, nil, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		b.Fatal(err)
	}
	f := s.fams[0]
	const keys = 100_000
	now := int64(1e12)
	reads := make([]redisread.KeyRead, keys)
	d := xxhash.New()
	for i := range reads {
		k := redisproc.SlotKey(fmt.Sprintf("%012d", i))
		reads[i] = redisread.KeyRead{Key: k, PTTL: 240e3}
		for j := range 1 + i%5/2 { // 1, 1, 2, 2, 3: 1.8 a key
			m := fmt.Sprintf("%08x-0000-4000-8000-%012x", i, j)
			reads[i].Members = append(reads[i].Members, redisread.Member{Hash: track.MemberHash(d, k, m), Score: float64(now + 110e3)})
		}
	}
	begin := func() *sweepRun {
		run := &sweepRun{Sweep: kind.Sweep{Now: now, Floor: f.state.floor, Carry: track.Carry{}}}
		run.reads = f.state.tracker.Begin(&run.Sweep)
		f.state.floor.Begin()
		return run
	}
	run := begin()
	for i := range reads {
		f.apply(run, &reads[i])
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		j := i % keys
		if j == 0 {
			now += 5000
			run = begin()
		}
		f.apply(run, &reads[j])
	}
}
