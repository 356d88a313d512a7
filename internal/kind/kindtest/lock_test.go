package kindtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/redistest"
	"github.com/slotexporter/slot_exporter/recipe/ownerlock"
)

const lockFamily = `
  - name: jobs_lock
    kind: lock
    match: "t:lock:*"
    ttl: 2s
    max_hold: 3s
    clock_skew_tolerance: 500ms
`

// TestLockScenario drives owner locks with known truth, a sweep every
// 0.6 s (sweep i at 0.6 i s):
//   - rel: acquired through the recipe, released (token-checked) before
//     sweep 2: released;
//   - crash: SET NX PX 1000, its holder killed: its lease runs out between
//     sweeps 1 and 2: expired;
//   - nottl: SET NX without PX: without TTL, and a zombie once held past
//     max_hold;
//   - zomb: acquired through the recipe and extended before every sweep,
//     for ever: a heartbeat per sweep, a zombie past max_hold;
//   - take: token A (PX 2000), taken over by token B at sweep 1 (A
//     released), B then left to run out (expired between sweeps 4 and 5);
//   - long: acquired at sweep 2 and extended since: live, an old floor;
//   - fut: PX 2000000 (seconds given to PX) at sweep 5: future;
//   - ok: acquired at sweep 6: live;
//   - h: a hash: wrong_type.
//
// Then FLUSHALL: every lock still held is lost.
func TestLockScenario(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rc := srv.Client()
	ctx := context.Background()
	h := exportertest.New(t, rc, config(srv.Addr, "2s", 100, lockFamily))
	hc := exportertest.New(t, rc, config(srv.Addr, "2s", 3, lockFamily))
	lk, err := ownerlock.New(rc, ownerlock.Options{TTL: 2 * time.Second})
	exportertest.Must(t, err)
	acquire := func(key string) string {
		t.Helper()
		tok, ok, err := lk.Acquire(ctx, key)
		if err != nil || !ok {
			t.Fatalf("acquire %s: %v %v", key, ok, err)
		}
		return tok
	}
	extend := func(key, tok string) {
		t.Helper()
		if ok, err := lk.Extend(ctx, key, tok); err != nil || !ok {
			t.Fatalf("extend %s: %v %v", key, ok, err)
		}
	}
	setNX := func(key, tok string, px time.Duration) {
		t.Helper()
		a := redis.SetArgs{Mode: "NX"}
		if px > 0 {
			a.TTL = px
		}
		exportertest.Must(t, rc.SetArgs(ctx, key, tok, a).Err())
	}
	const f = `{family="jobs_lock"}`
	metric := func(name string, labels ...string) string {
		if len(labels) == 0 {
			return name + f
		}
		return fmt.Sprintf(`%s{family="jobs_lock",%s}`, name, labels[0])
	}
	state := func(s string) string { return metric("slot_members", fmt.Sprintf("state=%q", s)) }
	outcome := func(o string) string { return metric("slot_holds_ended_total", fmt.Sprintf("outcome=%q", o)) }
	floor := func(u string) string { return metric("slot_user_floor_seconds", fmt.Sprintf("user=%q", u)) }

	s := newSteps(t, rc, h, hc)
	relTok := acquire("t:lock:rel")
	setNX("t:lock:crash", "c1", time.Second)
	setNX("t:lock:nottl", "n1", 0)
	zTok := acquire("t:lock:zomb")
	setNX("t:lock:take", "A", 2*time.Second)
	exportertest.Must(t, rc.HSet(ctx, "t:lock:h", "f", "v").Err())
	s.sweep()
	exportertest.Expect(t, h.Metrics(), map[string]float64{
		state("live"): 5, state("zombie"): 0, state("future"): 0, state("stale"): 0, state("expired"): 0,
		metric("slot_sets_without_ttl"):                                   1,
		metric("slot_acquires_total"):                                     5,
		metric("slot_heartbeats_total"):                                   0,
		outcome("released"):                                               0,
		metric("slot_users_active"):                                       5,
		metric("slot_exporter_keys_skipped_total", `reason="wrong_type"`): 1,
	})

	var lTok string
	for i := 1; i <= 6; i++ {
		s.at(time.Duration(i) * 600 * time.Millisecond)
		extend("t:lock:zomb", zTok)
		switch i {
		case 1:
			exportertest.Must(t, rc.Del(ctx, "t:lock:take").Err())
			setNX("t:lock:take", "B", 2*time.Second)
		case 2:
			if ok, err := lk.Release(ctx, "t:lock:rel", relTok); err != nil || !ok {
				t.Fatalf("release: %v %v", ok, err)
			}
			lTok = acquire("t:lock:long")
		case 5:
			setNX("t:lock:fut", "f1", 2000*time.Second)
		case 6:
			acquire("t:lock:ok")
		}
		if i >= 3 {
			extend("t:lock:long", lTok)
		}
		k := s.sweep()
		m := h.Metrics()
		switch k {
		case 1:
			exportertest.Expect(t, m, map[string]float64{
				state("live"):                              5, // rel, crash, nottl, zomb, take (B)
				metric("slot_acquires_total"):              6,
				metric("slot_heartbeats_total"):            1,
				outcome("released"):                        1, // A, taken over
				outcome("expired"):                         0,
				metric("slot_hold_duration_seconds_count"): 1,
				metric("slot_hold_duration_seconds_sum"):   0, // A: seen in one sweep
			})
		case 2:
			exportertest.Expect(t, m, map[string]float64{
				state("live"):       4, // nottl, zomb, take, long
				outcome("released"): 2, // + rel
				outcome("expired"):  1, // crash
			})
		}
	}

	m := h.Metrics()
	exportertest.Expect(t, m, map[string]float64{
		state("live"): 2, state("zombie"): 2, state("future"): 1, state("stale"): 0, state("expired"): 0,
		metric("slot_sets"):                                               5,
		metric("slot_sets_without_ttl"):                                   1,
		metric("slot_acquires_total"):                                     9,
		metric("slot_heartbeats_total"):                                   10, // zomb 6, long 4
		outcome("released"):                                               2,
		outcome("expired"):                                                2, // crash, B
		outcome("lost"):                                                   0,
		metric("slot_hold_duration_seconds_count"):                        4,
		metric("slot_users_active"):                                       5,
		metric("slot_users_floor_nonzero"):                                3, // nottl, zomb, long
		metric("slot_user_floor_seconds", `user="ok"`):                    0,
		metric("slot_exporter_user_series_dropped"):                       0,
		metric("slot_exporter_keys_skipped_total", `reason="wrong_type"`): 7,
	})
	// Ended holds: A 0, rel and crash sweeps 0 to 1, B sweeps 1 to 4.
	lo := float64(2*(s.before[1]-s.after[0])+s.before[4]-s.after[1]) / 1000
	hi := float64(2*(s.after[1]-s.before[0])+s.after[4]-s.before[1]) / 1000
	s.within(m, metric("slot_hold_duration_seconds_sum"), lo, hi)
	s.age(m, floor("nottl"), 0, 6)
	s.age(m, floor("zomb"), 0, 6)
	s.age(m, floor("long"), 2, 6)
	s.age(m, floor("fut"), 5, 6)

	// Capped at 3: the anomalies (nottl: no TTL and zombie; zomb; fut),
	// though long's floor is older than fut's.
	mc := hc.Metrics()
	sameSet(t, "capped users", users(mc, "slot_user_used_max", "jobs_lock"), "nottl", "zomb", "fut")
	exportertest.Expect(t, mc, map[string]float64{metric("slot_exporter_user_series_dropped"): 2})
	t.Logf("/metrics excerpt:\n%s", excerpt(t, h, "jobs_lock"))

	// A FLUSHDB of another database, and a lock released beside it: the
	// locks read again show that the flush was not of theirs.
	cache := srv.ClientOf(9)
	exportertest.Must(t, cache.Set(ctx, "page:/", "<html>", 0).Err())
	exportertest.Must(t, rc.Del(ctx, "t:lock:ok").Err())
	exportertest.Must(t, cache.FlushDB(ctx).Err())
	s.sweep()
	exportertest.Expect(t, h.Metrics(), map[string]float64{outcome("released"): 3, outcome("lost"): 0})

	// The data vanishes: the four locks still held end as lost.
	exportertest.Must(t, rc.FlushAll(ctx).Err())
	s.sweep()
	exportertest.Expect(t, h.Metrics(), map[string]float64{
		state("live"): 0, state("zombie"): 0, state("future"): 0,
		metric("slot_sets_without_ttl"):            0,
		outcome("released"):                        3,
		outcome("expired"):                         2,
		outcome("lost"):                            4,
		metric("slot_hold_duration_seconds_count"): 9,
		metric("slot_users_active"):                0,
	})
}
