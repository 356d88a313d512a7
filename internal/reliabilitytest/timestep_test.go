package reliabilitytest

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/redistest"
)

// TestRedisClockSteps runs redis-server with a clock the test moves
// (libfaketime: TIME and Redis's own key expiry follow it) and steps it
// back and forward, by seconds and by an hour, while the exporter sweeps.
// Three users: busy holds 2 slots throughout; peak holds 4 and releases
// 3 of them just before the step; leaver holds 3 and releases them just
// after it. After every sweep:
//   - no slot_user_floor_seconds is negative;
//   - slot_hold_duration_seconds_sum and _count never go down (leaver's
//     holds are measured across the step);
//   - a window after the step, slot_user_used_max of peak is 1, not the
//     4 sampled before it;
//   - a step back restarts busy's floor run at the new now, and the run
//     then ages with the new clock instead of staying at 0;
//   - slot_exporter_clock_skew_seconds shows the step.
func TestRedisClockSteps(t *testing.T) {
	const (
		interval = 250 * time.Millisecond
		window   = time.Second
	)
	sampling := fmt.Sprintf("  interval: %s\n  timeout: 5s\n  window: %s\n", interval, window)
	for _, step := range []time.Duration{-5 * time.Second, -time.Hour, 5 * time.Second, time.Hour} {
		t.Run(fmt.Sprint(step), func(t *testing.T) {
			srv := redistest.StartFakeClock(t)
			admin := srv.Client()
			expiry := exportertest.RedisTime(t, admin) + 115_000
			seedHolds(t, admin, "busy", 1, 2, expiry)
			seedHolds(t, admin, "peak", 1, 4, expiry)
			seedHolds(t, admin, "leaver", 1, 3, expiry)
			e := newExporter(t, configYAML(addrBlock(srv.Addr), sampling, streamsFamily))
			start := time.Now()

			var sum, count float64
			var sweeps int
			sweep := func(when string) map[string]float64 {
				t.Helper()
				time.Sleep(interval)
				// The first sweep after a forward step of an hour may meet
				// a connection Redis closed as idle in its own time.
				exportertest.WaitFor(t, 2*time.Minute, "a sweep", func() bool { return e.trySweep() == nil })
				sweeps++
				m := e.metrics()
				for k, v := range exportertest.Series(m, "slot_user_floor_seconds") {
					if v < 0 {
						t.Fatalf("%s (sweep %d): %s = %v", when, sweeps, k, v)
					}
				}
				s, c := m[`slot_hold_duration_seconds_sum{family="streams"}`], m[`slot_hold_duration_seconds_count{family="streams"}`]
				if s < sum || c < count {
					t.Fatalf("%s (sweep %d): hold durations went down: sum %v -> %v, count %v -> %v", when, sweeps, sum, s, count, c)
				}
				sum, count = s, c
				return m
			}
			floor := func(m map[string]float64, user string) (float64, bool) {
				v, ok := m[fmt.Sprintf(`slot_user_floor_seconds{family="streams",user=%q}`, user)]
				return v, ok
			}
			usedMax := func(m map[string]float64, user string) float64 {
				return m[fmt.Sprintf(`slot_user_used_max{family="streams",user=%q}`, user)]
			}

			var m map[string]float64
			for range 4 {
				m = sweep("before the step")
			}
			before, _ := floor(m, "busy0")
			if before <= 0 || usedMax(m, "peak0") != 4 {
				t.Fatalf("before the step: busy's floor %v, peak's max %v", before, usedMax(m, "peak0"))
			}

			exportertest.Must(t, admin.ZRem(ctx, streamKey("peak0"), "s1", "s2", "s3").Err())
			srv.Step(step)
			stepped := time.Now()
			m = sweep("right after the step")
			skew := m["slot_exporter_clock_skew_seconds"]
			if math.Abs(skew+step.Seconds()) > 1 {
				t.Errorf("clock skew %v s after Redis's clock moved %s", skew, step)
			}
			steppedRedis := exportertest.RedisTime(t, admin)
			after, ok := floor(m, "busy0")
			switch {
			case step == time.Hour:
				// Redis's own clock expired every key (PEXPIRE 240 s):
				// the holds ended as expired, each as long as it was
				// seen (first to last seen, both before the step).
				exportertest.Expect(t, m, map[string]float64{
					`slot_sets{family="streams"}`:                                0,
					`slot_holds_ended_total{family="streams",outcome="expired"}`: 9,
					lostS: 0,
				})
				if seen := time.Since(start).Seconds(); count != 9 || sum > 9*seen {
					t.Errorf("9 holds seen for at most %.1f s: duration count %v, sum %v s", seen, count, sum)
				}
				if ok {
					t.Errorf("busy still has a floor (%v s) with nothing held", after)
				}
				return
			case step < 0 && after != 0:
				t.Errorf("busy's floor %v s right after a step back, want 0 (the run restarts at the new now)", after)
			case step > 0 && after < before+step.Seconds():
				t.Errorf("busy's floor %v s after a step forward of %s from %v s: a step forward reads as time passed", after, step, before)
			}

			sumBefore := sum
			exportertest.Must(t, admin.Del(ctx, streamKey("leaver0")).Err())
			for time.Since(stepped) < window+2*interval {
				m = sweep("after the step")
			}
			if got := usedMax(m, "peak0"); got != 1 {
				t.Errorf("peak's used max %v a window after the step, with used 1 since before it", got)
			}
			exportertest.Expect(t, m, map[string]float64{releasedS: 6, lostS: 0, expiredS: 0, acquiresS: 9})
			if step < 0 {
				// The run restarted at the step and ages with Redis's new
				// clock: as old as the time since the step.
				got, _ := floor(m, "busy0")
				if since := float64(exportertest.RedisTime(t, admin)-steppedRedis) / 1000; got < since-0.05 || got > since+float64(interval)/float64(time.Second)+0.5 {
					t.Errorf("busy's floor %v s, %v s after the step: frozen or wrong", got, since)
				}
				// leaver's three holds, first seen before the step and
				// last seen after it: each 0 s long, never negative.
				if sum != sumBefore {
					t.Errorf("hold duration sum %v s -> %v s: want +0 for holds measured across a step back", sumBefore, sum)
				}
			}
			if l := e.logs.String(); strings.Contains(l, "level=ERROR") {
				t.Errorf("errors logged:\n%s", l)
			}
		})
	}
}
