package sweep_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/redisproc"
	"github.com/slotexporter/slot_exporter/internal/redistest"
)

// twoFamilies is the common pair of families over short key names, s:{user}
// and c:<user>: the slot family takes only a braced, non-empty user, so
// that keys without one are skipped as bad_user; the counter family's user
// is whatever the * matched.
func twoFamilies(addr string, maxMembers, perUserSeries int) string {
	return redisproc.Config{
		Addr:     addr,
		Sampling: []string{"interval: 1s", fmt.Sprintf("max_members_per_key: %d", maxMembers)},
		Leaks:    []string{fmt.Sprintf("per_user_series: %d", perUserSeries)},
		Families: shortFamilies(),
	}.YAML()
}

func shortFamilies() []redisproc.Family {
	slots, counters := redisproc.Slots(), redisproc.Counters()
	slots.Match, slots.User = "s:*", `^s:\{([^}]+)\}$`
	counters.Match, counters.User = "c:*", ""
	return []redisproc.Family{slots, counters}
}

// TestBadKeysAreSkippedNotFatal: keys that match a family but cannot be used
// are counted by reason, and the rest of the sweep goes on.
func TestBadKeysAreSkippedNotFatal(t *testing.T) {
	srv := redistest.Start(t)
	rc := srv.Client()
	ctx := context.Background()
	now := time.Now()
	live := float64(now.Add(115 * time.Second).UnixMilli())
	for i := 0; i < 5; i++ {
		rc.ZAdd(ctx, fmt.Sprintf("s:{u%d}", i), redis.Z{Score: live, Member: "a"})
	}
	rc.Set(ctx, "s:{string}", "not a zset", 0)                    // wrong type
	rc.HSet(ctx, "s:{hash}", "f", "v")                            // wrong type
	rc.ZAdd(ctx, "s:nobraces", redis.Z{Score: live, Member: "a"}) // user regexp does not match
	rc.ZAdd(ctx, "s:{big}", bigMembers(now, 50)...)               // over max_members_per_key
	rc.Set(ctx, "c:{ok}", "2", 0)
	rc.Set(ctx, "c:{abc}", "abc", 0) // garbage
	rc.Set(ctx, "c:{float}", "1.5", 0)
	rc.ZAdd(ctx, "c:{zset}", redis.Z{Score: 1, Member: "x"}) // wrong type for a counter
	// Scores that are not ordinary numbers are still classified, never fatal.
	rc.ZAdd(ctx, "s:{inf}", redis.Z{Score: 0, Member: "zero"}, redis.Z{Score: math.Inf(-1), Member: "neg-inf"},
		redis.Z{Score: math.Inf(1), Member: "pos-inf"})
	rc.ZAdd(ctx, "s:{bin}", redis.Z{Score: live, Member: "\x00\xff\xfe binary"},
		redis.Z{Score: live, Member: strings.Repeat("m", 1<<20)})
	rc.ZAdd(ctx, "s:{\xff\xfeuser\"\n}", redis.Z{Score: live, Member: "a"})
	// A user id over 1 KiB: whoever writes a key chooses its user.
	rc.ZAdd(ctx, "s:{"+strings.Repeat("u", 1025)+"}", redis.Z{Score: live, Member: "a"})

	logs := exportertest.NewLogs()
	h := exportertest.New(t, rc, twoFamilies(srv.Addr, 20, 500), logs.Logger())
	h.Sweep()
	got := h.Metrics()
	exportertest.Expect(t, got, map[string]float64{
		`slot_exporter_keys_skipped_total{family="streams",reason="wrong_type"}`: 2,
		`slot_exporter_keys_skipped_total{family="streams",reason="bad_user"}`:   2,
		`slot_exporter_keys_skipped_total{family="streams",reason="oversized"}`:  1,
		`slot_exporter_keys_skipped_total{family="streams",reason="bad_value"}`:  0,
		`slot_exporter_keys_skipped_total{family="legacy",reason="bad_value"}`:   2,
		`slot_exporter_keys_skipped_total{family="legacy",reason="wrong_type"}`:  1,
		`slot_exporter_keys_scanned_total{family="streams"}`:                     13,
		`slot_exporter_keys_scanned_total{family="legacy"}`:                      4,
		// u0..u4, big, inf, bin, the hostile user.
		`slot_sets{family="streams"}`: 9,
		`slot_sets{family="legacy"}`:  1,
		// 5 + 2 (bin) + 1 (hostile) live; big: 30 live, 20 expired by
		// ZCOUNT; inf: zero and -inf expired, +inf future.
		`slot_members{family="streams",state="live"}`:    38,
		`slot_members{family="streams",state="expired"}`: 22,
		`slot_members{family="streams",state="future"}`:  1,
		`slot_users_active{family="legacy"}`:             1,
		`slot_exporter_up`:                               1,
		// Label values stay valid UTF-8, the user stays recognisable.
		`slot_user_used_max{family="streams",user="\\xff\\xfeuser\"\n"}`: 1,
	})
	// Each reason names one of its keys in the log, once.
	for _, c := range []struct{ family, reason, key string }{
		{"streams", "wrong_type", "s:{"}, {"streams", "bad_user", "s:"}, {"streams", "oversized", "s:{big}"},
		{"legacy", "bad_value", "c:{"}, {"legacy", "wrong_type", "c:{zset}"},
	} {
		lines := logs.Lines("key skipped", "family="+c.family, "reason="+c.reason)
		// A name with spaces is quoted: the long one is cut short with
		// a note of its length. SCAN's order says which key is named.
		if len(lines) != 1 || !strings.Contains(lines[0], "key="+c.key) && !strings.Contains(lines[0], `key="`+c.key) {
			t.Errorf("%s %s: %d log lines naming a key, want 1:\n%s", c.family, c.reason, len(lines), logs.String())
		}
	}
	h.Sweep()
	if n := len(logs.Lines("key skipped")); n != 5 {
		t.Errorf("%d key-skipped lines after a second sweep, want the first sweep's 5:\n%s", n, logs.String())
	}
}

// bigMembers returns n members: 60% live, 40% expired.
func bigMembers(now time.Time, n int) []redis.Z {
	zs := make([]redis.Z, n)
	for i := range zs {
		s := now.Add(115 * time.Second)
		if i%5 < 2 {
			s = now.Add(-time.Minute)
		}
		zs[i] = redis.Z{Score: float64(s.UnixMilli()), Member: fmt.Sprintf("m%d", i)}
	}
	return zs
}

// TestSeriesCap: with 10,000 users and per_user_series 50, exactly 50 users
// get series, the anomalous ones first; aggregates still count everyone.
func TestSeriesCap(t *testing.T) {
	srv := redistest.Start(t)
	rc := srv.Client()
	ctx := context.Background()
	now := time.Now()
	live := float64(now.Add(115 * time.Second).UnixMilli())
	pipe := rc.Pipeline()
	for i := 0; i < 10000; i++ {
		pipe.ZAdd(ctx, fmt.Sprintf("s:{u%05d}", i), redis.Z{Score: live, Member: "a"})
	}
	// 20 anomalous users: a future-dated score (µs written as ms), and 10
	// over the limit.
	for i := 0; i < 20; i++ {
		pipe.ZAdd(ctx, fmt.Sprintf("s:{bad%02d}", i), redis.Z{Score: float64(now.UnixMilli()) * 1000, Member: "x"})
	}
	for i := 0; i < 10; i++ {
		k := fmt.Sprintf("s:{over%02d}", i)
		for j := 0; j < 4; j++ {
			pipe.ZAdd(ctx, k, redis.Z{Score: live, Member: fmt.Sprint(j)})
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	h := exportertest.New(t, rc, twoFamilies(srv.Addr, 1000, 50))
	h.Sweep()
	got := h.Metrics()
	users := exportertest.Series(got, "slot_user_used_max")
	if len(users) != 50 {
		t.Fatalf("got %d per-user series, want 50", len(users))
	}
	for i := 0; i < 20; i++ {
		if _, ok := users[fmt.Sprintf(`slot_user_used_max{family="streams",user="bad%02d"}`, i)]; !ok {
			t.Errorf("anomalous user bad%02d was dropped", i)
		}
	}
	for i := 0; i < 10; i++ {
		if v := users[fmt.Sprintf(`slot_user_used_max{family="streams",user="over%02d"}`, i)]; v != 4 {
			t.Errorf("over-limit user over%02d: used_max %v, want 4", i, v)
		}
	}
	exportertest.Expect(t, got, map[string]float64{
		`slot_exporter_user_series_dropped{family="streams"}`: 10030 - 50,
		`slot_users_active{family="streams"}`:                 10030,
		`slot_users_over_limit{family="streams"}`:             10,
		`slot_members{family="streams",state="future"}`:       20,
	})
	if n := len(exportertest.Series(got, "slot_user_floor_seconds")); n != 50 {
		t.Errorf("slot_user_floor_seconds has %d series, want 50", n)
	}
}
