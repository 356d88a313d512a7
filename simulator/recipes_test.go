package simulator_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/redistest"
	"github.com/slotexporter/slot_exporter/simulator"
)

// usersIn returns the users of modes, sorted.
func usersIn(modes map[string]string, want ...string) []string {
	var out []string
	for u, m := range modes {
		if slices.Contains(want, m) {
			out = append(out, u)
		}
	}
	slices.Sort(out)
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// runPaused runs the simulation for d, pauses it, and returns the truth
// taken twice around fn, which reads Redis: a key whose state flips between
// the two is borderline (its TTL ran out during the read).
func runPaused(t *testing.T, s *simulator.Sim, d time.Duration, read func()) (t1, t2 simulator.Truth) {
	t.Helper()
	time.Sleep(d)
	s.Pause()
	t1 = s.Truth()
	read()
	t2 = s.Truth()
	if !t1.Paused || t1.Errors != 0 {
		t.Fatalf("truth paused=%v errors=%d", t1.Paused, t1.Errors)
	}
	return t1, t2
}

func TestRateLimitTruthMatchesRedis(t *testing.T) {
	srv := redistest.Start(t)
	c := client(t, srv)
	ctx := context.Background()
	const window = 600 * time.Millisecond
	s := start(t, c, simulator.Options{
		Users: 30, NoSlotStreams: true, Seed: 4,
		RateLimits: simulator.RateLimitWorkload{
			Limit: 5, Window: window, HitInterval: 30 * time.Millisecond,
			Healthy: 3, NoExpire: 2, ExpireEveryHit: 2, SecondsAsMillis: 1, MillisAsSeconds: 2,
		},
	})
	type state struct {
		val  int64
		pttl time.Duration
		ok   bool
	}
	got := map[string]state{}
	var users []string
	t1, t2 := runPaused(t, s, 1600*time.Millisecond, func() {
		users = sortedKeys(s.Truth().RateLimits.Users)
		for _, u := range users {
			v, err := c.Get(ctx, s.RateKey(u)).Int64()
			if errors.Is(err, redis.Nil) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			got[u] = state{val: v, pttl: c.PTTL(ctx, s.RateKey(u)).Val(), ok: true}
		}
	})
	r1, r2 := t1.RateLimits, t2.RateLimits
	if len(users) != 10 || r1.Hits == 0 || r1.Hits != r1.Allowed+r1.Refused {
		t.Fatalf("users %v, hits %d allowed %d refused %d", users, r1.Hits, r1.Allowed, r1.Refused)
	}
	checked := 0
	for _, u := range users {
		_, in1 := r1.Used[u]
		if _, in2 := r2.Used[u]; in1 != in2 {
			continue // its window ended during the read
		}
		checked++
		g := got[u]
		if g.ok != in1 || g.val != r1.Used[u] {
			t.Errorf("%s (%s): Redis has %+v, truth present=%v value %d", u, r1.Users[u], g, in1, r1.Used[u])
		}
		if _, noTTL := r1.NoTTLUsers[u]; g.ok && noTTL != (g.pttl == -1) {
			t.Errorf("%s: PTTL %v, truth without TTL=%v", u, g.pttl, noTTL)
		}
		if _, beyond := r1.TTLBeyondWindowUsers[u]; g.ok && beyond != (g.pttl > window) {
			t.Errorf("%s: PTTL %v, truth beyond window=%v", u, g.pttl, beyond)
		}
	}
	if checked < 8 {
		t.Fatalf("only %d of %d counters checked", checked, len(users))
	}
	modes := r1.Users
	if want := usersIn(modes, simulator.RateNoExpire); !slices.Equal(sortedKeys(r1.NoTTLUsers), want) || r1.KeysWithoutTTL != 2 {
		t.Errorf("without TTL %v (%d), want %v", r1.NoTTLUsers, r1.KeysWithoutTTL, want)
	}
	if want := usersIn(modes, simulator.RateMillisAsSeconds); !slices.Equal(sortedKeys(r1.TTLBeyondWindowUsers), want) {
		t.Errorf("TTL beyond window %v, want %v", r1.TTLBeyondWindowUsers, want)
	}
	// After more than 2 windows, every caller whose counter cannot restart
	// is locked out, and no other.
	want := usersIn(modes, simulator.RateNoExpire, simulator.RateExpireEveryHit, simulator.RateMillisAsSeconds)
	if !slices.Equal(sortedKeys(r1.LockedOutUsers), want) || r1.CallersLockedOut != 6 {
		t.Errorf("locked out %v, want %v", r1.LockedOutUsers, want)
	}
	for _, u := range want {
		if r1.WindowAgeSeconds[u] < 2*window.Seconds() || r1.Used[u] < 20 {
			t.Errorf("%s locked out with window age %vs, count %d", u, r1.WindowAgeSeconds[u], r1.Used[u])
		}
	}
	for _, u := range usersIn(modes, simulator.ModeHealthy) {
		if r1.WindowAgeSeconds[u] > window.Seconds() {
			t.Errorf("healthy %s: window open for %vs", u, r1.WindowAgeSeconds[u])
		}
	}
}

func TestLockTruthMatchesRedis(t *testing.T) {
	srv := redistest.Start(t)
	c := client(t, srv)
	ctx := context.Background()
	const ttl, tol = 600 * time.Millisecond, 100 * time.Millisecond
	s := start(t, c, simulator.Options{
		Users: 30, NoSlotStreams: true, Seed: 5,
		Locks: simulator.LockWorkload{
			// A killed holder's lock lives up to about 1s (its last extend,
			// before its death at most 450ms in, plus the 600ms lease): below
			// MaxHold. Zombies are 1.6s old when checked.
			TTL: ttl, Hold: 300 * time.Millisecond, Idle: 100 * time.Millisecond, MaxHold: 1300 * time.Millisecond, ClockSkewTolerance: tol,
			Healthy: 3, NoTTL: 2, Zombie: 2, WrongUnit: 2, Killed: 2,
		},
	})
	type state struct {
		token string
		pttl  time.Duration
	}
	got := map[string]state{}
	var users []string
	t1, t2 := runPaused(t, s, 1700*time.Millisecond, func() {
		users = sortedKeys(s.Truth().Locks.Users)
		for _, u := range users {
			tok, err := c.Get(ctx, s.LockKey(u)).Result()
			if errors.Is(err, redis.Nil) {
				continue
			}
			got[u] = state{token: tok, pttl: c.PTTL(ctx, s.LockKey(u)).Val()}
		}
	})
	l1, l2 := t1.Locks, t2.Locks
	checked := 0
	for _, u := range users {
		_, in1 := l1.Used[u]
		if _, in2 := l2.Used[u]; in1 != in2 {
			continue
		}
		checked++
		g, inRedis := got[u]
		if inRedis != in1 {
			t.Errorf("%s (%s): in Redis %v (%+v), truth held %v", u, l1.Users[u], inRedis, g, in1)
			continue
		}
		if !inRedis {
			continue
		}
		if !strings.Contains(g.token, "-"+u+"-") {
			t.Errorf("%s: token %q is not the holder's", u, g.token)
		}
		if _, noTTL := l1.NoTTLUsers[u]; noTTL != (g.pttl == -1) {
			t.Errorf("%s: PTTL %v, truth without TTL %v", u, g.pttl, noTTL)
		}
		if _, future := l1.FutureUsers[u]; future != (g.pttl > ttl+tol) {
			t.Errorf("%s: PTTL %v, truth future %v", u, g.pttl, future)
		}
	}
	if checked < 9 {
		t.Fatalf("only %d of %d locks checked", checked, len(users))
	}
	modes := l1.Users
	if want := usersIn(modes, simulator.LockNoTTL); !slices.Equal(sortedKeys(l1.NoTTLUsers), want) || l1.WithoutTTL != 2 {
		t.Errorf("without TTL %v, want %v", l1.NoTTLUsers, want)
	}
	// Held longer than MaxHold: the zombies, and the locks without TTL
	// whose holders crashed.
	if want := usersIn(modes, simulator.LockZombie, simulator.LockNoTTL); !slices.Equal(sortedKeys(l1.ZombieUsers), want) {
		t.Errorf("zombie %v, want %v", l1.ZombieUsers, want)
	}
	for u := range l1.FutureUsers {
		if modes[u] != simulator.LockWrongUnit {
			t.Errorf("%s (%s) is future", u, modes[u])
		}
	}
	if l1.Held != l1.Live+l1.Zombie+l1.Future || l1.Held != int64(len(l1.Used)) {
		t.Errorf("held %d = live %d + zombie %d + future %d, used %v", l1.Held, l1.Live, l1.Zombie, l1.Future, l1.Used)
	}
	// Killed holders' leases ran out; healthy holders released.
	for _, u := range usersIn(modes, simulator.LockKilled) {
		if l1.ExpiredUsers[u] == 0 {
			t.Errorf("killed holder %s: no expired hold", u)
		}
	}
	if l1.Released == 0 || l1.Acquires != l1.Released+l1.Expired+l1.Held {
		t.Errorf("acquires %d, released %d, expired %d, held %d", l1.Acquires, l1.Released, l1.Expired, l1.Held)
	}
}
