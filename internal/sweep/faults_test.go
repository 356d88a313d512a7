package sweep_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/collector"
	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/redistest"
	"github.com/slotexporter/slot_exporter/redisconn"
)

// faultConfig has one slot-set family so that each fault logs once.
const faultConfig = `
redis:
  addr: %q
sampling:
  interval: %s
  timeout: %s
  scan_count: %d
families:
  - name: streams
    kind: slotset
    match: "f:*"
    user: '^f:\{([^}]+)\}$'
    limit: 3
    ttl: 120s
    heartbeat_interval: 20s
    max_hold: 15m
`

// logBuffer collects the sweeper's log lines across goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// lines returns the log lines that contain every one of parts.
func (l *logBuffer) lines(parts ...string) []string {
	var out []string
	for _, line := range strings.Split(l.String(), "\n") {
		ok := line != ""
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok {
			out = append(out, line)
		}
	}
	return out
}

// newFaultHarness is newHarness with the client main.go would build (its
// timeouts follow the sweep's context) and the log kept for inspection.
func newFaultHarness(t *testing.T, yaml string) (*harness, *logBuffer) {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	client, err := redisconn.New(&cfg.Redis)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	logs := &logBuffer{}
	s := collector.NewSweeper(cfg, client, slog.New(slog.NewTextHandler(logs, nil)), nil)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collector.New(s.Snapshot, nil))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("sweeper log:\n%s", logs.String())
		}
	})
	return &harness{t: t, s: s, reg: reg}, logs
}

// seedSets writes n sets f:{u<i>} holding per live members each, with
// their key expiry as the limiter sets it, in one pipeline.
func seedSets(t testing.TB, c redis.Cmdable, n, per int, score float64) {
	t.Helper()
	ctx := context.Background()
	pipe := c.Pipeline()
	for i := 0; i < n; i++ {
		k := fmt.Sprintf("f:{u%d}", i)
		zs := make([]redis.Z, per)
		for j := range zs {
			zs[j] = redis.Z{Score: score, Member: "s" + strconv.Itoa(j)}
		}
		pipe.ZAdd(ctx, k, zs...)
		pipe.PExpire(ctx, k, 240*time.Second)
		if pipe.Len() >= 10000 {
			if _, err := pipe.Exec(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
}

func waitUntil(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// commandCalls reads how often Redis has run cmd so far.
func commandCalls(c *redis.Client, cmd string) int64 {
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_"+cmd+":calls="); ok {
			n, _ := strconv.ParseInt(strings.SplitN(rest, ",", 2)[0], 10, 64)
			return n
		}
	}
	return 0
}

const (
	upSeries      = `slot_exporter_up`
	errSeries     = `slot_exporter_sweep_errors_total{family="streams"}`
	liveSeries    = `slot_members{family="streams",state="live"}`
	lastSeries    = `slot_exporter_last_sweep_timestamp_seconds{family="streams"}`
	durSeries     = `slot_exporter_sweep_duration_seconds{family="streams"}`
	lostSeries    = `slot_holds_ended_total{family="streams",outcome="lost"}`
	releaseSeries = `slot_holds_ended_total{family="streams",outcome="released"}`
	expiredSeries = `slot_holds_ended_total{family="streams",outcome="expired"}`
)

// TestRedisKilledMidSweep: Redis is SIGKILLed while the background loop is
// reading it. The exporter reports the failure, keeps answering, serves the
// last good numbers for at most 2 x interval and then drops them, ends no
// hold because of the failed sweep, and recovers on its own once Redis is
// back.
func TestRedisKilledMidSweep(t *testing.T) {
	const (
		sets     = 50000
		interval = 1500 * time.Millisecond
	)
	srv := redistest.Start(t)
	admin := srv.Client()
	live := float64(time.Now().Add(115 * time.Second).UnixMilli())
	seedSets(t, admin, sets, 1, live)

	// scan_count 10 makes a sweep thousands of round trips long.
	h, logs := newFaultHarness(t, fmt.Sprintf(faultConfig, srv.Addr, interval, "10s", 10))
	h.s.Start()
	t.Cleanup(h.s.Stop)
	waitUntil(t, 30*time.Second, "first sweep", h.s.Ready)
	good := h.metrics()
	expect(t, good, map[string]float64{upSeries: 1, liveSeries: sets, errSeries: 0})
	t.Logf("a full sweep of %d sets took %.2fs", sets, good[durSeries])

	// Kill early in a sweep: each sweep starts with one TIME, then runs
	// about sets/scan_count SCANs; kill a few hundred SCANs into a fresh
	// one, with most of it still to go.
	times := commandCalls(admin, "time")
	var scans int64
	waitUntil(t, 2*interval+30*time.Second, "a sweep to start", func() bool {
		scans = commandCalls(admin, "scan")
		return commandCalls(admin, "time") > times
	})
	waitUntil(t, 30*time.Second, "the sweep to get going", func() bool {
		return commandCalls(admin, "scan") >= scans+300
	})
	srv.Kill()

	waitUntil(t, 10*time.Second, "the failure to be reported", func() bool {
		m := h.metrics()
		return m[upSeries] == 0 && m[errSeries] >= 1
	})
	first := logs.lines("sweep failed")[0]
	// A failure at TIME would mean the kill fell between sweeps.
	if !strings.Contains(first, "node ") {
		t.Errorf("the first failure is not a read cut short mid-sweep: %s", first)
	}

	// The last good numbers are served for at most 2 x interval after the
	// last good sweep, then dropped. The collector judges freshness just
	// before this test reads the clock, so a present series may be at
	// most a little older than 2 x interval here, an absent one never
	// younger.
	var sawStale bool
	waitUntil(t, 2*interval+5*time.Second, "stale domain metrics to be dropped", func() bool {
		m := h.metrics()
		if _, ok := m[upSeries]; !ok {
			t.Fatal("the collector stopped answering")
		}
		age := time.Since(time.Unix(0, int64(m[lastSeries]*1e9)))
		v, present := m[liveSeries]
		switch {
		case present && age > 2*interval+time.Second/2:
			t.Fatalf("slot_members still served %s after the last good sweep (interval %s)", age, interval)
		case present:
			sawStale = true
			if v != sets {
				t.Fatalf("stale slot_members = %v, want the last good %d", v, sets)
			}
		case age <= 2*interval:
			t.Fatalf("slot_members dropped only %s after the last good sweep, before 2 x interval", age)
		}
		return !present
	})
	if !sawStale {
		t.Log("the kill came late in the freshness window: stale data was never observed")
	}
	if _, ok := h.metrics()[`slot_sets{family="streams"}`]; ok {
		t.Error("slot_sets still served after the data went stale")
	}
	fs := h.s.Snapshot().Families[0]
	if e := fs.Totals.Ended; e != [3]uint64{} {
		t.Errorf("holds ended by a failed sweep: released/expired/lost = %v", e)
	}
	if fs.Totals.Acquires != sets {
		t.Errorf("acquires = %d, want %d", fs.Totals.Acquires, sets)
	}

	// Redis comes back on the same port, empty (no persistence): the loop
	// picks it up by itself, and the holds it tracked, including those
	// the cut-short sweep had already read, are lost, not released.
	errs := h.metrics()[errSeries]
	srv.Restart()
	waitUntil(t, 2*interval+30*time.Second, "recovery", func() bool {
		m := h.metrics()
		return m[upSeries] == 1 && m[lostSeries] > 0
	})
	got := h.metrics()
	expect(t, got, map[string]float64{
		`slot_acquires_total{family="streams"}`: sets,
		lostSeries:                              sets,
		releaseSeries:                           0,
		expiredSeries:                           0,
		liveSeries:                              0,
		`slot_sets{family="streams"}`:           0,
	})
	if got[errSeries] < errs {
		t.Errorf("sweep errors went backwards: %v -> %v", errs, got[errSeries])
	}
}

// TestRedisStallCutOffAtTimeout: a Redis that stops answering (CLIENT
// PAUSE) for longer than sampling.timeout fails the sweep at the timeout,
// not when Redis wakes up; the next sweep after the pause recovers.
func TestRedisStallCutOffAtTimeout(t *testing.T) {
	const (
		timeout = 500 * time.Millisecond
		pause   = 2 * time.Second
	)
	srv := redistest.Start(t)
	admin := srv.Client()
	seedSets(t, admin, 10, 2, float64(time.Now().Add(115*time.Second).UnixMilli()))
	h, logs := newFaultHarness(t, fmt.Sprintf(faultConfig, srv.Addr, "1s", timeout, 100))
	h.sweep()
	expect(t, h.metrics(), map[string]float64{upSeries: 1, liveSeries: 20})

	ctx := context.Background()
	if err := admin.Do(ctx, "CLIENT", "PAUSE", pause.Milliseconds(), "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	err := h.s.SweepOnce(ctx)
	returned := time.Since(paused)
	if err == nil {
		t.Fatal("a sweep against a paused Redis succeeded")
	}
	got := h.metrics()
	expect(t, got, map[string]float64{upSeries: 0, errSeries: 1})
	// Cut off at the timeout: far from the pause's end.
	if d := time.Duration(got[durSeries] * 1e9); d < timeout || d > timeout+pause/2 {
		t.Errorf("failed sweep took %s: want about sampling.timeout (%s), not the pause (%s)", d, timeout, pause)
	}
	if returned > timeout+pause/2 {
		t.Errorf("SweepOnce returned %s into a %s pause", returned, pause)
	}
	if l := logs.lines("sweep failed", "cut off at sampling.timeout"); len(l) != 1 {
		t.Errorf("want one log line saying the sweep was cut off at sampling.timeout, got %q", logs.String())
	}

	// Recovery: sweep until one succeeds, which must happen soon after
	// the pause ends.
	deadline := paused.Add(pause + 10*time.Second)
	for h.s.SweepOnce(ctx) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("no successful sweep %s after a %s pause", time.Since(paused), pause)
		}
	}
	if time.Since(paused) < pause {
		t.Errorf("a sweep succeeded %s into a %s pause", time.Since(paused), pause)
	}
	expect(t, h.metrics(), map[string]float64{
		upSeries: 1, liveSeries: 20, releaseSeries: 0, expiredSeries: 0, lostSeries: 0,
		`slot_acquires_total{family="streams"}`: 20,
	})
}

// TestRedisRestartEmptyCountsLost: a Redis that restarts empty takes every
// slot with it. Those holds are counted as lost, not as released or
// expired, and the restart is logged once.
func TestRedisRestartEmptyCountsLost(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client()
	ctx := context.Background()
	live := float64(time.Now().Add(115 * time.Second).UnixMilli())
	seedSets(t, admin, 100, 2, live)
	h, logs := newFaultHarness(t, fmt.Sprintf(faultConfig, srv.Addr, "1s", "5s", 100))
	h.sweep()
	// Known history before the restart: one slot released, one expired
	// and pruned.
	admin.ZRem(ctx, "f:{u0}", "s0")
	admin.ZAdd(ctx, "f:{u1}", redis.Z{Score: float64(time.Now().Add(-time.Second).UnixMilli()), Member: "s0"})
	h.sweep()
	admin.ZRemRangeByScore(ctx, "f:{u1}", "-inf", strconv.FormatInt(time.Now().UnixMilli(), 10))
	h.sweep()
	before := h.metrics()
	expect(t, before, map[string]float64{releaseSeries: 1, expiredSeries: 1, lostSeries: 0, liveSeries: 198})
	tracked := h.s.Snapshot().Families[0].Gauges.MembersTracked
	if tracked != 198 {
		t.Fatalf("tracking %d members, want 198", tracked)
	}

	srv.Restart()
	waitUntil(t, 10*time.Second, "a sweep of the restarted server", func() bool { return h.s.SweepOnce(ctx) == nil })
	got := h.metrics()
	expect(t, got, map[string]float64{
		lostSeries:    float64(tracked),
		releaseSeries: 1,
		expiredSeries: 1,
		liveSeries:    0,
		upSeries:      1,
		`slot_hold_duration_seconds_count{family="streams"}`: 2 + float64(tracked),
	})
	if w := logs.lines("level=WARN"); len(w) != 1 || !strings.Contains(w[0], "lost=198") {
		t.Errorf("want exactly one warning naming 198 lost holds, got %q", w)
	}

	// Nothing more is lost on later sweeps of the same server.
	h.sweep()
	expect(t, h.metrics(), map[string]float64{lostSeries: float64(tracked)})
}

// TestRestartSeenByAFailedSweepStillCountsLost: the first sweep after a
// restart notices the new run_id but fails before it can end anything
// (here SCAN is refused by ACL). The next good sweep must still count the
// vanished holds as lost rather than as released.
func TestRestartSeenByAFailedSweepStillCountsLost(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client()
	ctx := context.Background()
	seedSets(t, admin, 10, 2, float64(time.Now().Add(115*time.Second).UnixMilli()))
	h, _ := newFaultHarness(t, fmt.Sprintf(faultConfig, srv.Addr, "1s", "5s", 100))
	h.sweep()

	srv.Restart()
	if err := admin.Do(ctx, "ACL", "SETUSER", "default", "-scan").Err(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "a sweep refused at SCAN", func() bool {
		err := h.s.SweepOnce(ctx)
		return err != nil && strings.Contains(err.Error(), "NOPERM")
	})
	if err := admin.Do(ctx, "ACL", "SETUSER", "default", "+scan").Err(); err != nil {
		t.Fatal(err)
	}
	h.sweep()
	expect(t, h.metrics(), map[string]float64{lostSeries: 20, releaseSeries: 0, expiredSeries: 0})
}
