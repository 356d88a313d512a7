package sweep_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/kind"
	"github.com/slotexporter/slot_exporter/internal/redisproc"
	"github.com/slotexporter/slot_exporter/internal/redisread"
	"github.com/slotexporter/slot_exporter/internal/redistest"
	"github.com/slotexporter/slot_exporter/internal/snapshot"
	"github.com/slotexporter/slot_exporter/internal/track"
)

// TestStateEdgesSameOnBothPaths writes members whose expiries sit at
// every state edge and 1 ms either side (the expired edge at now, the
// stale edge at now + ttl - stale_after, the future edge at now + ttl +
// clock_skew_tolerance) into a real Redis, then reads the same set member
// by member and counted by ZCOUNT as an oversized set, at one fixed Redis
// time, and publishes slot_members{state} for each. Both paths must give
// the same counts, and the counts the state rules give: a score exactly at
// an edge belongs to the state below it (expired at the expired edge, live
// at the stale and the future edge). Zombies are left aside: without
// first-seen times the ZCOUNT path counts them as live, and none is old
// enough here to be one. Before the rebuild the ZCOUNT path called a score
// exactly at the stale edge stale.
func TestStateEdgesSameOnBothPaths(t *testing.T) {
	const (
		ttl   = 120_000 // ms
		stale = 40_000
		skew  = 5_000
	)
	srv := redistest.Start(t)
	rc := srv.Client()
	ctx := context.Background()
	now := time.Now().UnixMilli()
	edges := []int64{now, now + ttl - stale, now + ttl + skew}
	want := map[string]float64{"expired": 2, "stale": 2, "live": 4, "future": 1, "zombie": 0}

	for _, v := range []struct {
		name  string
		extra []string
		score func(expiry int64) float64
	}{
		{"ms", nil, func(e int64) float64 { return float64(e) }},
		{"s", []string{"score_unit: s"}, func(e int64) float64 { return float64(e) / 1000 }},
		{"heartbeat", []string{"score: heartbeat"}, func(e int64) float64 { return float64(e - ttl) }},
		{"heartbeat-s", []string{"score: heartbeat", "score_unit: s"}, func(e int64) float64 { return float64(e-ttl) / 1000 }},
	} {
		t.Run(v.name, func(t *testing.T) {
			key := fmt.Sprintf("s:{%s}", v.name)
			var zs []redis.Z
			for _, e := range edges {
				for d := int64(-1); d <= 1; d++ {
					zs = append(zs, redis.Z{Score: v.score(e + d), Member: fmt.Sprintf("%d%+d", e, d)})
				}
			}
			if err := rc.ZAdd(ctx, key, zs...).Err(); err != nil {
				t.Fatal(err)
			}
			rc.PExpire(ctx, key, 2*ttl*time.Millisecond)
			perMember := edgeCounts(t, rc, key, now, 1000, v.extra, false)
			counted := edgeCounts(t, rc, key, now, 1, v.extra, true)
			for state, n := range want {
				if perMember[state] != n {
					t.Errorf("member by member: %s = %v, want %v", state, perMember[state], n)
				}
				if state != "zombie" && counted[state] != perMember[state] {
					t.Errorf("ZCOUNT: %s = %v, member by member %v", state, counted[state], perMember[state])
				}
			}
		})
	}
}

// edgeCounts reads key as a slot-set family with the given max_members_per_key
// and extra family lines would at Redis time now, and returns the family's
// slot_members by state.
func edgeCounts(t *testing.T, rc *redis.Client, key string, now int64, maxMembers int, extra []string, oversized bool) map[string]float64 {
	t.Helper()
	f := redisproc.Slots()
	f.Match, f.User, f.Skew = "s:*", `^s:\{([^}]+)\}$`, 5*time.Second
	f.Extra = append([]string{"stale_after: 40s"}, extra...)
	cfg, err := config.Parse([]byte(redisproc.Config{
		Addr:     "127.0.0.1:1",
		Sampling: []string{fmt.Sprintf("max_members_per_key: %d", maxMembers)},
		Families: []redisproc.Family{f},
	}.YAML()))
	if err != nil {
		t.Fatal(err)
	}
	fc := &cfg.Families[0]
	tr, err := kind.New(fc, &cfg.Sampling)
	if err != nil {
		t.Fatal(err)
	}
	sw := &kind.Sweep{Now: now, Floor: track.NewFloorTracker(), Carry: track.Carry{}}
	sw.Floor.Begin()
	plan := &redisread.Plan{Match: fc.Match, ScanCount: 100, Reads: tr.Begin(sw)}
	rd := redisread.NewReader(false)
	defer rd.Close()
	out := make(chan []redisread.KeyRead, 1)
	if err := rd.ReadKeys(context.Background(), rc, plan, []string{key}, out); err != nil {
		t.Fatal(err)
	}
	kr := (<-out)[0]
	if kr.Status != redisread.OK || kr.Oversized != oversized {
		t.Fatalf("read %+v, want status OK and oversized %v", kr, oversized)
	}
	user, _ := fc.UserOf(key)
	tr.Apply(sw, kind.Key{Read: &kr, Hash: xxhash.Sum64String(key), User: user, UserHash: xxhash.Sum64String(user)})
	tr.End(sw, false, false)
	fam := &snapshot.Family{}
	tr.Publish(fam)
	got := map[string]float64{}
	for _, state := range track.StateNames() {
		n, ok := fam.Lookup(snapshot.Members, state)
		if !ok {
			t.Fatalf("no slot_members{state=%q} published", state)
		}
		got[state] = n
	}
	return got
}
