package sweep_test

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/redisproc"
	"github.com/slotexporter/slot_exporter/internal/redistest"
	"github.com/slotexporter/slot_exporter/limiter"
)

// scenarioConfig is the common families at a fast pace (ttl 2s, heartbeats
// every 200ms); the counter family has no user regexp, so its user is what
// the * matched, braces included.
func scenarioConfig(addr string) string {
	slots, counters := redisproc.Slots(), redisproc.Counters()
	slots.TTL, slots.Heartbeat, slots.MaxHold, slots.Skew = 2*time.Second, 200*time.Millisecond, 3*time.Second, 500*time.Millisecond
	counters.User = ""
	return redisproc.Config{
		Addr:     addr,
		Sampling: []string{"interval: 500ms", "timeout: 5s", "window: 1s"},
		Leaks:    []string{"floor_window: 2s", "per_user_series: 100"},
		Families: []redisproc.Family{slots, counters},
	}.YAML()
}

// holder is one simulated stream, driven through the real limiter.
type holder struct {
	user, id  string
	noRefresh bool
	stopAt    time.Duration // stop heartbeating (killed or released); 0 = never
	release   bool
	beats     []time.Time
}

func (h *holder) key() string { return redisproc.SlotKey(h.user) }

// TestScenarioKnownTruth drives the limiter so the answer is known (killed
// holders, zombies, future scores, leaked and negative counters, a user over
// its limit, a key without TTL, a key expiring under a live slot) and checks
// the exact values the exporter reports.
func TestScenarioKnownTruth(t *testing.T) {
	srv := redistest.Start(t)
	rc := srv.Client()
	ctx := context.Background()
	h := exportertest.New(t, rc, scenarioConfig(srv.Addr))
	lim := limiter.New(rc, limiter.Options{TTL: 2 * time.Second, HeartbeatInterval: 200 * time.Millisecond})

	start := time.Now()
	at := func(d time.Duration) { time.Sleep(time.Until(start.Add(d))) }
	var (
		mu      sync.Mutex
		holders []*holder
		sweeps  []time.Time
	)
	acquire := func(hs ...*holder) {
		for _, x := range hs {
			ok, _, err := lim.Acquire(ctx, x.key(), x.id, 3)
			if err != nil || !ok {
				t.Fatalf("acquire %s/%s: %v %v", x.user, x.id, ok, err)
			}
			mu.Lock()
			holders = append(holders, x)
			mu.Unlock()
		}
	}
	sweep := func() {
		mu.Lock()
		sweeps = append(sweeps, time.Now())
		mu.Unlock()
		h.Sweep()
	}

	// Heartbeats every 200ms for every holder still beating.
	hbCtx, hbStop := context.WithCancel(ctx)
	var hbWG sync.WaitGroup
	hbWG.Add(1)
	go func() {
		defer hbWG.Done()
		// Beats are scheduled against the clock, not a ticker: a late round
		// is still sent (a ticker would drop it), as a real holder's next
		// heartbeat is, so score advances match the beats sent.
		for n := 1; ; n++ {
			select {
			case <-hbCtx.Done():
				return
			case <-time.After(time.Until(start.Add(time.Duration(n) * 200 * time.Millisecond))):
			}
			mu.Lock()
			hs := append([]*holder(nil), holders...)
			mu.Unlock()
			for _, x := range hs {
				el := time.Since(start)
				if x.stopAt != 0 && el >= x.stopAt {
					if x.release {
						_ = lim.Release(ctx, x.key(), x.id)
						x.release = false
					}
					continue
				}
				var alive bool
				var err error
				if x.noRefresh {
					alive, err = lim.HeartbeatNoRefresh(ctx, x.key(), x.id)
				} else {
					alive, err = lim.Heartbeat(ctx, x.key(), x.id)
				}
				if err == nil && alive {
					mu.Lock()
					x.beats = append(x.beats, time.Now())
					mu.Unlock()
				}
			}
		}
	}()
	defer func() { hbStop(); hbWG.Wait() }()

	// t=0: healthy streams (released at 1s), killed holders (stop at
	// 0.6s, never release), zombies (beat forever), future-dated scores
	// (microseconds written as milliseconds), legacy counters.
	for i := 1; i <= 3; i++ {
		acquire(&holder{user: fmt.Sprintf("h%d", i), id: "s1", stopAt: time.Second, release: true})
		acquire(&holder{user: fmt.Sprintf("k%d", i), id: "s1", stopAt: 600 * time.Millisecond})
	}
	acquire(&holder{user: "z1", id: "s1"}, &holder{user: "z2", id: "s1"})
	for _, u := range []string{"f1", "f2"} {
		k := redisproc.SlotKey(u)
		rc.ZAdd(ctx, k, redis.Z{Score: float64(time.Now().UnixMilli()) * 1000, Member: "unit-bug"})
		rc.PExpire(ctx, k, time.Minute)
	}
	rc.Set(ctx, redisproc.CounterPrefix+"{c1}", 1, 0)
	rc.Set(ctx, redisproc.CounterPrefix+"{c2}", 1, 0)
	rc.Set(ctx, redisproc.CounterPrefix+"{c3}", 1, 0)
	rc.Set(ctx, redisproc.CounterPrefix+"{n1}", -1, 0)

	at(100 * time.Millisecond)
	sweep()
	at(500 * time.Millisecond)
	sweep()
	// t=0.6s: "early" heartbeats without refreshing its key's expiry: the
	// key expires at 4.6s (2 x ttl after the acquire) while its slot's
	// expiry keeps moving ahead, 0.8s past the key's by t=3.5s. Since the
	// rebuild a gap within clock_skew_tolerance (500ms) is tolerated, so
	// the gap must have grown past it by the time it is checked; and
	// first seen at 1.1s, it is not held past max_hold (3s) by then.
	at(600 * time.Millisecond)
	acquire(&holder{user: "early", id: "s1", noRefresh: true})
	// t=1s: healthy streams end; c3 DECRs.
	at(time.Second)
	rc.Decr(ctx, redisproc.CounterPrefix+"{c3}")
	at(1100 * time.Millisecond)
	sweep()
	at(1500 * time.Millisecond)
	sweep()
	floorEarly := h.Metrics()[`slot_user_floor_seconds{family="streams",user="z1"}`]

	// t=2s: a user over its limit (three granted, one written past the
	// cap) and a set with no TTL at all.
	at(2 * time.Second)
	acquire(&holder{user: "over", id: "s1"}, &holder{user: "over", id: "s2"}, &holder{user: "over", id: "s3"})
	rc.ZAdd(ctx, redisproc.SlotKey("over"), redis.Z{Score: float64(time.Now().Add(2 * time.Second).UnixMilli()), Member: "s4"})
	rc.ZAdd(ctx, redisproc.SlotKey("nottl"), redis.Z{Score: float64(time.Now().Add(2 * time.Second).UnixMilli()), Member: "s1"})
	mu.Lock()
	holders = append(holders, &holder{user: "over", id: "s4"}, &holder{user: "nottl", id: "s1", noRefresh: true})
	mu.Unlock()
	if granted, used, _ := lim.Acquire(ctx, redisproc.SlotKey("over"), "s5", 3); granted || used != 4 {
		t.Fatalf("a fifth acquire for a user at 4/3 must be refused: granted=%v used=%d", granted, used)
	}
	// Sweeps fall on odd tenths, beats on even ones, so that no beat races
	// a sweep's read and the true count below is exact.
	for _, d := range []time.Duration{2100, 2500, 3100, 3500} {
		at(d * time.Millisecond)
		sweep()
	}
	got := h.Metrics()
	exportertest.Expect(t, got, map[string]float64{
		`slot_members{family="streams",state="live"}`:                 6, // over x4, early, nottl
		`slot_members{family="streams",state="zombie"}`:               2,
		`slot_members{family="streams",state="future"}`:               2,
		`slot_members{family="streams",state="expired"}`:              3, // the killed holders, not yet pruned
		`slot_members{family="streams",state="stale"}`:                0,
		`slot_sets{family="streams"}`:                                 10,
		`slot_users_active{family="streams"}`:                         7,
		`slot_users_at_limit{family="streams"}`:                       1,
		`slot_users_over_limit{family="streams"}`:                     1,
		`slot_users_floor_nonzero{family="streams"}`:                  5, // z1 z2 f1 f2 early
		`slot_sets_without_ttl{family="streams"}`:                     1,
		`slot_sets_expiring_early{family="streams"}`:                  1,
		`slot_acquires_total{family="streams"}`:                       16,
		`slot_holds_ended_total{family="streams",outcome="released"}`: 3,
		`slot_holds_ended_total{family="streams",outcome="expired"}`:  0,
		`slot_holds_ended_total{family="streams",outcome="lost"}`:     0,
		`slot_hold_duration_seconds_count{family="streams"}`:          3,
		`slot_user_used_max{family="streams",user="over"}`:            4,
		`slot_sets{family="legacy"}`:                                  4,
		`slot_counters_negative{family="legacy"}`:                     1,
		`slot_users_active{family="legacy"}`:                          2,
		`slot_users_floor_nonzero{family="legacy"}`:                   2,
		`slot_exporter_up`:                                            1,
	})

	// Floors rise for the leaked users and stay at 0 for healthy ones.
	z1 := got[`slot_user_floor_seconds{family="streams",user="z1"}`]
	if !(z1 >= 3.2 && z1 <= 3.6) || z1 <= floorEarly {
		t.Errorf("z1 floor = %v at t=3.5s (was %v at t=1.5s), want ~3.4 and rising", z1, floorEarly)
	}
	if f := got[`slot_user_floor_seconds{family="legacy",user="{c1}"}`]; f < 3.2 {
		// The counter family has no user regexp: the user is what the
		// first * matched, braces included.
		t.Errorf("leaked counter c1 floor = %v, want >= 3.2", f)
	}
	for _, u := range []string{"h1", "h2", "h3", "k1", "k2", "k3"} {
		if v := got[fmt.Sprintf(`slot_user_floor_seconds{family="streams",user=%q}`, u)]; v != 0 {
			t.Errorf("%s floor = %v, want 0", u, v)
		}
	}
	for _, u := range []string{"h1", "h2", "h3"} {
		if _, ok := got[fmt.Sprintf(`slot_user_used_max{family="streams",user=%q}`, u)]; ok {
			t.Errorf("healthy user %s has nothing to report and must get no series", u)
		}
	}

	// Heartbeats: the exporter infers them from score advances between
	// sweeps. Truth: beats that landed between the first and the last sweep
	// that saw each member.
	mu.Lock()
	var truth int
	for _, x := range holders {
		first, last := time.Time{}, time.Time{}
		var acquired time.Time
		if len(x.beats) > 0 {
			acquired = x.beats[0].Add(-200 * time.Millisecond)
		}
		for _, s := range sweeps {
			if s.Before(acquired) {
				continue
			}
			if x.stopAt != 0 && s.Sub(start) > x.stopAt && x.user[0] == 'h' {
				break // released: not seen after
			}
			if first.IsZero() {
				first = s
			}
			last = s
		}
		for _, b := range x.beats {
			if b.After(first) && !b.After(last) {
				truth++
			}
		}
	}
	mu.Unlock()
	hb := got[`slot_heartbeats_total{family="streams"}`]
	t.Logf("heartbeats: exporter %v, truth %d", hb, truth)
	if truth < 50 || math.Abs(hb-float64(truth)) > 0.1*float64(truth) {
		t.Errorf("slot_heartbeats_total = %v, true count %d: off by more than 10%%", hb, truth)
	}

	// An acquire for k1 prunes its dead slot: a hold that ended by expiry.
	at(3700 * time.Millisecond)
	acquire(&holder{user: "k1", id: "s2"})
	sweep()
	got = h.Metrics()
	exportertest.Expect(t, got, map[string]float64{
		`slot_holds_ended_total{family="streams",outcome="expired"}`:  1,
		`slot_holds_ended_total{family="streams",outcome="released"}`: 3,
		`slot_acquires_total{family="streams"}`:                       17,
		`slot_members{family="streams",state="expired"}`:              2,
	})
}
