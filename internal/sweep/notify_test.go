package sweep_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/redisproc"
	"github.com/slotexporter/slot_exporter/internal/redistest"
	"github.com/slotexporter/slot_exporter/internal/sweep"
)

func notifyConfig(addr string) string {
	return redisproc.Config{
		Addr:     addr,
		Sampling: []string{"interval: 100ms", "discovery: notify", "full_scan_interval: 1h"},
		Families: shortFamilies(),
	}.YAML()
}

// TestNotifyRefusedWithoutKeyspaceEvents: sweep.New refuses discovery:
// notify on a Redis that does not publish the events it needs, names what
// is missing and how to set it, and leaves the sweeper it was to replace
// running; once the events are on, the new sweeper takes over and stops
// the old one.
func TestNotifyRefusedWithoutKeyspaceEvents(t *testing.T) {
	srv := redistest.Start(t)
	rc := srv.Client()
	ctx := context.Background()
	cfg, err := config.Parse([]byte(notifyConfig(srv.Addr)))
	if err != nil {
		t.Fatal(err)
	}
	rc.Set(ctx, "c:{x}", 1, 0)
	prev := exportertest.New(t, rc, twoFamilies(srv.Addr, 100, 100))
	prev.Sweeper.Start()
	// The old sweeper's sweeps, by the end time of its last good one: with
	// client tracking a sweep of an unchanged keyspace reads no key, so
	// keys_scanned_total no longer tells that it swept.
	scanned := func() float64 { return prev.Metrics()[`slot_exporter_last_sweep_timestamp_seconds{family="legacy"}`] }
	exportertest.WaitFor(t, 2*time.Minute, "the old sweeper's first sweep", func() bool { return scanned() > 0 })

	_, err = sweep.New(ctx, cfg, rc, exportertest.Quiet(), prev.Sweeper)
	want := `sampling.discovery: notify needs keyspace notifications, but ` + srv.Addr +
		` has notify-keyspace-events="" (missing "Kgxez$"); set it with: CONFIG SET notify-keyspace-events Kgxez$`
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("got %v\nwant prefix %s", err, want)
	}
	// Partly set: only what is missing is named.
	rc.ConfigSet(ctx, "notify-keyspace-events", "Kz")
	_, err = sweep.New(ctx, cfg, rc, exportertest.Quiet(), prev.Sweeper)
	if err == nil || !strings.Contains(err.Error(), `(missing "gxe$")`) {
		t.Fatalf("got %v", err)
	}
	// Refused twice, the old sweeper still sweeps (its interval is 1s).
	before := scanned()
	exportertest.WaitFor(t, 2*time.Minute, "the old sweeper to go on after a refused config", func() bool { return scanned() > before })

	rc.ConfigSet(ctx, "notify-keyspace-events", "KA")
	s, err := sweep.New(ctx, cfg, rc, exportertest.Quiet(), prev.Sweeper)
	if err != nil {
		t.Fatalf("KA covers everything: %v", err)
	}
	t.Cleanup(s.Stop)
	// New stopped the old sweeper: no sweep of it starts any more.
	before = scanned()
	time.Sleep(2500 * time.Millisecond)
	if after := scanned(); after != before {
		t.Errorf("the replaced sweeper still sweeps: keys scanned %v -> %v", before, after)
	}
}

// TestNotifyFollowsKeyspace: after one full SCAN, sweeps read only the keys
// that notifications announced; unrelated keys cost nothing.
func TestNotifyFollowsKeyspace(t *testing.T) {
	srv := redistest.Start(t, "--notify-keyspace-events", "Kgxez$")
	rc := srv.Client()
	ctx := context.Background()
	live := func() float64 { return float64(time.Now().Add(119 * time.Second).UnixMilli()) }
	pipe := rc.Pipeline()
	for i := 0; i < 20000; i++ {
		pipe.Set(ctx, "unrelated:"+strconv.Itoa(i), "x", 0)
	}
	for i := 0; i < 10; i++ {
		pipe.ZAdd(ctx, fmt.Sprintf("s:{u%d}", i), redis.Z{Score: live(), Member: "a"})
	}
	pipe.Set(ctx, "c:{x}", 1, 0)
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	h := exportertest.New(t, rc, notifyConfig(srv.Addr))
	h.Sweep() // subscribes, then one full scan per family
	exportertest.Expect(t, h.Metrics(), map[string]float64{`slot_sets{family="streams"}`: 10, `slot_sets{family="legacy"}`: 1})
	scans := exportertest.Calls(t, rc, "scan")

	// Changes arrive as events: new keys, a deleted key, an expired key,
	// a counter set after start.
	rc.ZAdd(ctx, "s:{new1}", redis.Z{Score: live(), Member: "a"})
	rc.ZAdd(ctx, "s:{new2}", redis.Z{Score: live(), Member: "a"})
	rc.Del(ctx, "s:{u0}")
	rc.PExpire(ctx, "s:{u1}", 10*time.Millisecond)
	rc.Set(ctx, "c:{y}", 2, 0)
	time.Sleep(300 * time.Millisecond) // the expiry, and the events, land
	h.Sweep()
	exportertest.Expect(t, h.Metrics(), map[string]float64{
		`slot_sets{family="streams"}`:                                 10, // 10 + 2 - 2
		`slot_sets{family="legacy"}`:                                  2,
		`slot_acquires_total{family="streams"}`:                       12,
		`slot_holds_ended_total{family="streams",outcome="released"}`: 2,
	})
	if got := exportertest.Calls(t, rc, "scan"); got != scans {
		t.Errorf("SCAN ran %d more times after the first sweep; notify mode must not scan between full scans", got-scans)
	}
	// The keys read per sweep are the family's, not the 20,000 unrelated.
	before := h.Metrics()[`slot_exporter_keys_scanned_total{family="streams"}`]
	h.Sweep()
	if d := h.Metrics()[`slot_exporter_keys_scanned_total{family="streams"}`] - before; d != 10 {
		t.Errorf("a notify sweep read %v keys, want 10", d)
	}
}
