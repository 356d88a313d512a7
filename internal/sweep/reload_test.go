package sweep_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/redisproc"
	"github.com/slotexporter/slot_exporter/internal/redistest"
	"github.com/slotexporter/slot_exporter/internal/sweep"
)

// TestReloadKeepsWhatIsTracked: a sweeper built from a new config with the
// old one as prev carries each family that keeps its name and kind over:
// its counters go on from where they were, and the members it tracked are
// not acquired again nor ended. A family under a new name starts afresh.
func TestReloadKeepsWhatIsTracked(t *testing.T) {
	srv := redistest.Start(t)
	rc := srv.Client()
	ctx := context.Background()
	live := float64(time.Now().Add(115 * time.Second).UnixMilli())
	for i := range 5 {
		rc.ZAdd(ctx, fmt.Sprintf("s:{u%d}", i), redis.Z{Score: live, Member: "a"})
	}
	rc.Set(ctx, "c:{x}", 1, 0)
	old := exportertest.New(t, rc, twoFamilies(srv.Addr, 100, 100))
	old.Sweep()
	rc.ZRem(ctx, "s:{u0}", "a")
	old.Sweep()
	exportertest.Expect(t, old.Metrics(), map[string]float64{
		`slot_acquires_total{family="streams"}`:                       5,
		`slot_holds_ended_total{family="streams",outcome="released"}`: 1,
		// Keys read: with client tracking (the default) the second
		// sweep reads no counter (none was written).
		`slot_exporter_keys_scanned_total{family="legacy"}`: 1,
	})

	rc.ZAdd(ctx, "s:{u9}", redis.Z{Score: live, Member: "a"})
	cfg, err := config.Parse([]byte(twoFamilies(srv.Addr, 100, 100)))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Families[1].Name = "legacy2"
	s, err := sweep.New(ctx, cfg, rc, exportertest.Quiet(), old.Sweeper)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	if err := s.SweepOnce(ctx); err != nil {
		t.Fatal(err)
	}
	got := exportertest.ForSweeper(t, s).Metrics()
	exportertest.Expect(t, got, map[string]float64{
		// 4 carried over, u9 new: one more acquire, nothing ended.
		`slot_acquires_total{family="streams"}`:                       6,
		`slot_members{family="streams",state="live"}`:                 5,
		`slot_holds_ended_total{family="streams",outcome="released"}`: 1,
		`slot_holds_ended_total{family="streams",outcome="lost"}`:     0,
		// Keys read, not keys accounted for: with client tracking the
		// second sweep reads the one key written (u0), the third the one
		// created (u9), with the feed carried over by the reload; the
		// others are advanced from what was held.
		`slot_exporter_keys_scanned_total{family="streams"}`: 5 + 1 + 1,
		// A new name: its own counters from zero.
		`slot_exporter_keys_scanned_total{family="legacy2"}`: 1,
	})
	if _, ok := got[`slot_exporter_keys_scanned_total{family="legacy"}`]; ok {
		t.Error("the family that was renamed away is still exported")
	}
}

// reloadFamilies is one family of each kind that replays its keys, with
// timings far beyond the test's length: the figures are a function of
// what Redis holds, not of when they are read.
func reloadFamilies(addr string, slotLimit int, sampling ...string) string {
	return redisproc.Config{
		Addr:     addr,
		Sampling: append([]string{"window: 1m", "timeout: 2m"}, sampling...),
		Leaks:    []string{"per_user_series: 1000"},
		Families: []redisproc.Family{
			{Name: "slots", Kind: "slotset", Match: "s:*", Limit: slotLimit, TTL: 10 * time.Minute, Heartbeat: time.Minute, MaxHold: time.Hour},
			{Name: "legacy", Kind: "counter", Match: "c:*", Limit: 3},
			{Name: "locks", Kind: "lock", Match: "l:*", TTL: 10 * time.Minute, MaxHold: time.Hour},
			{Name: "queue", Kind: "list", Match: "q:*", Extra: []string{"max_wait: 1h"}},
		},
	}.YAML()
}

// stateSeries keeps the series that are a function of what Redis holds
// now: two exporters with different histories (one reloaded many times
// under writes, one fresh) agree on them at the same Redis state.
// Counters, maxima over the window, floors and ages depend on history.
func stateSeries(m map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		name, _, _ := strings.Cut(k, "{")
		switch name {
		case "slot_sets", "slot_members", "slot_users_active", "slot_users_at_limit", "slot_users_over_limit",
			"slot_sets_without_ttl", "slot_sets_expiring_early", "slot_counters_negative", "slot_queue_items",
			"slot_family_info", "slot_family_limit":
			out[k] = v
		}
	}
	return out
}

// keysScanned is how many keys an exporter has read, every family.
func keysScanned(h *exportertest.Harness) float64 {
	var n float64
	for _, v := range exportertest.Series(h.Metrics(), "slot_exporter_keys_scanned_total") {
		n += v
	}
	return n
}

// sameState compares stateSeries of two exporters' figures.
func sameState(t *testing.T, when string, want, got map[string]float64) {
	t.Helper()
	w, g := stateSeries(want), stateSeries(got)
	if len(w) == 0 {
		t.Fatalf("%s: the full read has no figures", when)
	}
	var keys []string
	for k := range w {
		keys = append(keys, k)
	}
	for k := range g {
		if _, ok := w[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		a, okA := w[k]
		b, okB := g[k]
		switch {
		case !okA:
			t.Errorf("%s: %s = %v, not in a full read", when, k, b)
		case !okB:
			t.Errorf("%s: %s missing (a full read says %v)", when, k, a)
		case a != b:
			t.Errorf("%s: %s = %v, a full read says %v", when, k, b, a)
		}
	}
}

// writer writes keys of every family of reloadFamilies until stop is
// closed, counting its writes.
func writer(ctx context.Context, rc redis.Cmdable, seed int, live int64, stop <-chan struct{}, writes *atomic.Int64) error {
	for i := seed; ; i++ {
		select {
		case <-stop:
			return nil
		default:
		}
		// Removals go to other users than additions: keys of every
		// kind come and go, and some stay.
		u := fmt.Sprintf("{u%02d}", (i/8*7+i%2*3)%40)
		var err error
		switch i % 8 {
		case 0:
			err = rc.ZAdd(ctx, "s:"+u, redis.Z{Score: float64(live), Member: fmt.Sprintf("m%d", i%5)}).Err()
		case 1:
			err = rc.ZRem(ctx, "s:"+u, fmt.Sprintf("m%d", (i/8)%5)).Err()
		case 2:
			err = rc.Incr(ctx, "c:"+u).Err()
		case 3:
			err = rc.Decr(ctx, "c:"+u).Err()
		case 4:
			err = rc.Set(ctx, "l:"+u, fmt.Sprintf("token-%d", i), 10*time.Minute).Err()
		case 5:
			err = rc.Del(ctx, "l:"+u).Err()
		case 6:
			err = rc.RPush(ctx, "q:"+u, fmt.Sprintf("job-%d", i)).Err()
		case 7:
			err = rc.LPop(ctx, "q:"+u).Err()
			if errors.Is(err, redis.Nil) {
				err = nil
			}
		}
		if err != nil {
			return err
		}
		writes.Add(1)
	}
}

// TestReloadsUnderWritesWithTracking reloads a running exporter 40 times
// while writers keep changing keys of every kind, with change tracking on,
// as reload.go does: a new sweeper built with the running one as prev,
// then started. Half the reloads come while a sweep is in flight; the
// others once the new sweeper has completed one, so that its sweeps read
// only what changed on top of what was handed over. Under -race this is
// where a new sweeper taking over the old one's change feed while the old
// one's families still read it was reported. Once the writers pause and
// the exporter has completed a sweep that began after the pause, its
// figures must be a fresh full read's, and a sweep must read fewer keys
// than there are (tracking was on throughout).
func TestReloadsUnderWritesWithTracking(t *testing.T) {
	srv := redistest.Start(t)
	rc := srv.Client()
	ctx := context.Background()
	// Live: the last heartbeat (expiry - ttl) is 30s old.
	live := exportertest.RedisTime(t, rc) + (9*time.Minute + 30*time.Second).Milliseconds()
	yaml := func(i int) string {
		// The slot sets' limit changes from one reload to the next: the
		// figures follow it without reading every key again.
		return reloadFamilies(srv.Addr, 3+i%2, "interval: 20ms", "track_changes: true")
	}
	load := func(i int, prev *sweep.Sweeper) *sweep.Sweeper {
		t.Helper()
		cfg, err := config.Parse([]byte(yaml(i)))
		if err != nil {
			t.Fatal(err)
		}
		s, err := sweep.New(ctx, cfg, rc, exportertest.Quiet(), prev)
		if err != nil {
			t.Fatalf("reload %d: %v", i, err)
		}
		s.Start()
		return s
	}
	// sweptSince: every family has completed a sweep that began after t0.
	sweptSince := func(s *sweep.Sweeper, t0 time.Time) bool {
		for _, f := range s.Snapshot().Families {
			if f.LastSuccess.Add(-f.Duration).Before(t0) {
				return false
			}
		}
		return true
	}

	stop := make(chan struct{})
	var writes atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- writer(ctx, rc, w*1000, live, stop, &writes)
		}()
	}
	pause := sync.OnceFunc(func() { close(stop); wg.Wait() })
	t.Cleanup(pause)

	const reloads = 40
	s := load(0, nil)
	t.Cleanup(func() { s.Stop() })
	for i := 1; i <= reloads; i++ {
		t0 := time.Now()
		if i%2 == 0 {
			exportertest.WaitFor(t, 2*time.Minute, fmt.Sprintf("a sweep after reload %d", i-1), func() bool { return sweptSince(s, t0) })
		}
		s = load(i, s)
	}
	// Writes on top of the last reload, read by change-driven sweeps.
	t0 := time.Now()
	exportertest.WaitFor(t, 2*time.Minute, "a sweep after the last reload", func() bool { return sweptSince(s, t0) })
	w0 := writes.Load()
	exportertest.WaitFor(t, 2*time.Minute, "200 more writes", func() bool { return writes.Load() >= w0+200 })
	pause()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("writer: %v", err)
		}
	}
	paused := time.Now()
	exportertest.WaitFor(t, 2*time.Minute, "a sweep that began after the writers paused", func() bool { return sweptSince(s, paused) })
	h := exportertest.ForSweeper(t, s)
	got := h.Metrics()
	fresh := exportertest.New(t, rc, reloadFamilies(srv.Addr, 3+reloads%2, "interval: 20ms", "track_changes: false"))
	fresh.Sweep()
	want := fresh.Metrics()
	t.Logf("%d writes, %d reloads; %v slot sets, %v locks, %v queue items", writes.Load(), reloads,
		want[`slot_sets{family="slots"}`], want[`slot_sets{family="locks"}`], want[`slot_queue_items{family="queue"}`])
	sameState(t, "after 40 reloads under writes", want, got)

	// Tracking was on: with nothing written, a sweep reads only a slice
	// of the keys (the reconciliation), not all of them. Stepped by hand
	// after one more reload, to count the keys of one sweep: the first
	// may read everything (the reload may have cut a sweep off).
	keys := 0.0
	for k, v := range want {
		if strings.HasPrefix(k, "slot_sets{") {
			keys += v
		}
	}
	cfg, err := config.Parse([]byte(yaml(reloads + 1)))
	if err != nil {
		t.Fatal(err)
	}
	last, err := sweep.New(ctx, cfg, rc, exportertest.Quiet(), s)
	if err != nil {
		t.Fatal(err)
	}
	s = last
	h = exportertest.ForSweeper(t, last)
	for range 2 {
		before := keysScanned(h)
		if err := last.SweepOnce(ctx); err != nil {
			t.Fatal(err)
		}
		if d := keysScanned(h) - before; d < keys {
			return
		}
	}
	t.Errorf("two sweeps with nothing written each read every key (%v): change tracking is not in use", keys)
}

// TestReloadThatChangesWhichKeysOrUsers: a reload that changes a family's
// match after its literal prefix, or only its user, or both, keeps the
// change feed (it tracks the same prefixes) but not what the family held:
// keys that no longer match, users named by the old regexp. The reloaded
// exporter must show what a fresh full read shows, right after the reload
// and on the change-driven sweep after it. A reload that changes only the
// limit needs no full read, and must agree too. Keys have no TTL: nothing
// would ever make them go away by itself.
func TestReloadThatChangesWhichKeysOrUsers(t *testing.T) {
	const team, person = `^[a-z]+:([^:]+):`, `^[a-z]+:[^:]+:([^:]+):`
	type families struct{ match, user string }
	cases := []struct {
		name     string
		from, to families
		limit    int
	}{
		{"match after the prefix", families{"%s:*:b", team}, families{"%s:*:a", team}, 3},
		{"user only", families{"%s:*", team}, families{"%s:*", person}, 3},
		{"match and user", families{"%s:*:b", team}, families{"%s:*:a", person}, 3},
		{"limit only", families{"%s:*:b", team}, families{"%s:*:b", team}, 5},
	}
	srv := redistest.Start(t)
	rc := srv.Client()
	ctx := context.Background()
	// Live: the last heartbeat (expiry - ttl) is 30s old.
	live := exportertest.RedisTime(t, rc) + (9*time.Minute + 30*time.Second).Milliseconds()
	yaml := func(f families, limit int, track string) string {
		return redisproc.Config{
			Addr:     srv.Addr,
			Sampling: []string{"interval: 1s", "window: 1m", "redis_cpu_share: 0", "track_changes: " + track},
			Families: []redisproc.Family{
				{Name: "slots", Kind: "slotset", Match: fmt.Sprintf(f.match, "app"), User: f.user, Limit: limit,
					TTL: 10 * time.Minute, Heartbeat: time.Minute, MaxHold: time.Hour},
				{Name: "legacy", Kind: "counter", Match: fmt.Sprintf(f.match, "cnt"), User: f.user, Limit: 3},
			},
		}.YAML()
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := rc.FlushAll(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			// 12 people in 3 teams; a key ending in :a and one in :b
			// each, with different members and values.
			for i := range 12 {
				k := fmt.Sprintf("t%d:u%02d", i%3, i)
				for m := range 1 + i%3 {
					if err := rc.ZAdd(ctx, "app:"+k+":a", redis.Z{Score: float64(live), Member: fmt.Sprintf("a%d", m)}).Err(); err != nil {
						t.Fatal(err)
					}
				}
				for m := range 2 + i%4 {
					if err := rc.ZAdd(ctx, "app:"+k+":b", redis.Z{Score: float64(live), Member: fmt.Sprintf("b%d", m)}).Err(); err != nil {
						t.Fatal(err)
					}
				}
				if err := rc.Set(ctx, "cnt:"+k+":a", i%5, 0).Err(); err != nil {
					t.Fatal(err)
				}
				if err := rc.Set(ctx, "cnt:"+k+":b", i%4-1, 0).Err(); err != nil {
					t.Fatal(err)
				}
			}
			before := exportertest.New(t, rc, yaml(c.from, 3, "true"))
			before.Sweep()
			before.Sweep() // in sync: this one read only what changed
			// A write between the last sweep and the reload, to keys of
			// both patterns: the feed names them to the reloaded family.
			if err := rc.ZAdd(ctx, "app:t0:u00:a", redis.Z{Score: float64(live), Member: "late"}).Err(); err != nil {
				t.Fatal(err)
			}
			if err := rc.Incr(ctx, "cnt:t1:u01:b").Err(); err != nil {
				t.Fatal(err)
			}
			cfg, err := config.Parse([]byte(yaml(c.to, c.limit, "true")))
			if err != nil {
				t.Fatal(err)
			}
			s, err := sweep.New(ctx, cfg, rc, exportertest.Quiet(), before.Sweeper)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(s.Stop)
			after := exportertest.ForSweeper(t, s)
			fresh := exportertest.New(t, rc, yaml(c.to, c.limit, "false"))
			for i, when := range []string{"the sweep after the reload", "the change-driven sweep after that"} {
				read := keysScanned(after)
				after.Sweep()
				read = keysScanned(after) - read
				fresh.Sweep()
				want := fresh.Metrics()
				sameState(t, when, want, after.Metrics())
				keys := want[`slot_sets{family="slots"}`] + want[`slot_sets{family="legacy"}`]
				switch {
				case i == 0 && c.from != c.to && read != keys:
					t.Errorf("%s read %v keys, want every key (%v): the family's keys or users changed", when, read, keys)
				case (i == 1 || c.from == c.to) && read >= keys:
					t.Errorf("%s read %v keys of %v: only what changed was due", when, read, keys)
				}
			}
		})
	}
}

// TestReloadRenamesUsers: a user is known by its canonical key's hash, so
// a reload from `app:*` (the user of `app:{u1}` is "{u1}") to the braces
// regexp (the same key, the same canonical key, the user "u1") keeps the
// user's record under another name: the per-user series must carry the
// new names, as a fresh exporter's do, from the sweep after the reload.
func TestReloadRenamesUsers(t *testing.T) {
	srv := redistest.Start(t)
	rc := srv.Client()
	ctx := context.Background()
	live := exportertest.RedisTime(t, rc) + (9*time.Minute + 30*time.Second).Milliseconds()
	for i := range 3 {
		for m := range 1 + i {
			exportertest.Must(t, rc.ZAdd(ctx, fmt.Sprintf("app:{u%d}", i), redis.Z{Score: float64(live), Member: fmt.Sprint(m)}).Err())
		}
	}
	yaml := func(user string) string {
		return redisproc.Config{
			Addr:     srv.Addr,
			Sampling: []string{"interval: 1s", "window: 1m", "redis_cpu_share: 0"},
			Families: []redisproc.Family{{Name: "slots", Kind: "slotset", Match: "app:*", User: user, Limit: 3,
				TTL: 10 * time.Minute, Heartbeat: time.Minute, MaxHold: time.Hour}},
		}.YAML()
	}
	const braces = `^app:\{?([^}]+)\}?$`
	before := exportertest.New(t, rc, yaml(""))
	before.Sweep()
	before.Sweep()
	if got := exportertest.Series(before.Metrics(), "slot_user_used_max"); got[`slot_user_used_max{family="slots",user="{u2}"}`] != 3 {
		t.Fatalf("before the reload: %v", got)
	}
	cfg, err := config.Parse([]byte(yaml(braces)))
	exportertest.Must(t, err)
	s, err := sweep.New(ctx, cfg, rc, exportertest.Quiet(), before.Sweeper)
	exportertest.Must(t, err)
	t.Cleanup(s.Stop)
	after := exportertest.ForSweeper(t, s)
	fresh := exportertest.New(t, rc, yaml(braces))
	for _, when := range []string{"the sweep after the reload", "the change-driven sweep after that"} {
		after.Sweep()
		fresh.Sweep()
		want, got := exportertest.Series(fresh.Metrics(), "slot_user_used_max"), exportertest.Series(after.Metrics(), "slot_user_used_max")
		if len(want) != 3 || !maps.Equal(want, got) {
			t.Errorf("%s: per-user series %v, a fresh exporter's %v", when, got, want)
		}
	}
}

// TestReloadThatNarrowsTheMatch: holds of keys a reloaded match leaves out
// left the watch: they end neither released nor expired nor lost, and
// the holds still watched go on.
func TestReloadThatNarrowsTheMatch(t *testing.T) {
	srv := redistest.Start(t)
	rc := srv.Client()
	ctx := context.Background()
	live := exportertest.RedisTime(t, rc) + (9*time.Minute + 30*time.Second).Milliseconds()
	for _, k := range []string{"app:a:{u1}", "app:a:{u2}", "app:b:{u3}"} {
		exportertest.Must(t, rc.ZAdd(ctx, k, redis.Z{Score: float64(live), Member: "m"}).Err())
	}
	yaml := func(match string) string {
		return redisproc.Config{
			Addr:     srv.Addr,
			Sampling: []string{"interval: 1s", "window: 1m", "redis_cpu_share: 0"},
			Families: []redisproc.Family{{Name: "slots", Kind: "slotset", Match: match, User: `\{([^}]+)\}$`, Limit: 3,
				TTL: 10 * time.Minute, Heartbeat: time.Minute, MaxHold: time.Hour}},
		}.YAML()
	}
	before := exportertest.New(t, rc, yaml("app:*"))
	before.Sweep()
	cfg, err := config.Parse([]byte(yaml("app:a:*")))
	exportertest.Must(t, err)
	s, err := sweep.New(ctx, cfg, rc, exportertest.Quiet(), before.Sweeper)
	exportertest.Must(t, err)
	t.Cleanup(s.Stop)
	after := exportertest.ForSweeper(t, s)
	after.Sweep()
	after.Sweep()
	exportertest.Expect(t, after.Metrics(), map[string]float64{
		`slot_members{family="slots",state="live"}`:                 2,
		`slot_acquires_total{family="slots"}`:                       3,
		`slot_holds_ended_total{family="slots",outcome="released"}`: 0,
		`slot_holds_ended_total{family="slots",outcome="expired"}`:  0,
		`slot_holds_ended_total{family="slots",outcome="lost"}`:     0,
	})
	// A hold released after that is a release again.
	exportertest.Must(t, rc.Del(ctx, "app:a:{u1}").Err())
	after.Sweep()
	exportertest.Expect(t, after.Metrics(), map[string]float64{
		`slot_holds_ended_total{family="slots",outcome="released"}`: 1,
	})
}
