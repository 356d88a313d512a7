package kindtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/redistest"
	"github.com/slotexporter/slot_exporter/recipe/ratelimit"
)

const rateFamily = `
  - name: api_rate
    kind: ratelimit
    match: "t:rl:*"
    limit: 5
    window: 1s
`

// TestRateLimitScenario drives rate counters with known truth:
//   - ok: three hits through the recipe, then silence (its window ends);
//   - fresh: a hit through the recipe before every sweep; its window
//     restarts every other sweep (its value goes down), so its floor never
//     grows;
//   - once: a hit every other sweep, each in a new window: its value stays
//     1, and it restarts because the expiry last seen has passed;
//   - nottl: INCR with no EXPIRE, at 7 (locked out, no TTL);
//   - busy: INCR + PEXPIRE window on every hit, from 4 (never restarts;
//     locked out once it has not restarted for 2 x window);
//   - slow: PEXPIRE on every call without INCR, at 1 (never restarts, below
//     the limit: a growing floor but no anomaly);
//   - unit: PX 1000 s for a 1 s window, from the fourth sweep (beyond the
//     window);
//   - junk (not an integer) and list (a list): skipped.
//
// A second harness over the same keys caps per-user series at 3: the
// anomalies (nottl, busy, unit) win over slow's larger floor.
func TestRateLimitScenario(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rc := srv.Client()
	ctx := context.Background()
	h := exportertest.New(t, rc, config(srv.Addr, "2s", 100, rateFamily))
	hc := exportertest.New(t, rc, config(srv.Addr, "2s", 3, rateFamily))
	lim, err := ratelimit.New(rc, ratelimit.Options{Limit: 5, Window: time.Second})
	exportertest.Must(t, err)
	allow := func(key string) ratelimit.Result {
		t.Helper()
		r, err := lim.Allow(ctx, key)
		exportertest.Must(t, err)
		return r
	}

	s := newSteps(t, rc, h, hc)
	for range 3 {
		allow("t:rl:ok")
	}
	exportertest.Must(t, rc.Set(ctx, "t:rl:nottl", 7, 0).Err())
	exportertest.Must(t, rc.Set(ctx, "t:rl:busy", 4, time.Second).Err())
	exportertest.Must(t, rc.Set(ctx, "t:rl:slow", 1, time.Second).Err())
	exportertest.Must(t, rc.Set(ctx, "t:rl:junk", "abc", 0).Err())
	exportertest.Must(t, rc.RPush(ctx, "t:rl:list", "x").Err())
	allow("t:rl:fresh")
	allow("t:rl:once")
	// The sweep that last saw each window restart.
	restart := map[string]int{"fresh": 0, "once": 0}
	s.sweep()

	m := h.Metrics()
	exportertest.Expect(t, m, map[string]float64{
		`slot_sets{family="api_rate"}`:                                            6,
		`slot_ratelimit_keys_without_ttl{family="api_rate"}`:                      1,
		`slot_ratelimit_keys_ttl_beyond_window{family="api_rate"}`:                0,
		`slot_ratelimit_callers_locked_out{family="api_rate"}`:                    1,
		`slot_users_active{family="api_rate"}`:                                    6,
		`slot_users_at_limit{family="api_rate"}`:                                  1,
		`slot_users_floor_nonzero{family="api_rate"}`:                             0,
		`slot_user_floor_seconds{family="api_rate",user="nottl"}`:                 0,
		`slot_user_used_max{family="api_rate",user="nottl"}`:                      7,
		`slot_user_used_max{family="api_rate",user="ok"}`:                         3,
		`slot_exporter_keys_skipped_total{family="api_rate",reason="bad_value"}`:  1,
		`slot_exporter_keys_skipped_total{family="api_rate",reason="wrong_type"}`: 1,
	})
	// Over the limit is routine for a rate counter: not emitted.
	absent(t, m, `slot_users_over_limit{family="api_rate"}`)

	for i := 1; i <= 5; i++ {
		s.at(time.Duration(i) * 600 * time.Millisecond)
		exportertest.Must(t, rc.Incr(ctx, "t:rl:busy").Err())
		exportertest.Must(t, rc.PExpire(ctx, "t:rl:busy", time.Second).Err())
		exportertest.Must(t, rc.PExpire(ctx, "t:rl:slow", time.Second).Err())
		if i == 3 {
			exportertest.Must(t, rc.Set(ctx, "t:rl:unit", 2, 1000*time.Second).Err())
		}
		// Count 1: this hit found no key, a new window began.
		if allow("t:rl:fresh").Count == 1 {
			restart["fresh"] = i
		}
		if i%2 == 0 {
			if r := allow("t:rl:once"); r.Count != 1 {
				t.Fatalf("once: count %d, want a new window", r.Count)
			}
			restart["once"] = i
		}
		k := s.sweep()
		m = h.Metrics()
		for u, r := range restart {
			name := fmt.Sprintf(`slot_user_floor_seconds{family="api_rate",user=%q}`, u)
			if r == k {
				exportertest.Expect(t, m, map[string]float64{name: 0})
			} else {
				s.age(m, name, r, k)
			}
		}
		if k == 2 {
			// busy has not gone 2 x window without a restart yet.
			exportertest.Expect(t, m, map[string]float64{`slot_ratelimit_callers_locked_out{family="api_rate"}`: 1})
		}
	}
	if restart["fresh"] == 0 {
		t.Fatal("fresh's window never restarted: the recipe's window did not end")
	}

	exportertest.Expect(t, m, map[string]float64{
		`slot_sets{family="api_rate"}`:                                            6, // ok expired, once back
		`slot_ratelimit_keys_without_ttl{family="api_rate"}`:                      1,
		`slot_ratelimit_keys_ttl_beyond_window{family="api_rate"}`:                1,
		`slot_ratelimit_callers_locked_out{family="api_rate"}`:                    2,
		`slot_users_active{family="api_rate"}`:                                    6,
		`slot_users_at_limit{family="api_rate"}`:                                  2,
		`slot_users_floor_nonzero{family="api_rate"}`:                             3, // nottl, busy, slow
		`slot_user_used_max{family="api_rate",user="busy"}`:                       9,
		`slot_user_used_max{family="api_rate",user="slow"}`:                       1,
		`slot_user_used_max{family="api_rate",user="unit"}`:                       2,
		`slot_exporter_user_series_dropped{family="api_rate"}`:                    0,
		`slot_exporter_keys_skipped_total{family="api_rate",reason="bad_value"}`:  6,
		`slot_exporter_keys_skipped_total{family="api_rate",reason="wrong_type"}`: 6,
	})
	for _, u := range []string{"nottl", "busy", "slow"} {
		s.age(m, fmt.Sprintf(`slot_user_floor_seconds{family="api_rate",user=%q}`, u), 0, 5)
	}
	s.age(m, `slot_user_floor_seconds{family="api_rate",user="unit"}`, 3, 5)
	absent(t, m, `slot_users_over_limit{family="api_rate"}`, `slot_user_used_max{family="api_rate",user="ok"}`)

	// Capped at 3: the three users with an anomaly, though slow's floor is
	// older than unit's.
	mc := hc.Metrics()
	sameSet(t, "capped users", users(mc, "slot_user_used_max", "api_rate"), "nottl", "busy", "unit")
	exportertest.Expect(t, mc, map[string]float64{
		`slot_exporter_user_series_dropped{family="api_rate"}`: 3, // slow, fresh, once
		`slot_ratelimit_callers_locked_out{family="api_rate"}`: 2,
	})
	t.Logf("/metrics excerpt:\n%s", excerpt(t, h, "api_rate"))
}
