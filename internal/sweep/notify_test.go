package sweep_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/collector"
	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/redistest"
)

const notifyConfig = `
redis:
  addr: %q
sampling:
  interval: 100ms
  discovery: notify
  full_scan_interval: 1h
families:
  - name: streams
    kind: slotset
    match: "s:*"
    limit: 3
    ttl: 120s
    heartbeat_interval: 20s
    max_hold: 15m
  - name: legacy
    kind: counter
    match: "c:*"
    limit: 3
`

func TestNotifyRefusedWithoutKeyspaceEvents(t *testing.T) {
	srv := redistest.Start(t)
	rc := srv.Client()
	cfg, err := config.Parse([]byte(fmt.Sprintf(notifyConfig, srv.Addr)))
	if err != nil {
		t.Fatal(err)
	}
	err = collector.CheckNotify(context.Background(), rc, cfg)
	want := `sampling.discovery: notify needs keyspace notifications, but ` + srv.Addr +
		` has notify-keyspace-events="" (missing "Kgxez$"); set it with: CONFIG SET notify-keyspace-events Kgxez$`
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("got %v\nwant prefix %s", err, want)
	}
	// Partly set: only what is missing is named.
	rc.ConfigSet(context.Background(), "notify-keyspace-events", "Kz")
	err = collector.CheckNotify(context.Background(), rc, cfg)
	if err == nil || !strings.Contains(err.Error(), `(missing "gxe$")`) {
		t.Fatalf("got %v", err)
	}
	rc.ConfigSet(context.Background(), "notify-keyspace-events", "KA")
	if err := collector.CheckNotify(context.Background(), rc, cfg); err != nil {
		t.Fatalf("KA covers everything: %v", err)
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
	h := newHarness(t, rc, fmt.Sprintf(notifyConfig, srv.Addr))
	t.Cleanup(func() { h.s.Stop() })
	h.sweep() // subscribes, then one full scan per family
	expect(t, h.metrics(), map[string]float64{`slot_sets{family="streams"}`: 10, `slot_sets{family="legacy"}`: 1})
	scans := scanCalls(t, rc)

	// Changes arrive as events: new keys, a deleted key, an expired key,
	// a counter set after start.
	rc.ZAdd(ctx, "s:{new1}", redis.Z{Score: live(), Member: "a"})
	rc.ZAdd(ctx, "s:{new2}", redis.Z{Score: live(), Member: "a"})
	rc.Del(ctx, "s:{u0}")
	rc.PExpire(ctx, "s:{u1}", 10*time.Millisecond)
	rc.Set(ctx, "c:{y}", 2, 0)
	time.Sleep(300 * time.Millisecond) // the expiry, and the events, land
	h.sweep()
	expect(t, h.metrics(), map[string]float64{
		`slot_sets{family="streams"}`:                                 10, // 10 + 2 - 2
		`slot_sets{family="legacy"}`:                                  2,
		`slot_acquires_total{family="streams"}`:                       12,
		`slot_holds_ended_total{family="streams",outcome="released"}`: 2,
	})
	if got := scanCalls(t, rc); got != scans {
		t.Errorf("SCAN ran %d more times after the first sweep; notify mode must not scan between full scans", got-scans)
	}
	// The keys read per sweep are the family's, not the 20,000 unrelated.
	before := h.metrics()[`slot_exporter_keys_scanned_total{family="streams"}`]
	h.sweep()
	if d := h.metrics()[`slot_exporter_keys_scanned_total{family="streams"}`] - before; d != 10 {
		t.Errorf("a notify sweep read %v keys, want 10", d)
	}
}

func scanCalls(t *testing.T, rc *redis.Client) int {
	t.Helper()
	s, err := rc.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(s, "\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_scan:calls="); ok {
			n, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
			return n
		}
	}
	return 0
}
