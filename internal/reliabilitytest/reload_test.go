package reliabilitytest

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/redistest"
)

// TestReloadsKeepTheBudgetAndTheSchedule: with max_keys_per_second: 3000
// and sampling.interval 500ms, the config is reloaded every 50 ms for 3 s
// (a new sweeper taking over the old one and started, as reload.go does
// on SIGHUP or /-/reload). Redis's own command counts say how many keys
// were read (PTTL, one per key) and how many sweeps began (TIME, one
// per sweep): at most the budget over the time plus one burst (300), and
// at most one sweep per interval. A fresh limiter and an immediate sweep
// per reload read about 9,000 keys/s and start 20 sweeps a second.
func TestReloadsKeepTheBudgetAndTheSchedule(t *testing.T) {
	const (
		budget   = 3000
		burst    = budget / 10
		keys     = 3000 // a sweep takes a second at the budget
		interval = 500 * time.Millisecond
		reloadEv = 50 * time.Millisecond
		run      = 3 * time.Second
	)
	srv := redistest.Start(t)
	admin := srv.Client()
	expiry := exportertest.RedisTime(t, admin) + 115_000
	pipe := admin.Pipeline()
	for i := range keys {
		pipe.ZAdd(ctx, streamKey(fmt.Sprintf("u%d", i)), redis.Z{Score: float64(expiry), Member: "s"})
	}
	_, err := pipe.Exec(ctx)
	exportertest.Must(t, err)

	yaml := configYAML(addrBlock(srv.Addr),
		fmt.Sprintf("  interval: %s\n  timeout: 10s\n  window: 1s\n  scan_count: 100\n  max_keys_per_second: %d\n", interval, budget),
		streamsFamily)
	e := newExporter(t, yaml)
	reads0, sweeps0 := exportertest.Calls(t, admin, "pttl"), exportertest.Calls(t, admin, "time")
	start := time.Now()
	e.start()
	reloads := 0
	for time.Since(start) < run {
		time.Sleep(reloadEv)
		if err := e.reload(yaml); err != nil {
			t.Fatalf("reload %d: %v", reloads, err)
		}
		e.start()
		reloads++
	}
	reads, sweeps := exportertest.Calls(t, admin, "pttl")-reads0, exportertest.Calls(t, admin, "time")-sweeps0
	elapsed := time.Since(start)
	t.Logf("%d reloads in %s: %d keys read (%.0f/s), %d sweeps begun", reloads, elapsed.Round(time.Millisecond), reads, float64(reads)/elapsed.Seconds(), sweeps)

	if limit := int64(budget*elapsed.Seconds()) + burst; reads > limit {
		t.Errorf("%d keys read in %s: over the budget of %d/s plus one burst (%d)", reads, elapsed, budget, limit)
	}
	if reads < burst {
		t.Errorf("only %d keys read in %s: the test did not exercise the budget", reads, elapsed)
	}
	if limit := int64(elapsed/interval) + 1; sweeps > limit {
		t.Errorf("%d sweeps began in %s: more than one per sampling.interval (%s), at most %d", sweeps, elapsed, interval, limit)
	}

	// Once the reloads stop, a whole sweep completes at the budget.
	exportertest.WaitFor(t, 2*time.Minute, "a complete sweep after the reloads", func() bool {
		return e.metrics()[`slot_sets{family="streams"}`] == keys
	})
}
