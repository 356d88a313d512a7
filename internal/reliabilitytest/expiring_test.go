package reliabilitytest

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/redistest"
)

// TestExpiringEarlyAboveMaxMembers: sets above max_members_per_key are
// counted by score range, not read; whether the key expires before its
// newest live slot must still be judged, from that slot's score (ZRANGE
// BYSCORE REV LIMIT 1), exactly as for a set read member by member.
func TestExpiringEarlyAboveMaxMembers(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client()
	now := exportertest.RedisTime(t, admin)
	const big, small = 25, 3 // max_members_per_key: 10

	type set struct {
		user  string
		n     int
		score int64         // every member's score
		extra []int64       // scores of further members
		pttl  time.Duration // 0: no TTL
		early bool          // the key expires before its newest live slot
	}
	// score: expiry (ttl 120s, stale after 40s, skew 5s).
	expiry := []set{
		{"small-early", small, now + 100_000, nil, 10 * time.Second, true},
		{"big-early", big, now + 100_000, nil, 10 * time.Second, true},
		{"big-ok", big, now + 100_000, nil, 200 * time.Second, false},
		// Expires with its newest slot, within the skew: healthy.
		{"big-together", big, now + 100_000, nil, 98 * time.Second, false},
		// Only expired members: nothing live to lose.
		{"big-all-expired", big, now - 10_000, nil, 10 * time.Second, false},
		// A member 1h ahead (a unit bug) is no live slot: the newest
		// live one expires in 100 s, before the key's 150 s.
		{"big-future", big, now + 100_000, []int64{now + 3_600_000}, 150 * time.Second, false},
		// Stale slots (no heartbeat for 90 s) still hold until they expire.
		{"big-stale-early", big, now + 30_000, nil, 5 * time.Second, true},
		{"big-no-ttl", big, now + 100_000, nil, 0, false},
	}
	// score: heartbeat: the score is the last refresh, expiry 120 s later.
	heartbeat := []set{
		{"hb-big-early", big, now - 1000, nil, 30 * time.Second, true},
		{"hb-big-ok", big, now - 1000, nil, 240 * time.Second, false},
	}
	write := func(prefix string, sets []set) (early int) {
		for _, s := range sets {
			k := fmt.Sprintf("%s:{%s}", prefix, s.user)
			for i := range s.n {
				exportertest.Must(t, admin.ZAdd(ctx, k, redis.Z{Score: float64(s.score), Member: fmt.Sprintf("m%d", i)}).Err())
			}
			for i, sc := range s.extra {
				exportertest.Must(t, admin.ZAdd(ctx, k, redis.Z{Score: float64(sc), Member: fmt.Sprintf("x%d", i)}).Err())
			}
			if s.pttl > 0 {
				exportertest.Must(t, admin.PExpire(ctx, k, s.pttl).Err())
			}
			if s.early {
				early++
			}
		}
		return early
	}
	wantExpiry, wantHB := write("t:streams", expiry), write("t:hb", heartbeat)

	e := newExporter(t, configYAML(addrBlock(srv.Addr), quickSampling+"  max_members_per_key: 10\n", streamsFamily+`
  - name: hb
    kind: slotset
    score: heartbeat
    match: "t:hb:*"
    user: '^t:hb:\{([^}]+)\}$'
    limit: 50
    ttl: 120s
    heartbeat_interval: 20s
    max_hold: 15m
`))
	e.sweep()
	exportertest.Expect(t, e.metrics(), map[string]float64{
		`slot_sets_expiring_early{family="streams"}`:                            float64(wantExpiry),
		`slot_sets_expiring_early{family="hb"}`:                                 float64(wantHB),
		`slot_sets_without_ttl{family="streams"}`:                               1,
		`slot_exporter_keys_skipped_total{family="streams",reason="oversized"}`: float64(len(expiry) - 1),
		`slot_exporter_keys_skipped_total{family="hb",reason="oversized"}`:      float64(len(heartbeat)),
		`slot_sets{family="streams"}`:                                           float64(len(expiry)),
	})
}
