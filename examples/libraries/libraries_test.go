// Package libraries_test drives the semaphores, locks and rate limiters
// people already run (the real npm packages, and the "Redis in Action"
// semaphore in Go) against a real redis-server, runs the slot_exporter
// binary on the example config of each library, and checks the exporter's
// figures against what the test made the library do.
package libraries_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/redistest"
)

// Library time in these tests: a 3 s ttl, so a holder's death shows in
// seconds. The refresh is each library's own default for that ttl.
const (
	ttl   = 3 * time.Second
	ttlMs = "3000"
)

// ---- redis-semaphore: Semaphore -------------------------------------------

var semaphoreOverrides = overrides{
	"redis_semaphore": {"ttl": "3s", "heartbeat_interval": "2400ms", "stale_after": "2900ms", "max_hold": "9s", "limit": 3},
	"redis_mutex":     {"ttl": "3s", "max_hold": "5s"},
}

func TestRedisSemaphore(t *testing.T) {
	t.Parallel()
	binaries(t) // built before any holder's clock starts
	drive := nodeDriver(t)
	t.Run("healthy, killed and zombie holders", func(t *testing.T) {
		t.Parallel()
		testSemaphoreHolders(t, drive)
	})
	t.Run("skewed client clocks", func(t *testing.T) {
		t.Parallel()
		testSemaphoreSkew(t, drive)
	})
}

func semaphoreHolder(t *testing.T, drive []string, addr, key, role string, holders int, extra ...string) *holder {
	argv := append(append([]string{}, drive...), "semaphore", "--redis", addr, "--key", key, "--limit", "3",
		"--holders", itoa(holders), "--ttl", ttlMs, "--role", role)
	return startHolder(t, key+"/"+role, append(argv, extra...)...)
}

// checkSemaphoreLayout reads what redis-semaphore wrote: the key, the
// members, the score as the client's time in ms, and the key's PEXPIRE to
// lockTimeout from the same script (it expires with its newest member).
func checkSemaphoreLayout(t *testing.T, rdb *redis.Client, h *holder, skewMs float64) {
	t.Helper()
	ctx := context.Background()
	key := h.truth.str("key")
	if want := "semaphore:" + h.truth.str("user"); key != want {
		t.Fatalf("key %q, want %q", key, want)
	}
	now := float64(exportertest.RedisTime(t, rdb))
	pttl := rdb.PTTL(ctx, key).Val()
	members := rdb.ZRangeWithScores(ctx, key, 0, -1).Val()
	newest := math.Inf(-1)
	for _, m := range members {
		newest = max(newest, m.Score)
	}
	for _, id := range h.truth.strs("holders") {
		score, err := rdb.ZScore(ctx, key, id).Result()
		if err != nil {
			t.Fatalf("%s: holder %s not in the set: %v (members %v)", key, id, err, members)
		}
		// The score is Date.now() at acquire or refresh: within one
		// refresh interval before now, shifted by the client's skew.
		if age := now + skewMs - score; age < -50 || age > 2400+250 {
			t.Fatalf("%s: score %.0f is %.0f ms before Redis TIME%+.0f ms; want the acquire/refresh time in ms", key, score, age, skewMs)
		}
	}
	if pttl <= 0 || pttl > ttl {
		t.Fatalf("%s: PTTL %v, want within (0, %v]", key, pttl, ttl)
	}
	// Key expiry minus the newest member's expiry, both on Redis's clock.
	gap := now + float64(pttl.Milliseconds()) - (newest - skewMs + float64(ttl.Milliseconds()))
	if math.Abs(gap) > 250 {
		t.Fatalf("%s: the key expires %.0f ms away from its newest member; want together (same script)", key, gap)
	}
	t.Logf("layout %s: %d members, score = client ms, key expires %+.0f ms from its newest member", key, len(members), gap)
}

func testSemaphoreHolders(t *testing.T, drive []string) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	const fam = "redis_semaphore"

	// alice takes all 3 slots and releases; bob dies alone in his set;
	// dave's second holder dies next to a live one; carol's work ends
	// after 500 ms but the library's refresh goes on.
	alice := semaphoreHolder(t, drive, srv.Addr, "alice", "healthy", 3)
	bob := semaphoreHolder(t, drive, srv.Addr, "bob", "killed", 1)
	dave := semaphoreHolder(t, drive, srv.Addr, "dave", "healthy", 1)
	daveDies := semaphoreHolder(t, drive, srv.Addr, "dave", "killed", 1)
	carol := semaphoreHolder(t, drive, srv.Addr, "carol", "zombie", 1, "--work-ms", "500")
	for _, h := range []*holder{alice, bob, dave, carol} {
		checkSemaphoreLayout(t, rdb, h, 0)
	}

	e := startExporter(t, "redis-semaphore.yml", srv.Addr, semaphoreOverrides)
	e.always("healthy redis-semaphore sets are not expiring early", expect(fam, w("slot_sets_expiring_early", 0)))
	e.always("no member dated in the future", expect(fam, w("slot_members", 0, "state", "future")))

	e.waitFor(10*time.Second, "7 live holders of 4 users, alice at her limit", expect(fam,
		w("slot_members", 7, "state", "live"),
		w("slot_members", 0, "state", "stale"),
		w("slot_members", 0, "state", "expired"),
		w("slot_members", 0, "state", "zombie"),
		w("slot_sets", 4),
		w("slot_users_active", 4),
		w("slot_users_at_limit", 1),
		w("slot_acquires_total", 7),
		w("slot_sets_without_ttl", 0),
	))

	alice.release()
	bob.kill()
	daveDies.kill()
	e.waitFor(5*time.Second, "alice's 3 releases", expect(fam,
		w("slot_holds_ended_total", 3, "outcome", "released"),
		w("slot_users_at_limit", 0),
	))

	// dave's dead holder stays stored, expired, until his live holder's
	// next refresh prunes it; bob's set evaporates with his member.
	seenExpired := 0.0
	e.waitFor(10*time.Second, "both killed holders ended as expired", expect(fam,
		w("slot_holds_ended_total", 3, "outcome", "released"),
		w("slot_holds_ended_total", 2, "outcome", "expired"),
		w("slot_members", 0, "state", "expired"),
		w("slot_acquires_total", 7),
	), func(m metrics) {
		seenExpired = max(seenExpired, m.val("slot_members", "family", fam, "state", "expired"))
	})
	if seenExpired != 1 {
		t.Errorf("dave's dead holder: slot_members{state=expired} peaked at %v, want 1 (stored until the next refresh prunes it)", seenExpired)
	}

	dave.release()
	e.waitFor(5*time.Second, "dave's release", expect(fam, w("slot_holds_ended_total", 4, "outcome", "released")))

	carol.wait("work_done", 5*time.Second)
	e.waitFor(12*time.Second, "carol's refresh outlived her work: a zombie", expect(fam,
		w("slot_members", 1, "state", "zombie"),
		w("slot_members", 0, "state", "live"),
		w("slot_users_active", 1),
	))
	carol.release()
	m := e.waitFor(5*time.Second, "every hold ended", expect(fam,
		w("slot_members", 0, "state", "zombie"),
		w("slot_users_active", 0),
		w("slot_acquires_total", 7),
		w("slot_holds_ended_total", 5, "outcome", "released"),
		w("slot_holds_ended_total", 2, "outcome", "expired"),
		w("slot_holds_ended_total", 0, "outcome", "lost"),
		w("slot_hold_duration_seconds_count", 7),
	))
	lo, hi := heartbeatBounds(e, alice, bob, dave, daveDies, carol)
	hb := m.val("slot_heartbeats_total", "family", fam)
	if hb < lo || hb > hi {
		t.Errorf("slot_heartbeats_total = %v, want the refreshes made, between %v and %v (%s)", hb, lo, hi, refreshSummary(e, alice, bob, dave, daveDies, carol))
	}
	t.Logf("heartbeats: %v counted, refreshes bound it to [%v, %v]", hb, lo, hi)
}

func testSemaphoreSkew(t *testing.T, drive []string) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	const fam = "redis_semaphore"
	// ahead: 9 s fast, beyond ttl + clock_skew_tolerance (3 s + 5 s);
	// behind: 2 s slow, so its slot looks expired 1 s after each refresh.
	ahead := semaphoreHolder(t, drive, srv.Addr, "ahead", "skewed +9s", 1, "--skew-ms", "9000")
	behind := semaphoreHolder(t, drive, srv.Addr, "behind", "skewed -2s", 1, "--skew-ms", "-2000")
	checkSemaphoreLayout(t, rdb, ahead, 9000)
	checkSemaphoreLayout(t, rdb, behind, -2000)

	e := startExporter(t, "redis-semaphore.yml", srv.Addr, semaphoreOverrides)
	stop := e.always("a slot that looked expired and was refreshed is neither a new acquire nor an end",
		expect(fam, w("slot_acquires_total", 2), w("slot_holds_ended_total", 0)))
	// The fast client's key expires 3 s after each refresh (Redis's
	// clock) while its score says 12 s: the member is future, and that is
	// the one signal. The set loses no live slot (every refresh renews the
	// PEXPIRE), so it is not counted as expiring early.
	e.waitFor(10*time.Second, "the fast client's slot is future-dated", expect(fam,
		w("slot_members", 1, "state", "future"),
		w("slot_sets_expiring_early", 0),
	))
	seen := map[string]float64{}
	e.waitFor(8*time.Second, "the slow client's live slot shows expired between refreshes", func(m metrics) error {
		if seen["expired"] == 0 {
			return fmt.Errorf("expired not seen yet (seen %v)", seen)
		}
		return nil
	}, func(m metrics) {
		for s, v := range m.states(fam) {
			seen[s] = max(seen[s], v)
		}
	})
	t.Logf("skewed clocks: states seen %v", seen)
	stop()
	ahead.release()
	behind.release()
	m := e.waitFor(5*time.Second, "both released", func(m metrics) error {
		if got := m.val("slot_holds_ended_total", "family", fam); got != 2 {
			return fmt.Errorf("slot_holds_ended_total = %v, want 2", got)
		}
		return nil
	})
	// The fast client's release comes long before its (skewed) expiry;
	// the slow client's counts as expired if its score had already run out.
	if r := m.val("slot_holds_ended_total", "family", fam, "outcome", "released"); r < 1 {
		t.Errorf("released = %v, want at least the fast client's", r)
	}
	t.Logf("skewed clocks: released %v, expired %v", m.val("slot_holds_ended_total", "family", fam, "outcome", "released"),
		m.val("slot_holds_ended_total", "family", fam, "outcome", "expired"))
}

// ---- redis-semaphore: Mutex ---------------------------------------------

func TestRedisSemaphoreMutex(t *testing.T) {
	t.Parallel()
	binaries(t)
	drive := nodeDriver(t)
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	const fam = "redis_mutex"
	mutex := func(key, role string, extra ...string) *holder {
		argv := append(append([]string{}, drive...), "mutex", "--redis", srv.Addr, "--key", key, "--ttl", ttlMs, "--role", role)
		return startHolder(t, key+"/"+role, append(argv, extra...)...)
	}
	healthy := mutex("export", "healthy")
	killed := mutex("billing", "killed")
	zombie := mutex("reindex", "zombie", "--work-ms", "500")
	for _, h := range []*holder{healthy, killed, zombie} {
		key := h.truth.str("key")
		if key != "mutex:"+h.truth.str("user") {
			t.Fatalf("key %q, want mutex:%s", key, h.truth.str("user"))
		}
		if got := rdb.Get(ctx, key).Val(); got != h.truth.strs("holders")[0] {
			t.Fatalf("%s = %q, want the holder's identifier %q", key, got, h.truth.strs("holders")[0])
		}
		if p := rdb.PTTL(ctx, key).Val(); p <= 0 || p > ttl {
			t.Fatalf("%s: PTTL %v, want within (0, %v]", key, p, ttl)
		}
	}

	e := startExporter(t, "redis-semaphore.yml", srv.Addr, semaphoreOverrides)
	e.always("no lease longer than ttl", expect(fam, w("slot_members", 0, "state", "future")))
	e.waitFor(10*time.Second, "3 mutexes held", expect(fam,
		w("slot_members", 3, "state", "live"),
		w("slot_users_active", 3),
		w("slot_acquires_total", 3),
		w("slot_sets_without_ttl", 0),
	))
	healthy.release()
	killed.kill()
	e.waitFor(8*time.Second, "one released, the killed holder's lease ran out", expect(fam,
		w("slot_holds_ended_total", 1, "outcome", "released"),
		w("slot_holds_ended_total", 1, "outcome", "expired"),
		w("slot_users_active", 1),
	))
	zombie.wait("work_done", 5*time.Second)
	e.waitFor(10*time.Second, "a refreshed mutex past max_hold is a zombie", expect(fam,
		w("slot_members", 1, "state", "zombie"),
		w("slot_members", 0, "state", "live"),
	))
	zombie.release()
	e.waitFor(5*time.Second, "all ended", expect(fam,
		w("slot_members", 0, "state", "zombie"),
		w("slot_users_active", 0),
		w("slot_acquires_total", 3),
		w("slot_holds_ended_total", 2, "outcome", "released"),
		w("slot_holds_ended_total", 1, "outcome", "expired"),
	))
}

// ---- redlock ---------------------------------------------------------------

func TestRedlock(t *testing.T) {
	t.Parallel()
	binaries(t)
	drive := nodeDriver(t)
	// Redlock across three servers: one key per server, one exporter per
	// server, as docs/libraries.md says to run it.
	var servers []*redistest.Server
	addrs := ""
	for i := range 3 {
		s := redistest.Start(t)
		servers = append(servers, s)
		if i > 0 {
			addrs += ","
		}
		addrs += s.Addr
	}
	const fam = "redlock"
	lock := func(res, role string, extra ...string) *holder {
		argv := append(append([]string{}, drive...), "redlock", "--redis", addrs, "--key", res, "--ttl", ttlMs, "--role", role)
		return startHolder(t, res+"/"+role, append(argv, extra...)...)
	}
	healthy := lock("locks:invoice:1", "healthy")
	killed := lock("locks:invoice:2", "killed")
	zombie := lock("locks:reindex", "zombie", "--work-ms", "500")
	token := regexp.MustCompile(`^[0-9a-f]{32}$`)
	for _, h := range []*holder{healthy, killed, zombie} {
		key, val := h.truth.str("key"), h.truth.strs("holders")[0]
		if !token.MatchString(val) {
			t.Fatalf("%s: value %q, want 16 random bytes in hex", key, val)
		}
		for _, s := range servers {
			c := s.Client()
			if got := c.Get(context.Background(), key).Val(); got != val {
				t.Fatalf("%s on %s = %q, want %q on every server", key, s.Addr, got, val)
			}
			if p := c.PTTL(context.Background(), key).Val(); p <= 0 || p > ttl {
				t.Fatalf("%s on %s: PTTL %v, want within (0, %v]", key, s.Addr, p, ttl)
			}
		}
	}

	ov := overrides{fam: {"ttl": "3s", "max_hold": "5s"}}
	var exps []*exporter
	for _, s := range servers {
		exps = append(exps, startExporter(t, "redlock.yml", s.Addr, ov))
	}
	each := func(timeout time.Duration, what string, cond func(metrics) error) {
		t.Helper()
		for i, e := range exps {
			e.waitFor(timeout, fmt.Sprintf("server %d: %s", i+1, what), cond)
		}
	}
	each(10*time.Second, "3 locks held", expect(fam,
		w("slot_members", 3, "state", "live"),
		w("slot_users_active", 3),
		w("slot_acquires_total", 3),
		w("slot_sets_without_ttl", 0),
	))
	healthy.release()
	killed.kill()
	each(8*time.Second, "unlocked, and the killed holder's lease ran out", expect(fam,
		w("slot_holds_ended_total", 1, "outcome", "released"),
		w("slot_holds_ended_total", 1, "outcome", "expired"),
		w("slot_users_active", 1),
	))
	zombie.wait("work_done", 5*time.Second)
	each(10*time.Second, "an extended lock past max_hold is a zombie", expect(fam,
		w("slot_members", 1, "state", "zombie"),
	))
	zombie.release()
	each(5*time.Second, "all ended", expect(fam,
		w("slot_users_active", 0),
		w("slot_acquires_total", 3),
		w("slot_holds_ended_total", 2, "outcome", "released"),
		w("slot_holds_ended_total", 1, "outcome", "expired"),
		w("slot_holds_ended_total", 0, "outcome", "lost"),
	))
}

// ---- rate-limiter-flexible -----------------------------------------------

func TestRateLimiterFlexible(t *testing.T) {
	t.Parallel()
	binaries(t)
	drive := nodeDriver(t)
	srv := redistest.Start(t)
	const points, duration, block = 5, 4, 20
	rl := func(key string, args ...string) event {
		t.Helper()
		ev := rlTry(t, drive, srv.Addr, key, points, duration, args...)
		if ev == nil {
			t.FailNow()
		}
		return ev
	}
	type want struct {
		value       int
		pttlMin     int // ms; -1: no TTL
		pttlMax     int
		prefix      string
		description string
	}
	check := func(ev event, wt want) {
		t.Helper()
		if ev.str("key") != wt.prefix+":"+ev.str("user") {
			t.Fatalf("%s: key %q, want %s:%s", wt.description, ev.str("key"), wt.prefix, ev.str("user"))
		}
		if int(ev.num("value")) != wt.value {
			t.Fatalf("%s: value %v, want %d (%v)", wt.description, ev["value"], wt.value, ev)
		}
		if p := int(ev.num("pttl_ms")); p < wt.pttlMin || p > wt.pttlMax {
			t.Fatalf("%s: PTTL %d ms, want within [%d, %d]", wt.description, p, wt.pttlMin, wt.pttlMax)
		}
	}
	e := startExporter(t, "rate-limiter-flexible.yml", srv.Addr, overrides{
		"api_rate":       {"limit": points, "window": itoa(duration) + "s"},
		"login_rate":     {"limit": points, "window": itoa(block) + "s"},
		"lifetime_quota": {"limit": points},
	})
	check(rl("blocked", "--consume", "8", "--block-duration", itoa(block), "--key-prefix", "login"),
		want{8, block*1000 - 1000, block * 1000, "login", "blockDuration re-SETs the key with EX blockDuration, under its own prefix"})
	check(rl("partial", "--consume", "3", "--duration", "0", "--key-prefix", "quota"),
		want{3, -1, -1, "quota", "duration 0: no TTL"})
	check(rl("used-up", "--consume", "7", "--duration", "0", "--key-prefix", "quota"),
		want{7, -1, -1, "quota", "duration 0, 2 refused"})
	for _, fam := range []string{"api_rate", "login_rate", "lifetime_quota"} {
		e.always("no slot_users_over_limit for ratelimit ("+fam+")", func(m metrics) error {
			if v, ok := m.get("slot_users_over_limit", "family", fam); ok {
				return fmt.Errorf("slot_users_over_limit{family=%q} = %v is emitted", fam, v)
			}
			return nil
		})
	}

	// What the exporter must see of api_rate lasts one window (a few
	// seconds): on a busy machine the window can run out before a sweep
	// reads it. Running out is an event the test sees (a key is gone), so
	// the test writes the keys again and looks again; a wrong reading
	// while the keys live still fails.
	win := [2]int{duration*1000 - 1000, duration * 1000}
	windowed := []struct {
		key  string
		args []string
		want want
	}{
		{"under", []string{"--consume", "3"}, want{3, win[0], win[1], "rlflx", "3 of 5 points"}},
		{"over", []string{"--consume", "8"}, want{8, win[0], win[1], "rlflx", "8 consumes on 5 points: refused ones still count"}},
		{"rewarded", []string{"--consume", "5"}, want{5, win[0], win[1], "rlflx", "all 5 points"}},
		{"fresh-reward", []string{"--reward", "1"}, want{-1, win[0], win[1], "rlflx", "reward() on a fresh key"}},
	}
	rdb := srv.Client()
	apiKeys := []string{"rlflx:blocked"}
	for _, x := range windowed {
		apiKeys = append(apiKeys, "rlflx:"+x.key)
	}
	ranOut := func() bool {
		n, err := rdb.Exists(context.Background(), apiKeys...).Result()
		return err == nil && n < int64(len(apiKeys))
	}
	deadline := time.Now().Add(exportertest.HangAfter)
	var missed error
	for attempt := 1; ; attempt++ {
		if time.Now().After(deadline) {
			t.Fatalf("api_rate: the windows ran out before the exporter read them right, %d times in %v; last: %v", attempt-1, exportertest.HangAfter, missed)
		}
		if attempt > 1 {
			t.Logf("api_rate, attempt %d: a window ran out first (%v); writing the keys again", attempt, missed)
		}
		if err := rdb.Del(context.Background(), apiKeys...).Err(); err != nil {
			t.Fatal(err)
		}
		// The key without a short window first; then the windowed ones all
		// at once, so that each is seen well inside its window.
		check(rl("blocked", "--consume", "8", "--block-duration", itoa(block)),
			want{8, block*1000 - 1000, block * 1000, "rlflx", "blockDuration re-SETs the key with EX blockDuration"})
		events := make([]event, len(windowed))
		var wg sync.WaitGroup
		for i, x := range windowed {
			wg.Add(1)
			go func() {
				defer wg.Done()
				events[i] = rlTry(t, drive, srv.Addr, x.key, points, duration, x.args...)
			}()
		}
		wg.Wait()
		for i, x := range windowed {
			if events[i] == nil {
				t.FailNow() // rlTry reported why
			}
			check(events[i], x.want)
		}
		var m metrics
		m, missed = e.waitUnless(ranOut, "api_rate: the counters as the library left them", func(m metrics) error {
			if err := expect("api_rate",
				w("slot_sets", 5),
				w("slot_users_active", 4), // fresh-reward is at -1
				w("slot_users_at_limit", 3),
				w("slot_ratelimit_keys_ttl_beyond_window", 1),
				w("slot_ratelimit_keys_without_ttl", 0),
			)(m); err != nil {
				return err
			}
			// The floor of "rewarded" must have started, to see reward() reset it.
			if f := m.val("slot_user_floor_seconds", "family", "api_rate", "user", "rewarded"); f < 0.4 {
				return fmt.Errorf("floor of rewarded %v s, want >= 0.4", f)
			}
			return nil
		})
		if missed != nil {
			continue
		}
		before := m.val("slot_user_floor_seconds", "family", "api_rate", "user", "rewarded")
		switch ev := rl("rewarded", "--reward", "2"); int(ev.num("value")) {
		case 3:
		case -2:
			missed = errors.New("reward() started a fresh window")
			continue
		default:
			t.Fatalf("reward(2) after 5 consumes left %v, want 3", ev["value"])
		}
		if _, missed = e.waitUnless(ranOut, "reward() lowers the value: rewarded is no longer at its limit, and its floor restarts", func(m metrics) error {
			if err := expect("api_rate", w("slot_users_at_limit", 2))(m); err != nil {
				return err
			}
			if f := m.val("slot_user_floor_seconds", "family", "api_rate", "user", "rewarded"); f >= before {
				return fmt.Errorf("floor of rewarded %v s, want below %v s (a lowered value reads as a restart)", f, before)
			}
			return nil
		}); missed == nil {
			break
		}
	}
	e.waitFor(8*time.Second, "the windows ran out; the blocked caller's key lives on", expect("api_rate",
		w("slot_sets", 1),
		w("slot_users_active", 1),
		w("slot_users_at_limit", 1),
		w("slot_ratelimit_keys_ttl_beyond_window", 1),
	))
	e.waitFor(12*time.Second, "blocked past 2 x window with window = duration: counted as locked out", expect("api_rate",
		w("slot_ratelimit_callers_locked_out", 1),
	))
	// Same blocked caller, window set to blockDuration as the example says.
	m := e.sweptAfter("login_rate")
	if err := expect("login_rate",
		w("slot_sets", 1),
		w("slot_users_at_limit", 1),
		w("slot_ratelimit_keys_ttl_beyond_window", 0),
		w("slot_ratelimit_callers_locked_out", 0),
	)(m); err != nil {
		t.Errorf("login_rate (window = blockDuration): %v", err)
	}
	if err := expect("lifetime_quota",
		w("slot_sets", 2),
		w("slot_users_active", 2),
		w("slot_users_at_limit", 1),
		w("slot_ratelimit_keys_without_ttl", 2),
		w("slot_ratelimit_callers_locked_out", 1),
	)(m); err != nil {
		t.Errorf("lifetime_quota (duration 0): %v", err)
	}
	if v, ok := m.get("slot_family_floor_window_seconds", "family", "lifetime_quota"); !ok || v != 0 {
		t.Errorf("lifetime_quota: slot_family_floor_window_seconds = %v (present %v), want 0: floor alert off", v, ok)
	}
}

// rlTry runs one rate-limiter-flexible command; it reports a failure with
// t.Error and returns nil, so it may run on another goroutine.
func rlTry(t *testing.T, drive []string, addr, key string, points, duration int, args ...string) event {
	argv := append(append([]string{}, drive...), "ratelimit", "--redis", addr, "--key", key,
		"--points", itoa(points), "--duration", itoa(duration))
	ev, err := runOnce(append(argv, args...)...)
	if err != nil {
		t.Error(err)
		return nil
	}
	return ev
}

// ---- "Redis in Action" fair semaphore (Go) ----------------------------------

func TestRedisInActionSemaphore(t *testing.T) {
	t.Parallel()
	_, bin := binaries(t)
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	const fam = "ria_semaphore"
	sem := func(name, role string, holders int, extra ...string) *holder {
		argv := []string{bin, "--redis", srv.Addr, "--key", "ria:sem:" + name, "--limit", "3",
			"--holders", itoa(holders), "--timeout", "3s", "--refresh", "1s", "--role", role}
		return startHolder(t, name+"/"+role, append(argv, extra...)...)
	}
	alice := sem("alice", "healthy", 3)
	bob := sem("bob", "killed", 1)
	carol := sem("carol", "zombie", 1, "--work", "500ms")

	// The layout: the score is the acquire time in seconds; no key has a TTL.
	now := float64(exportertest.RedisTime(t, rdb)) / 1e3
	for _, h := range []*holder{alice, bob, carol} {
		key := h.truth.str("key")
		for _, id := range h.truth.strs("holders") {
			score, err := rdb.ZScore(ctx, key, id).Result()
			if err != nil || now-score < -0.05 || now-score > 1.5 {
				t.Fatalf("%s: holder %s score %v (%v); want the acquire/refresh time in seconds, near %.3f", key, id, score, err, now)
			}
			if _, err := rdb.ZScore(ctx, h.truth.str("owner_key"), id).Result(); err != nil {
				t.Fatalf("%s: holder %s has no ticket: %v", h.truth.str("owner_key"), id, err)
			}
		}
		for _, k := range []string{key, h.truth.str("owner_key"), h.truth.str("counter_key")} {
			if p := rdb.PTTL(ctx, k).Val(); p != -1 {
				t.Fatalf("%s: PTTL %v, want none (-1): the book sets no TTL", k, p)
			}
		}
	}

	e := startExporter(t, "redis-in-action-semaphore.yml", srv.Addr, overrides{
		fam: {"limit": 3, "ttl": "3s", "heartbeat_interval": "1s", "stale_after": "1500ms", "max_hold": "6s"},
	})
	e.always("no member dated in the future", expect(fam, w("slot_members", 0, "state", "future")))
	e.always("the :owner and :counter keys are no sets of their own", func(m metrics) error {
		if n := m.val("slot_sets", "family", fam); n > 3 {
			return fmt.Errorf("slot_sets = %v, want at most the 3 timeout sets", n)
		}
		return nil
	})
	m := e.waitFor(10*time.Second, "5 live holders of 3 users, alice at her limit", expect(fam,
		w("slot_members", 5, "state", "live"),
		w("slot_sets", 3),
		w("slot_users_active", 3),
		w("slot_users_at_limit", 1),
		w("slot_acquires_total", 5),
		w("slot_sets_without_ttl", 3), // the book's design
	))
	if v := m.val("slot_exporter_keys_skipped_total", "family", fam); v < 6 {
		t.Errorf("slot_exporter_keys_skipped_total = %v, want the 3 :owner and 3 :counter keys skipped each sweep", v)
	}

	alice.release()
	bob.kill()
	e.waitFor(5*time.Second, "alice's releases", expect(fam, w("slot_holds_ended_total", 3, "outcome", "released")))
	// Nobody acquires bob's semaphore again: his dead slot goes stale,
	// then expired, and stays stored.
	seen := map[string]float64{}
	e.waitFor(8*time.Second, "bob's dead slot: stale, then expired and unpruned", expect(fam,
		w("slot_members", 1, "state", "expired"),
		w("slot_holds_ended_total", 0, "outcome", "expired"),
	), func(m metrics) {
		for s, v := range m.states(fam) {
			seen[s] = max(seen[s], v)
		}
	})
	if seen["stale"] != 1 {
		t.Errorf("bob's slot between its last refresh + stale_after and its expiry: stale peaked at %v, want 1", seen["stale"])
	}
	e.holdsFor(1500*time.Millisecond, "an expired slot nobody prunes stays stored", expect(fam,
		w("slot_members", 1, "state", "expired"),
		w("slot_holds_ended_total", 0, "outcome", "expired"),
	))
	// The next acquire of bob's semaphore prunes it.
	bob2 := sem("bob", "healthy", 1)
	e.waitFor(5*time.Second, "the next acquire pruned bob's dead slot", expect(fam,
		w("slot_members", 0, "state", "expired"),
		w("slot_holds_ended_total", 1, "outcome", "expired"),
		w("slot_acquires_total", 6),
	))
	bob2.release()

	carol.wait("work_done", 5*time.Second)
	e.waitFor(10*time.Second, "carol's refresh outlived her work: a zombie", expect(fam,
		w("slot_members", 1, "state", "zombie"),
		w("slot_members", 0, "state", "live"),
	))
	carol.release()
	m = e.waitFor(5*time.Second, "every hold ended", expect(fam,
		w("slot_users_active", 0),
		w("slot_acquires_total", 6),
		w("slot_holds_ended_total", 5, "outcome", "released"),
		w("slot_holds_ended_total", 1, "outcome", "expired"),
		w("slot_hold_duration_seconds_count", 6),
	))
	lo, hi := heartbeatBounds(e, alice, bob, bob2, carol)
	hb := m.val("slot_heartbeats_total", "family", fam)
	if hb < lo || hb > hi {
		t.Errorf("slot_heartbeats_total = %v, want the refreshes made, between %v and %v (%s)", hb, lo, hi, refreshSummary(e, alice, bob, bob2, carol))
	}
	t.Logf("heartbeats: %v counted, refreshes bound it to [%v, %v]", hb, lo, hi)
}

// ---- the example configs as shipped ------------------------------------------

func TestExampleConfigsCheck(t *testing.T) {
	t.Parallel()
	bin, _ := binaries(t)
	for _, f := range []string{"redis-semaphore.yml", "redlock.yml", "rate-limiter-flexible.yml", "redis-in-action-semaphore.yml"} {
		t.Run(f, func(t *testing.T) {
			out, err := runCheck(bin, f)
			if err != nil {
				t.Fatalf("slot_exporter --config.check %s: %v\n%s", f, err, out)
			}
		})
	}
}

func runCheck(bin, file string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), exportertest.HangAfter)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--config.check", "--config.file="+file).CombinedOutput()
	return string(out), err
}
