package track

import (
	"fmt"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
)

// Redis TIME can step (docs/design.md, "Time can step back"). These tests
// step it back and forward, by less than a window and by an hour, between
// two sweeps 5 s apart.
var timeSteps = []time.Duration{-30 * time.Second, -time.Hour, 30 * time.Second, time.Hour}

const (
	sweepEvery  = int64(5000)   // ms
	stepWindow  = int64(60_000) // sampling.window
	stepFloorWn = int64(1_800_000)
)

var stepLimits = Limits{Limit: 10, OverLimitIsAnomaly: true}

// floorView is one user's view after a commit at now.
func floorView(t *testing.T, f *FloorTracker, now int64, user string) UserView {
	t.Helper()
	views, _ := f.Top(10, now)
	for _, v := range views {
		if v.User == user {
			return v
		}
	}
	t.Fatalf("no view of %s at %d", user, now)
	return UserView{}
}

// TestFloorTimeSteps: a user busy since t0 (used 5, then 1). After the
// step, the floor age is never negative and runs on from the new clock;
// the window maximum follows the new clock (the 5 from before a backward
// step does not stay for an hour); a forward step reads as time passed.
func TestFloorTimeSteps(t *testing.T) {
	for _, step := range timeSteps {
		t.Run(fmt.Sprint(step), func(t *testing.T) {
			f := NewFloorTracker()
			h := xxhash.Sum64String("u")
			commit := func(now, used int64) FloorAggregates {
				f.Begin()
				if used > 0 {
					f.Add(h, "u", used, 0)
				}
				return f.Commit(now, stepWindow, stepFloorWn, stepLimits)
			}
			t0 := int64(1_700_000_000_000)
			now := t0
			for i := range 4 {
				used := int64(1)
				if i == 2 {
					used = 5 // the window's maximum, 10 s before the step
				}
				commit(now, used)
				now += sweepEvery
			}
			last := now - sweepEvery // the last sweep before the step
			if v := floorView(t, f, last, "u"); v.FloorSeconds != 15 || v.UsedMax != 5 {
				t.Fatalf("before the step: floor %v, max %d; want 15, 5", v.FloorSeconds, v.UsedMax)
			}

			now += step.Milliseconds()
			agg := commit(now, 1)
			v := floorView(t, f, now, "u")
			if v.FloorSeconds < 0 {
				t.Fatalf("floor age %v s after a step of %s", v.FloorSeconds, step)
			}
			if step < 0 {
				// The run restarts at the new now: 0, and no freeze.
				if v.FloorSeconds != 0 {
					t.Errorf("floor age %v s right after a step back, want 0", v.FloorSeconds)
				}
				// The maximum of 5 was sampled "after" now: dropped.
				if v.UsedMax != 1 {
					t.Errorf("window max %d right after a step back, want 1 (the 5 from before the step is not in this window)", v.UsedMax)
				}
			} else {
				// A forward step cannot be told from time passing: the
				// run is 20 s + the step old.
				want := float64(20_000+step.Milliseconds()) / 1000
				if v.FloorSeconds != want {
					t.Errorf("floor age %v s after a step forward, want %v", v.FloorSeconds, want)
				}
				if wantMax := int64(5); step < time.Duration(stepWindow-10_000)*time.Millisecond && v.UsedMax != wantMax {
					t.Errorf("window max %d, want %d (still within the window)", v.UsedMax, wantMax)
				} else if step >= time.Duration(stepWindow)*time.Millisecond && v.UsedMax != 1 {
					t.Errorf("window max %d an hour later, want 1", v.UsedMax)
				}
			}
			if agg.Active != 1 || (step < 0 && agg.FloorNonzero != 0) {
				t.Errorf("aggregates %+v after a step of %s", agg, step)
			}

			// The sweeps after the step: the age runs on from there, one
			// sweep at a time, and the window closes a window later.
			at := v.FloorSeconds
			for i := 1; i <= 13; i++ {
				now += sweepEvery
				commit(now, 1)
				v := floorView(t, f, now, "u")
				if want := at + float64(i)*5; v.FloorSeconds != want {
					t.Fatalf("%d sweeps after the step: floor age %v, want %v", i, v.FloorSeconds, want)
				}
				if v.UsedMax < 1 || v.UsedMax > 5 {
					t.Fatalf("%d sweeps after the step: window max %d", i, v.UsedMax)
				}
			}
			if v := floorView(t, f, now, "u"); v.UsedMax != 1 {
				t.Errorf("a window after the step the max is %d, want 1", v.UsedMax)
			}

			// Back to 0 and busy again: a fresh run from that sweep.
			now += sweepEvery
			commit(now, 0)
			now += sweepEvery
			commit(now, 2)
			if v := floorView(t, f, now, "u"); v.FloorSeconds != 0 || v.UsedMax != 2 {
				t.Errorf("after a return to 0: floor %v, max %d; want 0, 2", v.FloorSeconds, v.UsedMax)
			}
		})
	}
}

// TestFloorBackwardStepNeverFreezesTheWindow: the same as a scrape would
// see it, sweep by sweep for a whole window after a step back of an hour:
// the maximum must follow the used values since the step, never the
// pre-step peak (which an old deque head would keep for an hour).
func TestFloorBackwardStepNeverFreezesTheWindow(t *testing.T) {
	f := NewFloorTracker()
	h := xxhash.Sum64String("u")
	now := int64(1_700_000_000_000)
	for _, used := range []int64{9, 9, 9} {
		f.Begin()
		f.Add(h, "u", used, 0)
		f.Commit(now, stepWindow, stepFloorWn, stepLimits)
		now += sweepEvery
	}
	now -= time.Hour.Milliseconds()
	for i := range int(stepWindow/sweepEvery) + 2 {
		used := int64(1 + i%3)
		f.Begin()
		f.Add(h, "u", used, 0)
		f.Commit(now, stepWindow, stepFloorWn, stepLimits)
		v := floorView(t, f, now, "u")
		if v.UsedMax > 3 || v.UsedMax < used {
			t.Fatalf("sweep %d after a step back of 1h: window max %d with used 1..3 since the step", i, v.UsedMax)
		}
		now += sweepEvery
	}
}

// TestHoldDurationsTimeSteps: a hold first seen before a step and last
// seen after it. A step back never yields a negative duration (it is
// clamped at 0); a step forward counts as time held.
func TestHoldDurationsTimeSteps(t *testing.T) {
	rules := Rules{TTL: 120_000, Heartbeat: 20_000, StaleAfter: 40_000, MaxHold: 900_000, Skew: 5000, Unit: 1}
	for _, step := range timeSteps {
		t.Run(fmt.Sprint(step), func(t *testing.T) {
			tr := NewMemberTracker()
			t0 := int64(1_700_000_000_000)
			score := float64(t0 + 115_000)
			// Two members: a is seen on both sides of the step, b only
			// before it.
			a, b := uint64(0xa11ce), uint64(0xb0b)
			tr.Observe(a, 1, score, t0, bp(&rules, t0), &rules)
			tr.Observe(b, 1, score, t0, bp(&rules, t0), &rules)
			tr.Sweep(t0, nil, false, &rules)
			now := t0 + sweepEvery + step.Milliseconds()
			o := tr.Observe(a, 1, score, now, bp(&rules, now), &rules)
			if step < 0 && o.State == StateZombie {
				t.Errorf("a step back made a member a zombie")
			}
			e := tr.Sweep(now, nil, false, &rules)
			if len(e.Durations) != 1 || e.Durations[0] != 0 {
				t.Errorf("b, first and last seen at t0: durations %v, want [0]", e.Durations)
			}
			now += sweepEvery
			e = tr.Sweep(now, nil, false, &rules)
			if len(e.Durations) != 1 {
				t.Fatalf("a ended: durations %v", e.Durations)
			}
			d := e.Durations[0]
			want := float64(sweepEvery+step.Milliseconds()) / 1000
			if step < 0 {
				want = 0
			}
			if d != want {
				t.Errorf("a held from t0 to t0+5s%+v: duration %v s, want %v", step, d, want)
			}
		})
	}
}
