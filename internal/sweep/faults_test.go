package sweep_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/redisproc"
	"github.com/slotexporter/slot_exporter/internal/redistest"
	"github.com/slotexporter/slot_exporter/internal/snapshot"
	"github.com/slotexporter/slot_exporter/internal/track"
)

// faultConfig has one slot-set family so that each fault logs once.
// sampling adds lines to the sampling block.
func faultConfig(addr string, interval, timeout time.Duration, scanCount int, sampling ...string) string {
	f := redisproc.Slots()
	f.Match, f.User = "f:*", `^f:\{([^}]+)\}$`
	return redisproc.Config{
		Addr: addr,
		// No CPU pacing: these tests time faults, not the pace.
		Sampling: append([]string{"interval: " + interval.String(), "timeout: " + timeout.String(), fmt.Sprintf("scan_count: %d", scanCount), "redis_cpu_share: 0"}, sampling...),
		Families: []redisproc.Family{f},
	}.YAML()
}

// newFaultHarness is a harness with the client main.go would build (its
// timeouts follow the sweep's context) and the log kept for inspection.
func newFaultHarness(t *testing.T, yaml string) (*exportertest.Harness, *exportertest.Logs) {
	t.Helper()
	logs := exportertest.NewLogs()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("sweeper log:\n%s", logs.String())
		}
	})
	return exportertest.Dial(t, yaml, logs.Logger()), logs
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

const (
	upSeries      = `slot_exporter_up`
	errSeries     = `slot_exporter_sweep_errors_total{family="streams"}`
	liveSeries    = `slot_members{family="streams",state="live"}`
	lastSeries    = `slot_exporter_last_sweep_timestamp_seconds{family="streams"}`
	durSeries     = `slot_exporter_sweep_duration_seconds{family="streams"}`
	periodSeries  = `slot_exporter_sampling_period_seconds{family="streams"}`
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

	// scan_count 10 makes a sweep thousands of round trips long. Every
	// sweep reads every key: with change tracking (the default) the
	// sweeps after the first would read only what changed, a few round
	// trips, and the kill would fall between them.
	h, logs := newFaultHarness(t, faultConfig(srv.Addr, interval, 10*time.Second, 10, "track_changes: false"))
	h.Sweeper.Start()
	t.Cleanup(h.Sweeper.Stop)
	exportertest.WaitFor(t, 2*time.Minute, "first sweep", h.Sweeper.Ready)
	good := h.Metrics()
	exportertest.Expect(t, good, map[string]float64{upSeries: 1, liveSeries: sets, errSeries: 0})
	t.Logf("a full sweep of %d sets took %.2fs", sets, good[durSeries])

	// Kill early in a sweep: each sweep starts with one TIME, then runs
	// about sets/scan_count SCANs; kill a few hundred SCANs into a fresh
	// one, with most of it still to go.
	times := exportertest.Calls(t, admin, "time")
	var scans int64
	exportertest.WaitFor(t, 2*interval+2*time.Minute, "a sweep to start", func() bool {
		scans = exportertest.Calls(t, admin, "scan")
		return exportertest.Calls(t, admin, "time") > times
	})
	exportertest.WaitFor(t, 2*time.Minute, "the sweep to get going", func() bool {
		return exportertest.Calls(t, admin, "scan") >= scans+300
	})
	srv.Kill()

	exportertest.WaitFor(t, 2*time.Minute, "the failure to be reported", func() bool {
		m := h.Metrics()
		return m[upSeries] == 0 && m[errSeries] >= 1
	})
	first := logs.Lines("sweep failed")[0]
	// A failure at TIME would mean the kill fell between sweeps.
	if !strings.Contains(first, "node ") {
		t.Errorf("the first failure is not a read cut short mid-sweep: %s", first)
	}

	// The last good numbers are served for at most 2 x the sampling
	// period (the interval, or the achieved period when sweeps take
	// longer, as they may on a loaded machine) after the last good sweep,
	// then dropped. The collector judges freshness just
	// before this test reads the clock, so a present series may be at
	// most a little older than 2 x interval here, an absent one never
	// younger.
	var sawStale bool
	// The period of the last good sweep is the last one served.
	period := good[periodSeries]
	// The checks below time the drop; the deadline only ends a hung test.
	// The period may exceed sampling.timeout: on a loaded machine the
	// first sweep can take more than one attempt.
	exportertest.WaitFor(t, 2*max(interval, 10*time.Second)+2*time.Minute, "stale domain metrics to be dropped", func() bool {
		m := h.Metrics()
		if p, ok := m[periodSeries]; ok {
			period = p
		}
		staleAfter := 2 * max(interval, time.Duration(period*float64(time.Second)))
		if _, ok := m[upSeries]; !ok {
			t.Fatal("the collector stopped answering")
		}
		age := time.Since(time.Unix(0, int64(m[lastSeries]*1e9)))
		v, present := m[liveSeries]
		switch {
		case present && age > staleAfter+time.Second/2:
			t.Fatalf("slot_members still served %s after the last good sweep (2 x period %s)", age, staleAfter)
		case present:
			sawStale = true
			if v != sets {
				t.Fatalf("stale slot_members = %v, want the last good %d", v, sets)
			}
		case age <= staleAfter:
			t.Fatalf("slot_members dropped only %s after the last good sweep, before 2 x period (%s)", age, staleAfter)
		}
		return !present
	})
	if !sawStale {
		t.Log("the kill came late in the freshness window: stale data was never observed")
	}
	if _, ok := h.Metrics()[`slot_sets{family="streams"}`]; ok {
		t.Error("slot_sets still served after the data went stale")
	}
	// The snapshot still holds the counters the scrape no longer shows.
	fs := h.Sweeper.Snapshot().Families[0]
	for _, o := range track.OutcomeNames() {
		if n, ok := fs.Lookup(snapshot.HoldsEnded, o); !ok || n != 0 {
			t.Errorf("holds ended as %s by a failed sweep: %v (present %v)", o, n, ok)
		}
	}
	if n, _ := fs.Lookup(snapshot.Acquires); n != sets {
		t.Errorf("acquires = %v, want %d", n, sets)
	}

	// Redis comes back on the same port, empty (no persistence): the loop
	// picks it up by itself, and the holds it tracked, including those
	// the cut-short sweep had already read, are lost, not released.
	errs := h.Metrics()[errSeries]
	srv.Restart()
	exportertest.WaitFor(t, 2*interval+2*time.Minute, "recovery", func() bool {
		m := h.Metrics()
		return m[upSeries] == 1 && m[lostSeries] > 0
	})
	got := h.Metrics()
	exportertest.Expect(t, got, map[string]float64{
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
	h, logs := newFaultHarness(t, faultConfig(srv.Addr, time.Second, timeout, 100))
	h.Sweep()
	exportertest.Expect(t, h.Metrics(), map[string]float64{upSeries: 1, liveSeries: 20})

	ctx := context.Background()
	if err := admin.Do(ctx, "CLIENT", "PAUSE", pause.Milliseconds(), "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	err := h.Sweeper.SweepOnce(ctx)
	returned := time.Since(paused)
	if err == nil {
		t.Fatal("a sweep against a paused Redis succeeded")
	}
	got := h.Metrics()
	exportertest.Expect(t, got, map[string]float64{upSeries: 0, errSeries: 1})
	// Cut off at the timeout: far from the pause's end.
	if d := time.Duration(got[durSeries] * 1e9); d < timeout || d > timeout+pause/2 {
		t.Errorf("failed sweep took %s: want about sampling.timeout (%s), not the pause (%s)", d, timeout, pause)
	}
	if returned > timeout+pause/2 {
		t.Errorf("SweepOnce returned %s into a %s pause", returned, pause)
	}
	if l := logs.Lines("sweep failed", "cut off at sampling.timeout"); len(l) != 1 {
		t.Errorf("want one log line saying the sweep was cut off at sampling.timeout, got %q", logs.String())
	}

	// Recovery: sweep until one succeeds, which must happen soon after
	// the pause ends.
	deadline := paused.Add(pause + 10*time.Second)
	for h.Sweeper.SweepOnce(ctx) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("no successful sweep %s after a %s pause", time.Since(paused), pause)
		}
	}
	if time.Since(paused) < pause {
		t.Errorf("a sweep succeeded %s into a %s pause", time.Since(paused), pause)
	}
	exportertest.Expect(t, h.Metrics(), map[string]float64{
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
	h, logs := newFaultHarness(t, faultConfig(srv.Addr, time.Second, 5*time.Second, 100))
	h.Sweep()
	// Known history before the restart: one slot released, one expired
	// and pruned.
	admin.ZRem(ctx, "f:{u0}", "s0")
	admin.ZAdd(ctx, "f:{u1}", redis.Z{Score: float64(time.Now().Add(-time.Second).UnixMilli()), Member: "s0"})
	h.Sweep()
	admin.ZRemRangeByScore(ctx, "f:{u1}", "-inf", strconv.FormatInt(time.Now().UnixMilli(), 10))
	h.Sweep()
	before := h.Metrics()
	exportertest.Expect(t, before, map[string]float64{releaseSeries: 1, expiredSeries: 1, lostSeries: 0, liveSeries: 198})
	// Every member still held is live (the tracker's own size is not
	// published): 198 holds for the restart to lose.
	tracked := 0.0
	for k, v := range exportertest.Series(before, "slot_members") {
		if strings.Contains(k, `family="streams"`) {
			tracked += v
		}
	}
	if tracked != 198 {
		t.Fatalf("tracking %v members, want 198", tracked)
	}

	srv.Restart()
	exportertest.WaitFor(t, 2*time.Minute, "a sweep of the restarted server", func() bool { return h.Sweeper.SweepOnce(ctx) == nil })
	got := h.Metrics()
	exportertest.Expect(t, got, map[string]float64{
		lostSeries:    tracked,
		releaseSeries: 1,
		expiredSeries: 1,
		liveSeries:    0,
		upSeries:      1,
		`slot_hold_duration_seconds_count{family="streams"}`: 2 + tracked,
	})
	if w := logs.Lines("level=WARN"); len(w) != 1 || !strings.Contains(w[0], "lost=198") {
		t.Errorf("want exactly one warning naming 198 lost holds, got %q", w)
	}

	// Nothing more is lost on later sweeps of the same server.
	h.Sweep()
	exportertest.Expect(t, h.Metrics(), map[string]float64{lostSeries: tracked})
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
	h, _ := newFaultHarness(t, faultConfig(srv.Addr, time.Second, 5*time.Second, 100))
	h.Sweep()

	srv.Restart()
	if err := admin.Do(ctx, "ACL", "SETUSER", "default", "-scan").Err(); err != nil {
		t.Fatal(err)
	}
	exportertest.WaitFor(t, 2*time.Minute, "a sweep refused at SCAN", func() bool {
		err := h.Sweeper.SweepOnce(ctx)
		return err != nil && strings.Contains(err.Error(), "NOPERM")
	})
	if err := admin.Do(ctx, "ACL", "SETUSER", "default", "+scan").Err(); err != nil {
		t.Fatal(err)
	}
	h.Sweep()
	exportertest.Expect(t, h.Metrics(), map[string]float64{lostSeries: 20, releaseSeries: 0, expiredSeries: 0})
}

// TestReadFailureGoesOn: the exporter's connections are killed (CLIENT
// KILL) halfway through a first read; the sweep fails, and the next
// attempt goes on from what the first read rather than starting over.
func TestReadFailureGoesOn(t *testing.T) {
	const sets = 20000
	srv := redistest.Start(t)
	admin := srv.Client()
	ctx := context.Background()
	live := float64(time.Now().Add(115 * time.Second).UnixMilli())
	seedSets(t, admin, sets, 1, live)
	exportertest.Must(t, admin.ConfigResetStat(ctx).Err())

	// scan_count 10 makes the read thousands of round trips long. With
	// change tracking (the default) the sweeps after the first read only
	// what changed, which is nothing: the counts below are the first
	// read's, whenever they are taken. The kill spares the tracking
	// connection (a subscriber, not TYPE normal).
	h, logs := newFaultHarness(t, faultConfig(srv.Addr, 5*time.Second, time.Minute, 10))
	h.Sweeper.Start()
	t.Cleanup(h.Sweeper.Stop)
	exportertest.WaitFor(t, 2*time.Minute, "half the keys read", func() bool {
		return exportertest.Calls(t, admin, "pttl") >= sets/2
	})
	before := exportertest.Calls(t, admin, "pttl")
	exportertest.Must(t, admin.ClientKillByFilter(ctx, "TYPE", "normal", "SKIPME", "yes").Err())
	exportertest.WaitFor(t, 2*time.Minute, "the first read to complete", h.Sweeper.Ready)
	m := h.Metrics()
	exportertest.Expect(t, m, map[string]float64{liveSeries: sets, errSeries: 1})
	// Each key read once, but those of the batches the kill cut short;
	// starting over would have read the first half again.
	if read := exportertest.Calls(t, admin, "pttl"); read > sets+sets/10 {
		t.Errorf("%d keys read for %d sets (%d before the kill): the read started over", read, sets, before)
	}
	if lines := logs.Lines("sweep failed", "the next attempt goes on from there"); len(lines) != 1 {
		t.Errorf("want one failure that says the next attempt goes on:\n%s", logs.String())
	}
}

// TestOverrunBlamesWhatHeldItUp: a sweep that overruns its interval says
// why: the read budget when the reads waited for it, Redis when it was
// Redis that kept them (a script that blocks it for 1.5 s).
func TestOverrunBlamesWhatHeldItUp(t *testing.T) {
	t.Run("budget", func(t *testing.T) {
		srv := redistest.Start(t)
		admin := srv.Client()
		seedSets(t, admin, 3000, 1, float64(time.Now().Add(115*time.Second).UnixMilli()))
		h, logs := newFaultHarness(t, faultConfig(srv.Addr, time.Second, 30*time.Second, 100, "max_keys_per_second: 1000", "track_changes: false"))
		h.Sweeper.Start()
		t.Cleanup(h.Sweeper.Stop)
		exportertest.WaitFor(t, 2*time.Minute, "an overrun", func() bool { return len(logs.Lines("sweep overran")) > 0 })
		if line := logs.Lines("sweep overran")[0]; !strings.Contains(line, "the read budget") {
			t.Errorf("a sweep held up by its budget blames something else: %s", line)
		}
	})
	t.Run("redis", func(t *testing.T) {
		srv := redistest.Start(t)
		admin := srv.Client()
		ctx := context.Background()
		seedSets(t, admin, 10, 1, float64(time.Now().Add(115*time.Second).UnixMilli()))
		h, logs := newFaultHarness(t, faultConfig(srv.Addr, time.Second, 30*time.Second, 100))
		h.Sweeper.Start()
		t.Cleanup(h.Sweeper.Stop)
		exportertest.WaitFor(t, 2*time.Minute, "first sweep", h.Sweeper.Ready)
		// Busy for 1.5 s of Redis time: every sweep that starts meanwhile
		// waits for it.
		const block = `local t = redis.call('TIME'); local start = t[1] * 1e6 + t[2]
repeat t = redis.call('TIME') until t[1] * 1e6 + t[2] - start > 1500000
return 1`
		exportertest.WaitFor(t, 2*time.Minute, "an overrun", func() bool {
			exportertest.Must(t, admin.Eval(ctx, block, nil).Err())
			return len(logs.Lines("sweep overran")) > 0
		})
		if line := logs.Lines("sweep overran")[0]; !strings.Contains(line, "Redis answered slowly") {
			t.Errorf("a sweep held up by Redis blames something else: %s", line)
		}
	})
}

// TestOverrunsLoggedOnceInAWhile: an interval shorter than every sweep
// logs one line in ten minutes, not a line a sweep; the counter counts
// each overrun.
func TestOverrunsLoggedOnceInAWhile(t *testing.T) {
	srv := redistest.Start(t)
	seedSets(t, srv.Client(), 100, 1, float64(time.Now().Add(115*time.Second).UnixMilli()))
	// 100 keys at 200 a second: half a second a sweep, five intervals.
	h, logs := newFaultHarness(t, faultConfig(srv.Addr, 100*time.Millisecond, 30*time.Second, 100, "max_keys_per_second: 200", "track_changes: false"))
	overruns := func() uint64 { return h.Sweeper.Snapshot().Families[0].Overruns }
	h.Sweeper.Start()
	exportertest.WaitFor(t, 2*time.Minute, "five overruns", func() bool { return overruns() >= 5 })
	h.Sweeper.Stop()
	if n, lines := overruns(), len(logs.Lines("sweep overran")); lines != 1 {
		t.Errorf("%d overruns logged %d lines, want 1", n, lines)
	}
}

// TestSparseFamilyCutOffIsNoFailure: a family with none of its keys yet,
// in a large keyspace, walks SCAN pages for long without applying a key.
// Cut off at sampling.timeout in the middle of that walk, it moved on all
// the same: no failed sweep and no error line, and the next attempt goes
// on from where the walk got to. Judged by its keys alone, each such
// cut-off counted as a failed sweep, and SlotExporterSweepErrors fired for
// a family that worked. With the default pace and unpaced.
func TestSparseFamilyCutOffIsNoFailure(t *testing.T) {
	const (
		others  = 100_000
		timeout = 3 * time.Second
		atLeast = 1000 // pages walked before Redis stops answering
	)
	srv := redistest.Start(t)
	admin := srv.Client()
	ctx := context.Background()
	pipe := admin.Pipeline()
	for i := range others {
		pipe.Set(ctx, fmt.Sprintf("cache:%d", i), "x", 0)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	// scan_count 10: a walk of about 10,000 SCAN pages, none with a key
	// of the family. How many exactly, a walk of the test's own says.
	walk := 0
	for cursor := uint64(0); ; walk++ {
		var err error
		if _, cursor, err = admin.Scan(ctx, cursor, "f:*", 10).Result(); err != nil {
			t.Fatal(err)
		}
		if cursor == 0 {
			walk++
			break
		}
	}
	if walk < 5*atLeast {
		t.Fatalf("a walk of %d pages: too short to cut off in its middle", walk)
	}
	for _, pace := range []string{"redis_cpu_share: 0.1", "redis_cpu_share: 0"} {
		t.Run(pace, func(t *testing.T) {
			exportertest.Must(t, admin.ConfigResetStat(ctx).Err())
			f := redisproc.Slots()
			f.Match, f.User = "f:*", `^f:\{([^}]+)\}$`
			h, logs := newFaultHarness(t, redisproc.Config{
				Addr:     srv.Addr,
				Sampling: []string{"interval: 1s", "timeout: " + timeout.String(), "scan_count: 10", pace},
				Families: []redisproc.Family{f},
			}.YAML())
			// Redis stops answering once the walk is well under way,
			// for longer than what is left of the timeout.
			done := make(chan error, 1)
			go func() { done <- h.Sweeper.SweepOnce(ctx) }()
			exportertest.WaitFor(t, time.Minute, "the walk to be under way", func() bool {
				return exportertest.Calls(t, admin, "scan") >= atLeast
			})
			exportertest.Must(t, admin.Do(ctx, "CLIENT", "PAUSE", (timeout+time.Second).Milliseconds(), "ALL").Err())
			if err := <-done; !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("the sweep returned %v, want a cut-off in the middle of its walk", err)
			}
			exportertest.Expect(t, h.Metrics(), map[string]float64{errSeries: 0})
			if l := logs.Lines("sweep failed"); len(l) != 0 {
				t.Errorf("a walk cut off having moved on is no failure: %q", l)
			}
			if l := logs.Lines("sweep cut off at sampling.timeout; the next attempt goes on"); len(l) != 1 {
				t.Errorf("want one line saying the sweep goes on, got %q", l)
			}
			walked := exportertest.Calls(t, admin, "scan") // answered at the pause's end
			exportertest.WaitFor(t, 0, "a complete sweep", func() bool {
				err := h.Sweeper.SweepOnce(ctx)
				if err != nil && !errors.Is(err, context.DeadlineExceeded) {
					t.Fatal(err)
				}
				return err == nil
			})
			exportertest.Expect(t, h.Metrics(), map[string]float64{errSeries: 0, `slot_sets{family="streams"}`: 0})
			// Going on, the pages are about one walk's; starting over
			// from the last page with keys (here, the start), the
			// pages walked before the cut-off, at least atLeast, are
			// walked again.
			if all := exportertest.Calls(t, admin, "scan"); all > int64(walk+walk/20) {
				t.Errorf("%d SCAN pages for a walk of %d (%d before the cut-off): the walk started over", all, walk, walked)
			}
		})
	}
}

// TestRestartBetweenCheckAndReads: Redis restarts empty after a sweep has
// read its identity (INFO) and before it reads its keys. The holds the
// sweep then finds gone vanished with the restart: lost, not released.
// Without the second look at INFO once the keys are read, the sweep ended
// them as released, and the next sweep's check came too late for them.
func TestRestartBetweenCheckAndReads(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client()
	ctx := context.Background()
	seedSets(t, admin, 10, 2, float64(time.Now().Add(115*time.Second).UnixMilli()))
	h, _ := newFaultHarness(t, faultConfig(srv.Addr, time.Second, time.Minute, 100))
	h.Sweep()
	exportertest.Expect(t, h.Metrics(), map[string]float64{liveSeries: 20})
	restarted := false
	h.Sweeper.AfterLostCheck(func() {
		if !restarted {
			restarted = true
			srv.Restart()
		}
	})
	// The sweep the restart lands in must itself end the holds: one that
	// failed would leave them to the next sweep's check, which sees the
	// restart anyway.
	if err := h.Sweeper.SweepOnce(ctx); err != nil {
		t.Fatalf("the sweep across the restart failed (%v): it must read the emptied server", err)
	}
	if !restarted {
		t.Fatal("the restart did not happen in the sweep")
	}
	exportertest.Expect(t, h.Metrics(), map[string]float64{lostSeries: 20, releaseSeries: 0, expiredSeries: 0, liveSeries: 0})
}
