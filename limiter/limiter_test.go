package limiter_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/redistest"
	"github.com/slotexporter/slot_exporter/limiter"
)

// clock is a settable clock for deterministic scores.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Now()} }

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func opts(ttl time.Duration, now func() time.Time) limiter.Options {
	o := limiter.DefaultOptions()
	o.TTL = ttl
	o.HeartbeatInterval = ttl / 6
	if now != nil {
		o.Now = now
	}
	return o
}

func score(t *testing.T, c *redis.Client, key, id string) (float64, bool) {
	t.Helper()
	s, err := c.ZScore(context.Background(), key, id).Result()
	if errors.Is(err, redis.Nil) {
		return 0, false
	}
	if err != nil {
		t.Fatalf("zscore: %v", err)
	}
	return s, true
}

func TestAcquireRaceNeverExceedsLimit(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	ctx := context.Background()
	l := limiter.New(c, opts(2*time.Second, nil))
	const key, limit, racers = "joishi:streams:{race}", 3, 50

	for round := range 5 {
		var granted atomic.Int64
		var maxUsed atomic.Int64
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				ok, used, err := l.Acquire(ctx, key, fmt.Sprintf("r%d-%d", round, i), limit)
				if err != nil {
					t.Errorf("acquire: %v", err)
					return
				}
				if ok {
					granted.Add(1)
				}
				for {
					m := maxUsed.Load()
					if int64(used) <= m || maxUsed.CompareAndSwap(m, int64(used)) {
						break
					}
				}
			}()
		}
		close(start)
		wg.Wait()
		if g := granted.Load(); g != limit {
			t.Fatalf("round %d: %d granted, want %d", round, g, limit)
		}
		if m := maxUsed.Load(); m > limit {
			t.Fatalf("round %d: used reported %d > limit", round, m)
		}
		n, err := c.ZCard(ctx, key).Result()
		if err != nil || n != limit {
			t.Fatalf("round %d: ZCARD = %d, %v; want %d", round, n, err, limit)
		}
		// Free the slots for the next round.
		members, _ := c.ZRange(ctx, key, 0, -1).Result()
		for _, m := range members {
			if err := l.Release(ctx, key, m); err != nil {
				t.Fatal(err)
			}
		}
		if n, _ := c.ZCard(ctx, key).Result(); n != 0 {
			t.Fatalf("round %d: %d left after release", round, n)
		}
	}
}

func TestAcquireShapeAndIdempotent(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	ctx := context.Background()
	clk := newClock()
	l := limiter.New(c, opts(2*time.Second, clk.Now))
	key := "joishi:streams:{u1}"

	ok, used, err := l.Acquire(ctx, key, "a", 1)
	if err != nil || !ok || used != 1 {
		t.Fatalf("first acquire = %v %d %v", ok, used, err)
	}
	s, _ := score(t, c, key, "a")
	if want := float64(clk.Now().Add(2 * time.Second).UnixMilli()); s != want {
		t.Fatalf("score %v, want now+ttl in ms %v", s, want)
	}
	pttl, _ := c.PTTL(ctx, key).Result()
	if pttl <= 3*time.Second || pttl > 4*time.Second {
		t.Fatalf("PTTL %v, want about 2 x ttl", pttl)
	}
	// Same holder again: granted, not counted twice, score refreshed.
	clk.Add(500 * time.Millisecond)
	ok, used, err = l.Acquire(ctx, key, "a", 1)
	if err != nil || !ok || used != 1 {
		t.Fatalf("re-acquire = %v %d %v", ok, used, err)
	}
	if s2, _ := score(t, c, key, "a"); s2 != s+500 {
		t.Fatalf("re-acquire score %v, want %v", s2, s+500)
	}
	// Another holder: denied at limit 1.
	ok, used, err = l.Acquire(ctx, key, "b", 1)
	if err != nil || ok || used != 1 {
		t.Fatalf("second holder = %v %d %v, want denied with used 1", ok, used, err)
	}
	if _, ok := score(t, c, key, "b"); ok {
		t.Fatal("denied holder was added")
	}
	// Limit 0 grants nothing.
	if ok, _, _ := l.Acquire(ctx, "joishi:streams:{u2}", "x", 0); ok {
		t.Fatal("limit 0 granted")
	}
}

func TestScoreUnitSeconds(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	ctx := context.Background()
	clk := newClock()
	o := opts(2*time.Second, clk.Now)
	o.ScoreUnit = limiter.ScoreUnitSeconds
	l := limiter.New(c, o)
	key := "s:{u}"
	if ok, _, err := l.Acquire(ctx, key, "a", 1); !ok || err != nil {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	s, _ := score(t, c, key, "a")
	want := float64(clk.Now().Add(2*time.Second).UnixMilli()) / 1000
	if d := s - want; d > 0.001 || d < -0.001 {
		t.Fatalf("score %v, want %v (seconds)", s, want)
	}
	clk.Add(time.Second)
	if alive, err := l.Heartbeat(ctx, key, "a"); !alive || err != nil {
		t.Fatalf("heartbeat: %v %v", alive, err)
	}
	if s2, _ := score(t, c, key, "a"); s2-s < 0.999 || s2-s > 1.001 {
		t.Fatalf("heartbeat moved score by %v s, want 1", s2-s)
	}
	// The expiry is in seconds too: after ttl the slot is pruned.
	clk.Add(2*time.Second + 10*time.Millisecond)
	if ok, used, _ := l.Acquire(ctx, key, "b", 1); !ok || used != 1 {
		t.Fatalf("acquire after expiry = %v %d", ok, used)
	}
}

func TestHeartbeatAfterReleaseDoesNotResurrect(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	ctx := context.Background()
	l := limiter.New(c, opts(2*time.Second, nil))
	key := "joishi:streams:{u1}"
	if ok, _, err := l.Acquire(ctx, key, "a", 3); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if _, _, err := l.Acquire(ctx, key, "b", 3); err != nil {
		t.Fatal(err)
	}
	if alive, err := l.Heartbeat(ctx, key, "a"); !alive || err != nil {
		t.Fatalf("heartbeat of a live slot = %v %v", alive, err)
	}
	if err := l.Release(ctx, key, "a"); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx, key, "a"); err != nil {
		t.Fatalf("second release: %v", err)
	}
	for _, hb := range []func(context.Context, string, string) (bool, error){l.Heartbeat, l.HeartbeatNoRefresh} {
		alive, err := hb(ctx, key, "a")
		if err != nil || alive {
			t.Fatalf("heartbeat after release = %v %v, want not alive", alive, err)
		}
		if _, ok := score(t, c, key, "a"); ok {
			t.Fatal("heartbeat resurrected a released slot")
		}
	}
	alive, err := l.HeartbeatMany(ctx, []limiter.Beat{{Key: key, ID: "a"}, {Key: key, ID: "b"}, {Key: "other", ID: "b", NoRefresh: true}})
	if err != nil || alive[0] || !alive[1] || alive[2] {
		t.Fatalf("HeartbeatMany = %v %v, want [false true false]", alive, err)
	}
	if n, _ := c.Exists(ctx, "other").Result(); n != 0 {
		t.Fatal("heartbeat created a key")
	}
	// A heartbeat on a vanished key creates nothing either.
	c.Del(ctx, key)
	if alive, err := l.Heartbeat(ctx, key, "b"); alive || err != nil {
		t.Fatalf("heartbeat on deleted key = %v %v", alive, err)
	}
	if n, _ := c.Exists(ctx, key).Result(); n != 0 {
		t.Fatal("heartbeat recreated a deleted key")
	}
}

func TestLateHeartbeatNeverMovesExpiryBack(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	ctx := context.Background()
	clk := newClock()
	l := limiter.New(c, opts(2*time.Second, clk.Now))
	behind := limiter.New(c, opts(2*time.Second, func() time.Time { return clk.Now().Add(-time.Second) }))
	key := "joishi:streams:{u1}"
	if ok, _, err := l.Acquire(ctx, key, "a", 1); !ok || err != nil {
		t.Fatal(ok, err)
	}
	before, _ := score(t, c, key, "a")
	alive, err := behind.Heartbeat(ctx, key, "a")
	if !alive || err != nil {
		t.Fatalf("late heartbeat = %v %v, want alive", alive, err)
	}
	if alive, err := behind.HeartbeatNoRefresh(ctx, key, "a"); !alive || err != nil {
		t.Fatalf("late no-refresh heartbeat = %v %v", alive, err)
	}
	if after, _ := score(t, c, key, "a"); after != before {
		t.Fatalf("late heartbeat moved expiry from %v to %v", before, after)
	}
	clk.Add(300 * time.Millisecond)
	if _, err := l.Heartbeat(ctx, key, "a"); err != nil {
		t.Fatal(err)
	}
	if after, _ := score(t, c, key, "a"); after != before+300 {
		t.Fatalf("timely heartbeat: score %v, want %v", after, before+300)
	}
}

func TestVanishedHolderIsPrunedAfterTTL(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	ctx := context.Background()
	clk := newClock()
	l := limiter.New(c, opts(2*time.Second, clk.Now))
	key := "joishi:streams:{u1}"
	for _, id := range []string{"dead1", "dead2", "live"} {
		if ok, _, err := l.Acquire(ctx, key, id, 3); !ok || err != nil {
			t.Fatal(id, ok, err)
		}
	}
	// The dead holders never heartbeat nor release; "live" keeps beating.
	clk.Add(time.Second)
	if _, err := l.Heartbeat(ctx, key, "live"); err != nil {
		t.Fatal(err)
	}
	if ok, used, _ := l.Acquire(ctx, key, "new", 3); ok || used != 3 {
		t.Fatalf("before ttl: acquire = %v %d, want denied (dead slots still count)", ok, used)
	}
	clk.Add(time.Second) // exactly ttl after the dead holders' acquire: score <= now
	ok, used, err := l.Acquire(ctx, key, "new", 3)
	if !ok || used != 2 || err != nil {
		t.Fatalf("after ttl: acquire = %v %d %v, want granted with used 2", ok, used, err)
	}
	members, _ := c.ZRange(ctx, key, 0, -1).Result()
	if fmt.Sprint(members) != "[live new]" {
		t.Fatalf("members %v, want [live new]", members)
	}
}

func TestHeartbeatRefreshesKeyExpiry(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	ctx := context.Background()
	l := limiter.New(c, opts(time.Second, nil)) // key PEXPIRE = 2s
	key := "joishi:streams:{u1}"
	if ok, _, err := l.Acquire(ctx, key, "a", 1); !ok || err != nil {
		t.Fatal(ok, err)
	}
	time.Sleep(300 * time.Millisecond)
	p0, _ := c.PTTL(ctx, key).Result()
	if p0 > 1800*time.Millisecond {
		t.Fatalf("PTTL %v did not run down", p0)
	}
	if alive, err := l.HeartbeatNoRefresh(ctx, key, "a"); !alive || err != nil {
		t.Fatal(alive, err)
	}
	p1, _ := c.PTTL(ctx, key).Result()
	if p1 > p0 {
		t.Fatalf("HeartbeatNoRefresh raised PTTL %v -> %v", p0, p1)
	}
	if alive, err := l.Heartbeat(ctx, key, "a"); !alive || err != nil {
		t.Fatal(alive, err)
	}
	p2, _ := c.PTTL(ctx, key).Result()
	if p2 < 1900*time.Millisecond || p2 <= p1 {
		t.Fatalf("Heartbeat: PTTL %v -> %v, want back to about 2s", p1, p2)
	}
	if _, err := l.HeartbeatMany(ctx, []limiter.Beat{{Key: key, ID: "a", NoRefresh: true}}); err != nil {
		t.Fatal(err)
	}
	// A key without expiry stays without one (PEXPIRE GT treats it as infinite).
	c.Persist(ctx, key)
	if _, err := l.Heartbeat(ctx, key, "a"); err != nil {
		t.Fatal(err)
	}
	if p, _ := c.PTTL(ctx, key).Result(); p != -1 {
		t.Fatalf("PTTL after heartbeat on persistent key = %v, want -1", p)
	}
}

// The trap: without refresh, the key vanishes under a slot that is still
// heartbeating; with refresh it does not.
func TestNoRefreshKeyExpiresUnderLiveSlot(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	ctx := context.Background()
	// A slot's ttl of a second: a heartbeat every 50 ms keeps it even on
	// a machine that stalls the test for most of a second.
	l := limiter.New(c, opts(time.Second, nil)) // key PEXPIRE 2s
	good, bad := "joishi:streams:{good}", "joishi:streams:{bad}"
	for _, k := range []string{good, bad} {
		if ok, _, err := l.Acquire(ctx, k, "a", 1); !ok || err != nil {
			t.Fatal(ok, err)
		}
	}
	// Until the no-refresh key has expired: about 2 s on Redis's clock.
	deadline := time.Now().Add(30 * time.Second)
	badAlive := true
	for badAlive && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		if alive, err := l.Heartbeat(ctx, good, "a"); !alive || err != nil {
			t.Fatalf("refreshing heartbeat lost its slot: %v %v", alive, err)
		}
		alive, err := l.HeartbeatNoRefresh(ctx, bad, "a")
		if err != nil {
			t.Fatal(err)
		}
		badAlive = alive
	}
	if badAlive {
		t.Fatal("no-refresh key did not expire under its live slot")
	}
}

func TestNoScriptFallback(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	ctx := context.Background()
	l := limiter.New(c, opts(2*time.Second, nil))
	for i := range 3 {
		if err := c.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		ok, used, err := l.Acquire(ctx, "k", "id"+strconv.Itoa(i), 3)
		if err != nil || !ok || used != i+1 {
			t.Fatalf("acquire after SCRIPT FLUSH = %v %d %v", ok, used, err)
		}
	}
	// And EVALSHA is used once the script is cached.
	ok, _, err := l.Acquire(ctx, "k", "id0", 3)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
}

func TestFailOpenAndClosed(t *testing.T) {
	// Nothing listens on this port.
	addr := fmt.Sprintf("127.0.0.1:%d", redistest.FreePort(t))
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond, DialerRetries: 1, DialerRetryTimeout: 10 * time.Millisecond, DisableIdentity: true})
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()

	open := limiter.New(c, opts(time.Second, nil))
	ok, _, err := open.Acquire(ctx, "k", "a", 1)
	if !ok || !errors.Is(err, limiter.ErrUnavailable) {
		t.Fatalf("fail-open acquire = %v %v, want granted with ErrUnavailable", ok, err)
	}
	alive, err := open.Heartbeat(ctx, "k", "a")
	if !alive || !errors.Is(err, limiter.ErrUnavailable) {
		t.Fatalf("fail-open heartbeat = %v %v", alive, err)
	}
	if err := open.Release(ctx, "k", "a"); !errors.Is(err, limiter.ErrUnavailable) {
		t.Fatalf("release = %v", err)
	}

	o := opts(time.Second, nil)
	o.FailOpen = false
	closed := limiter.New(c, o)
	ok, _, err = closed.Acquire(ctx, "k", "a", 1)
	if ok || !errors.Is(err, limiter.ErrUnavailable) {
		t.Fatalf("fail-closed acquire = %v %v, want denied with ErrUnavailable", ok, err)
	}
	alive, err = closed.Heartbeat(ctx, "k", "a")
	if alive || !errors.Is(err, limiter.ErrUnavailable) {
		t.Fatalf("fail-closed heartbeat = %v %v", alive, err)
	}
	al, err := closed.HeartbeatMany(ctx, []limiter.Beat{{Key: "k", ID: "a"}})
	if al[0] || !errors.Is(err, limiter.ErrUnavailable) {
		t.Fatalf("fail-closed HeartbeatMany = %v %v", al, err)
	}

	// A caller that cancels its own context is not an outage.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	ok, _, err = open.Acquire(cctx, "k", "a", 1)
	if ok || err == nil || errors.Is(err, limiter.ErrUnavailable) {
		t.Fatalf("cancelled acquire = %v %v, want denied, not ErrUnavailable", ok, err)
	}
}

func TestWrongTypeIsNotUnavailable(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	ctx := context.Background()
	c.Set(ctx, "k", "x", 0)
	l := limiter.New(c, opts(time.Second, nil))
	ok, _, err := l.Acquire(ctx, "k", "a", 1)
	if ok || err == nil || errors.Is(err, limiter.ErrUnavailable) {
		t.Fatalf("acquire on a string key = %v %v, want a plain error", ok, err)
	}
	if _, err := l.Heartbeat(ctx, "k", "a"); err == nil || errors.Is(err, limiter.ErrUnavailable) {
		t.Fatalf("heartbeat on a string key = %v", err)
	}
}

func TestRedisRestartFailsOpenThenRecovers(t *testing.T) {
	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond, DialerRetries: 1, DialerRetryTimeout: 10 * time.Millisecond, DisableIdentity: true})
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	l := limiter.New(c, opts(time.Second, nil))
	if ok, _, err := l.Acquire(ctx, "k", "a", 1); !ok || err != nil {
		t.Fatal(ok, err)
	}
	srv.Kill()
	if ok, _, err := l.Acquire(ctx, "k", "b", 1); !ok || !errors.Is(err, limiter.ErrUnavailable) {
		t.Fatalf("during outage = %v %v", ok, err)
	}
	srv.Restart()
	var err error
	for range 20 { // the pool may hand out a dead connection first
		var ok bool
		if ok, _, err = l.Acquire(ctx, "k", "b", 1); err == nil {
			if !ok {
				t.Fatal("denied after restart with an empty Redis")
			}
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("after restart: %v", err)
	}
}
