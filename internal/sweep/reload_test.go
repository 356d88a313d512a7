package sweep_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/redistest"
	"github.com/slotexporter/slot_exporter/internal/sweep"
)

// TestReloadKeepsWhatIsTracked: a sweeper built from a new config with the
// old one as prev carries each family that keeps its name and kind over:
// its counters go on from where they were, and the members it tracked are
// not acquired again nor ended. A family under a new name starts afresh.
func TestReloadKeepsWhatIsTracked(t *testing.T) {
	srv := redistest.Start(t)
	rc := srv.Client()
	ctx := context.Background()
	live := float64(time.Now().Add(115 * time.Second).UnixMilli())
	for i := range 5 {
		rc.ZAdd(ctx, fmt.Sprintf("s:{u%d}", i), redis.Z{Score: live, Member: "a"})
	}
	rc.Set(ctx, "c:{x}", 1, 0)
	old := exportertest.New(t, rc, twoFamilies(srv.Addr, 100, 100))
	old.Sweep()
	rc.ZRem(ctx, "s:{u0}", "a")
	old.Sweep()
	exportertest.Expect(t, old.Metrics(), map[string]float64{
		`slot_acquires_total{family="streams"}`:                       5,
		`slot_holds_ended_total{family="streams",outcome="released"}`: 1,
		// Keys read: with client tracking (the default) the second
		// sweep reads no counter (none was written).
		`slot_exporter_keys_scanned_total{family="legacy"}`: 1,
	})

	rc.ZAdd(ctx, "s:{u9}", redis.Z{Score: live, Member: "a"})
	cfg, err := config.Parse([]byte(twoFamilies(srv.Addr, 100, 100)))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Families[1].Name = "legacy2"
	s, err := sweep.New(ctx, cfg, rc, exportertest.Quiet(), old.Sweeper)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	if err := s.SweepOnce(ctx); err != nil {
		t.Fatal(err)
	}
	got := exportertest.ForSweeper(t, s).Metrics()
	exportertest.Expect(t, got, map[string]float64{
		// 4 carried over, u9 new: one more acquire, nothing ended.
		`slot_acquires_total{family="streams"}`:                       6,
		`slot_members{family="streams",state="live"}`:                 5,
		`slot_holds_ended_total{family="streams",outcome="released"}`: 1,
		`slot_holds_ended_total{family="streams",outcome="lost"}`:     0,
		// Keys read, not keys accounted for: with client tracking the
		// second sweep reads the one key written (u0), the third the one
		// created (u9), with the feed carried over by the reload; the
		// others are advanced from what was held.
		`slot_exporter_keys_scanned_total{family="streams"}`: 5 + 1 + 1,
		// A new name: its own counters from zero.
		`slot_exporter_keys_scanned_total{family="legacy2"}`: 1,
	})
	if _, ok := got[`slot_exporter_keys_scanned_total{family="legacy"}`]; ok {
		t.Error("the family that was renamed away is still exported")
	}
}
