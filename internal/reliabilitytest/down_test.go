package reliabilitytest

import (
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/redistest"
)

// TestRedisDownBacksOff: Redis is killed for 3 s under a family swept
// every 100 ms. Failed sweeps back off (the wait doubles from the
// interval), the log has one ERROR per doubling of the run of failures
// (failures_in_a_row 1, 2, 4, ...), each saying when the next try is, and
// one INFO "sweep recovered" once Redis is back; the next outage starts
// from the interval again. Sweeping at the interval, as before, is 30
// failed sweeps and 30 ERROR lines.
func TestRedisDownBacksOff(t *testing.T) {
	const (
		interval = 100 * time.Millisecond
		down     = 3 * time.Second
	)
	srv := redistest.Start(t)
	admin := srv.Client()
	seedHolds(t, admin, "u", 3, 1, exportertest.RedisTime(t, admin)+115_000)
	e := newExporter(t, configYAML(addrBlock(srv.Addr)+"  dial_timeout: 1s\n", "  interval: 100ms\n  timeout: 1s\n  window: 1s\n", streamsFamily))
	e.start()
	errs := func() float64 { return e.metrics()[`slot_exporter_sweep_errors_total{family="streams"}`] }
	exportertest.WaitFor(t, 2*time.Minute, "a first sweep", func() bool { return e.metrics()[upS] == 1 })
	e.logs.Take()
	before := errs()

	srv.Kill()
	time.Sleep(down)
	failed := int(errs() - before)
	logged := e.records(slog.LevelError, "sweep failed")
	t.Logf("%d failed sweeps in %s down, %d ERROR lines", failed, down, len(logged))

	// 0, 0.1, 0.3, 0.7, 1.5, 3.1 s: six tries at most in 3 s, and at
	// least the three a doubling wait leaves room for.
	if failed < 3 || failed > 6 {
		t.Errorf("%d failed sweeps in %s: want 3 to 6 (waits of 100ms doubling)", failed, down)
	}
	for i, r := range logged {
		n := 1 << i
		if r.Attrs["failures_in_a_row"] != strconv.Itoa(n) {
			t.Errorf("ERROR %d says failures_in_a_row=%s, want %d", i, r.Attrs["failures_in_a_row"], n)
		}
		if want := (interval << (n - 1)).String(); r.Attrs["next_try_in"] != want {
			t.Errorf("ERROR %d says next_try_in=%s, want %s", i, r.Attrs["next_try_in"], want)
		}
		if r.Attrs["family"] != "streams" || r.Attrs["err"] == "" {
			t.Errorf("ERROR %d does not name the family and the error: %v", i, r.Attrs)
		}
	}
	if want := len(strconv.FormatInt(int64(failed), 2)); len(logged) != want {
		t.Errorf("%d ERROR lines for %d failures in a row, want %d (one per doubling)", len(logged), failed, want)
	}

	srv.Restart()
	exportertest.WaitFor(t, 2*time.Minute, "a sweep of the restarted Redis", func() bool { return e.metrics()[upS] == 1 })
	failed = int(errs() - before)
	recs := e.logs.Take()
	var recovered []exportertest.Record
	for _, r := range recs {
		switch {
		case r.Msg == "sweep recovered":
			recovered = append(recovered, r)
		case r.Level >= slog.LevelError && r.Attrs["failures_in_a_row"] != "" && r.Attrs["failures_in_a_row"] != strconv.Itoa(failed):
			t.Errorf("ERROR while down, not at a doubling: %v", r.Attrs)
		}
	}
	if len(recovered) != 1 {
		t.Fatalf("%d 'sweep recovered' lines, want 1: %+v", len(recovered), recs)
	}
	if got := recovered[0].Attrs["failures_in_a_row"]; got != strconv.Itoa(failed) {
		t.Errorf("recovery after %s failures, want %d", got, failed)
	}
	if d, err := time.ParseDuration(recovered[0].Attrs["down_for"]); err != nil || d < down {
		t.Errorf("recovery says down_for=%q, want at least %s", recovered[0].Attrs["down_for"], down)
	}

	// A second outage starts over from the interval.
	time.Sleep(3 * interval)
	e.logs.Take()
	srv.Kill()
	exportertest.WaitFor(t, 2*time.Minute, "the second outage's first failure", func() bool { return errs() > float64(before)+float64(failed) })
	if r := e.records(slog.LevelError, "sweep failed"); len(r) != 1 || r[0].Attrs["failures_in_a_row"] != "1" || r[0].Attrs["next_try_in"] != interval.String() {
		t.Errorf("second outage: %+v, want one ERROR with failures_in_a_row=1, next_try_in=%s", r, interval)
	}
}
