package track

import (
	"math"
	"testing"
)

func TestClassifyOrder(t *testing.T) {
	// ttl 120s, heartbeat 20s, stale after 40s, max hold 15m, skew 5s.
	r := Rules{TTL: 120e3, Heartbeat: 20e3, StaleAfter: 40e3, MaxHold: 900e3, Skew: 5e3, Unit: 1}
	const now = 1_000_000_000.0
	cases := []struct {
		name         string
		score, first float64
		want         MemberState
	}{
		{"just heartbeated", now + 120e3, now, StateLive},
		{"expired exactly now", now, now, StateExpired},
		{"expired long ago", now - 1, now - 1e6, StateExpired},
		{"-inf", math.Inf(-1), now, StateExpired},
		{"zero score", 0, now, StateExpired},
		{"future: microseconds written as ms", now * 1000, now, StateFuture},
		{"+inf never expires", math.Inf(1), now, StateFuture},
		{"within skew tolerance", now + 124e3, now, StateLive},
		{"just past skew tolerance", now + 125e3 + 1, now, StateFuture},
		{"stale: no heartbeat for 41s", now + 120e3 - 41e3, now, StateStale},
		{"not yet stale at 40s", now + 120e3 - 40e3, now, StateLive},
		// Expired wins over everything else, future over stale/zombie.
		{"expired and ancient", now - 5, now - 1e7, StateExpired},
		{"zombie: held 16m and heartbeating", now + 110e3, now - 960e3, StateZombie},
		{"stale wins over zombie", now + 60e3, now - 960e3, StateStale},
		{"future wins over zombie", now + 1e7, now - 960e3, StateFuture},
	}
	for _, c := range cases {
		b := r.Bounds(int64(now))
		if got := r.Classify(&b, c.score, int64(now), int64(c.first)); got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}

func TestMemberTrackerHeartbeatsAndEnds(t *testing.T) {
	r := Rules{TTL: 2000, Heartbeat: 200, StaleAfter: 400, MaxHold: 60000, Skew: 500, Unit: 1}
	tr := NewMemberTracker()
	now := int64(10_000)
	o := tr.Observe(1, 7, float64(now+2000), now, bp(&r, now), &r)
	if !o.New || o.Heartbeats != 0 || o.State != StateLive {
		t.Fatalf("first sighting: %+v", o)
	}
	if o := tr.Observe(1, 7, float64(now+2000), now, bp(&r, now), &r); !o.Duplicate {
		t.Fatalf("second sighting in the same sweep must be a duplicate: %+v", o)
	}
	// One sweep later, 1s on: five heartbeats of 200ms moved the score.
	now += 1000
	o = tr.Observe(1, 7, float64(now+2000), now, bp(&r, now), &r)
	if o.New || o.Heartbeats != 5 {
		t.Fatalf("after 1s of heartbeats: %+v", o)
	}
	// A score that moved by less than one interval is still one heartbeat.
	now += 50
	if o := tr.Observe(1, 7, float64(now+2000), now, bp(&r, now), &r); o.Heartbeats != 1 {
		t.Fatalf("small advance: %+v", o)
	}
	// Member 2: goes stale, then disappears: expired outcome.
	tr.Observe(2, 8, float64(now+1000), now, bp(&r, now), &r)
	now += 1000
	tr.Observe(1, 7, float64(now+2000), now, bp(&r, now), &r)
	tr.Observe(2, 8, float64(now), now, bp(&r, now), &r) // not advanced: expired now
	now += 1000
	e := tr.Sweep(now, nil, false, &r)
	if e.Count[OutcomeReleased] != 1 || e.Count[OutcomeExpired] != 1 || e.Count[OutcomeLost] != 0 || len(e.Durations) != 2 {
		t.Fatalf("ended: %+v", e)
	}
	if tr.Len() != 0 {
		t.Fatalf("ended members must be forgotten, %d left", tr.Len())
	}
}

func TestMemberTrackerCarryAndLost(t *testing.T) {
	r := Rules{TTL: 2000, Heartbeat: 200, StaleAfter: 400, MaxHold: 60000, Skew: 500, Unit: 1}
	tr := NewMemberTracker()
	tr.Observe(1, 0xAAAA0001, 3000, 1000, bp(&r, 1000), &r)
	tr.Observe(2, 0xBBBB0002, 3000, 1000, bp(&r, 1000), &r)
	e := tr.Sweep(2000, Carry{0xAAAA0001: {}}, false, &r)
	if e.Count[OutcomeReleased] != 1 || tr.Len() != 1 {
		t.Fatalf("carried key's member must survive: %+v len=%d", e, tr.Len())
	}
	e = tr.Sweep(3000, nil, true, &r)
	if e.Count[OutcomeLost] != 1 || e.Count[OutcomeReleased] != 0 {
		t.Fatalf("restart: %+v", e)
	}
}

func TestFloorTracker(t *testing.T) {
	f := NewFloorTracker()
	const window, floorWindow, limit = 3000, 5000, 3
	step := func(now int64, used map[string]int64) FloorAggregates {
		f.Begin()
		for u, n := range used {
			f.Add(hashString(u), u, n, 0)
		}
		return f.Commit(now, window, floorWindow, Limits{Limit: limit, OverLimitIsAnomaly: true})
	}
	// leaky stays at 1 forever; busy drops to 0 every 4th sweep; burst
	// is at 4 (over the limit) once.
	var a FloorAggregates
	for i := int64(0); i <= 10; i++ {
		used := map[string]int64{"leaky": 1}
		if i%4 != 3 {
			used["busy"] = 2
		}
		if i == 10 {
			used["burst"] = 4
		}
		a = step(i*1000, used)
	}
	if a.Active != 3 || a.OverLimit != 1 || a.AtLimit != 1 || a.FloorNonzero != 1 {
		t.Fatalf("aggregates at t=10s: %+v", a)
	}
	top, dropped := f.Top(10, 10_000)
	got := map[string]UserView{}
	for _, v := range top {
		got[v.User] = v
	}
	if got["leaky"].FloorSeconds != 10 || got["leaky"].UsedMax != 1 {
		t.Errorf("leaky: %+v", got["leaky"])
	}
	if got["busy"].FloorSeconds != 2 || got["busy"].UsedMax != 2 {
		t.Errorf("busy: %+v (last zero at t=7s)", got["busy"])
	}
	if !got["burst"].Anomaly || top[0].User != "burst" || dropped != 0 {
		t.Errorf("the over-limit user must come first: %+v", top)
	}
	// The cap keeps the anomaly, then the oldest floor.
	top, dropped = f.Top(2, 10_000)
	if len(top) != 2 || top[0].User != "burst" || top[1].User != "leaky" || dropped != 1 {
		t.Errorf("cap 2: %+v dropped=%d", top, dropped)
	}
	// Everyone goes to zero: window max decays, then users are forgotten.
	step(11_000, nil)
	if top, _ := f.Top(10, 11_000); len(top) != 3 || top[0].FloorSeconds != 0 {
		t.Errorf("window max must outlive the drop to zero: %+v", top)
	}
	step(14_000, nil)
	if f.Len() != 0 {
		t.Errorf("users with nothing to report must be forgotten, %d left", f.Len())
	}
}

// TestEndedOutcome: a vanished hold is judged by its own last expiry, not
// by the state it was last seen in. Before the rebuild a member last seen
// stale counted as expired when it vanished; now it is a release while its
// expiry is still ahead.
func TestEndedOutcome(t *testing.T) {
	const now = 1_000_000
	for _, c := range []struct {
		name   string
		expiry float64
		lost   bool
		want   Outcome
	}{
		{"expiry ahead", now + 1, false, OutcomeReleased},
		{"expiry now", now, false, OutcomeExpired},
		{"expiry past", now - 1, false, OutcomeExpired},
		{"lost wins", now + 1, true, OutcomeLost},
		{"lost wins over expired", now - 1, true, OutcomeLost},
	} {
		if got := EndedOutcome(c.expiry, now, c.lost); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, outcomeNames[got], outcomeNames[c.want])
		}
	}

	r := Rules{TTL: 2000, Heartbeat: 200, StaleAfter: 400, MaxHold: 60000, Skew: 500, Unit: 1}
	tr := NewMemberTracker()
	at := int64(10_000)
	// Last heartbeat 1s ago: stale, its expiry 1s ahead.
	if o := tr.Observe(1, 7, float64(at+1000), at, bp(&r, at), &r); o.State != StateStale {
		t.Fatalf("setup: %+v, want stale", o)
	}
	// Last heartbeat 2.5s ago: expired half a second ago.
	tr.Observe(2, 7, float64(at-500), at, bp(&r, at), &r)
	// Both gone half a second later: the stale one before its expiry.
	e := tr.Sweep(at+500, nil, false, &r)
	if e.Count[OutcomeReleased] != 1 || e.Count[OutcomeExpired] != 1 {
		t.Fatalf("ended: %+v, want one released (stale, expiry ahead) and one expired", e)
	}
	// The ambiguous case: an expiry between the two sweeps counts as
	// expired.
	tr.Observe(3, 7, float64(at+1000), at+500, bp(&r, at+500), &r)
	if e := tr.Sweep(at+1500, nil, false, &r); e.Count[OutcomeExpired] != 1 {
		t.Fatalf("expiry between the sweeps: %+v, want expired", e)
	}
}
