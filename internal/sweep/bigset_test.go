package sweep_test

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/redisproc"
	"github.com/slotexporter/slot_exporter/internal/redistest"
)

// TestMillionMemberSet: one slot set with 1,000,000 members, far over
// max_members_per_key. Its states are counted exactly by ZCOUNT, it is
// reported as oversized, and sweeping it does not pull its members into
// the exporter: memory stays bounded sweep after sweep.
func TestMillionMemberSet(t *testing.T) {
	const (
		members = 1_000_000
		chunk   = 10_000
	)
	srv := redistest.Start(t)
	rc := srv.Client()
	ctx := context.Background()
	now := time.Now()
	// Scores sit far from the state boundaries (ttl 1h, stale_after
	// 20m, skew 5s), so the exact counts hold whenever the sweep runs:
	// loading a million members took 51s on a loaded machine, past the
	// 35s a live member had with ttl 120s.
	scores := [10]float64{}
	for i := range scores {
		switch i {
		case 0, 1:
			scores[i] = float64(now.Add(-time.Minute).UnixMilli()) // expired
		case 2:
			scores[i] = float64(now.Add(30 * time.Minute).UnixMilli()) // stale: last heartbeat 30m ago
		case 3:
			scores[i] = float64(now.UnixMilli()) * 1000 // future: µs written as ms
		default:
			scores[i] = float64(now.Add(59 * time.Minute).UnixMilli()) // live: last heartbeat 1m ago
		}
	}
	start := time.Now()
	pipe := rc.Pipeline()
	zs := make([]redis.Z, chunk)
	for base := 0; base < members; base += chunk {
		for j := range zs {
			i := base + j
			zs[j] = redis.Z{Score: scores[i%10], Member: strconv.Itoa(i)}
		}
		pipe.ZAdd(ctx, "s:{big}", zs...)
		if pipe.Len() == 10 {
			if _, err := pipe.Exec(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	rc.PExpire(ctx, "s:{big}", 2*time.Hour)
	rc.ZAdd(ctx, "s:{small}", redis.Z{Score: scores[5], Member: "a"})
	if n := rc.ZCard(ctx, "s:{big}").Val(); n != members {
		t.Fatalf("loaded %d members, want %d", n, members)
	}
	t.Logf("loaded %d members in %s", members, time.Since(start).Round(time.Millisecond))

	fams := shortFamilies()
	fams[0].TTL, fams[0].Heartbeat, fams[0].MaxHold = time.Hour, 10*time.Minute, 2*time.Hour
	h := exportertest.New(t, rc, redisproc.Config{
		Addr:     srv.Addr,
		Sampling: []string{"interval: 1s", "max_members_per_key: 1000"},
		Leaks:    []string{"per_user_series: 500"},
		Families: fams,
	}.YAML())
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	const sweeps = 3
	for range sweeps {
		h.Sweep()
	}
	runtime.GC()
	runtime.ReadMemStats(&after)

	got := h.Metrics()
	exportertest.Expect(t, got, map[string]float64{
		`slot_members{family="streams",state="expired"}`:                        200_000,
		`slot_members{family="streams",state="stale"}`:                          100_000,
		`slot_members{family="streams",state="future"}`:                         100_000,
		`slot_members{family="streams",state="live"}`:                           600_000 + 1,
		`slot_members{family="streams",state="zombie"}`:                         0,
		`slot_exporter_keys_skipped_total{family="streams",reason="oversized"}`: sweeps,
		`slot_sets{family="streams"}`:                                           2,
		`slot_users_over_limit{family="streams"}`:                               1,
		// Unexpired members are what acquire would count.
		`slot_user_used_max{family="streams",user="big"}`: 800_000,
		// Members of an oversized set are counted, never tracked.
		`slot_acquires_total{family="streams"}`: 1,
		`slot_exporter_up`:                      1,
	})

	// Reading the set would take well over 50 MB (a million member
	// strings and scores); counting it takes next to nothing.
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d sweeps: heap grew %d KiB, %d KiB allocated", sweeps, grown/1024, allocated/1024)
	if grown > 20<<20 {
		t.Errorf("heap grew %d MiB across %d sweeps of one oversized set", grown>>20, sweeps)
	}
	if allocated > sweeps*20<<20 {
		t.Errorf("%d sweeps allocated %d MiB: the oversized set's members were read", sweeps, allocated>>20)
	}
}

// TestBadDataEdges covers what TestBadKeysAreSkippedNotFatal does not:
// the oversized boundary, an empty user, counters that overflow or are
// empty, and two user ids that differ only in how a byte is spelt, which
// must stay two distinct, valid label values.
func TestBadDataEdges(t *testing.T) {
	srv := redistest.Start(t)
	rc := srv.Client()
	ctx := context.Background()
	live := float64(time.Now().Add(115 * time.Second).UnixMilli())
	set := func(key string, n int) {
		zs := make([]redis.Z, n)
		for i := range zs {
			zs[i] = redis.Z{Score: live, Member: strconv.Itoa(i)}
		}
		rc.ZAdd(ctx, key, zs...)
	}
	set("s:{exact}", 20) // at max_members_per_key: read member by member
	set("s:{over}", 21)  // one past it: counted
	set("s:{}", 1)       // empty user
	rc.Set(ctx, "c:overflow", "99999999999999999999", 0)
	rc.Set(ctx, "c:empty", "", 0)
	rc.Set(ctx, "c:a\xffb", 1, 0) // an invalid byte
	rc.Set(ctx, `c:a\xffb`, 2, 0) // the same, spelt out
	h := exportertest.New(t, rc, twoFamilies(srv.Addr, 20, 500))
	h.Sweep()
	got := h.Metrics()
	exportertest.Expect(t, got, map[string]float64{
		`slot_exporter_keys_skipped_total{family="streams",reason="oversized"}`: 1,
		`slot_exporter_keys_skipped_total{family="streams",reason="bad_user"}`:  1,
		`slot_exporter_keys_skipped_total{family="legacy",reason="bad_value"}`:  2,
		`slot_members{family="streams",state="live"}`:                           41,
		`slot_acquires_total{family="streams"}`:                                 20,
		`slot_user_used_max{family="streams",user="exact"}`:                     20,
		`slot_user_used_max{family="streams",user="over"}`:                      21,
		fmt.Sprintf(`slot_user_used_max{family="legacy",user=%q}`, `a\xffb`):    1,
		fmt.Sprintf(`slot_user_used_max{family="legacy",user=%q}`, `a\\xffb`):   2,
		`slot_users_active{family="legacy"}`:                                    2,
		`slot_exporter_up`:                                                      1,
	})
}

// TestOversizedSetExpiringEarly: a set whose key expires before its newest
// live slot is counted as expiring early whether it is read member by
// member or counted as oversized (then from its newest unexpired score).
func TestOversizedSetExpiringEarly(t *testing.T) {
	srv := redistest.Start(t)
	rc := srv.Client()
	ctx := context.Background()
	now := time.Now()
	write := func(key string, n int, keyTTL time.Duration) {
		zs := make([]redis.Z, n)
		for i := range zs {
			// The newest slot is live for another 115s, older ones less.
			zs[i] = redis.Z{Score: float64(now.Add(115*time.Second - time.Duration(i)*time.Second).UnixMilli()), Member: strconv.Itoa(i)}
		}
		rc.ZAdd(ctx, key, zs...)
		rc.PExpire(ctx, key, keyTTL)
	}
	write("s:{small}", 3, 30*time.Second)   // read member by member
	write("s:{big}", 30, 30*time.Second)    // oversized
	write("s:{bigok}", 30, 240*time.Second) // oversized, expires after its slots
	h := exportertest.New(t, rc, twoFamilies(srv.Addr, 20, 500))
	h.Sweep()
	exportertest.Expect(t, h.Metrics(), map[string]float64{
		`slot_sets_expiring_early{family="streams"}`:                            2,
		`slot_exporter_keys_skipped_total{family="streams",reason="oversized"}`: 2,
	})
}
