package simulator_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
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

func TestListTruthMatchesRedis(t *testing.T) {
	srv := redistest.Start(t)
	c := client(t, srv)
	ctx := context.Background()
	s := start(t, c, simulator.Options{
		Users: 30, NoSlotStreams: true, Seed: 6,
		ListQueues: simulator.ListQueueWorkload{
			PushInterval: 50 * time.Millisecond, Process: 20 * time.Millisecond, MaxWait: 500 * time.Millisecond,
			RestartDelay: 50 * time.Millisecond, Healthy: 2, NoConsumer: 2, KilledWorker: 2,
		},
	})
	heads := map[string]string{}
	lens := func() (map[string]int64, map[string]int64) {
		q, p := map[string]int64{}, map[string]int64{}
		for u := range s.Truth().ListQueues.Users {
			if n := c.LLen(ctx, s.QueueKey(u)).Val(); n > 0 {
				q[u] = n
			}
			if n := c.LLen(ctx, s.QueueKey(u)+":processing").Val(); n > 0 {
				p[u] = n
				heads[u] = c.LIndex(ctx, s.QueueKey(u)+":processing", -1).Val()
			}
		}
		return q, p
	}
	var items, processing map[string]int64
	t1, _ := runPaused(t, s, time.Second, func() { items, processing = lens() })
	l := t1.ListQueues
	if !maps.Equal(items, l.Used) || !maps.Equal(processing, l.ProcessingUsed) {
		t.Fatalf("Redis: queues %v processing %v; truth: queues %v processing %v", items, processing, l.Used, l.ProcessingUsed)
	}
	modes := l.Users
	if want := usersIn(modes, simulator.ListNoConsumer); !slices.Equal(sortedKeys(l.StalledUsers), want) || l.Stalled != 2 {
		t.Errorf("stalled %v, want %v", l.StalledUsers, want)
	}
	killed := usersIn(modes, simulator.ListKilledWorker)
	if !slices.Equal(sortedKeys(l.ProcessingStalledUsers), killed) || l.Orphaned != 2 {
		t.Errorf("processing stalled %v, orphaned %d, want %v", l.ProcessingStalledUsers, l.Orphaned, killed)
	}
	if l.Pushed != l.Items+l.Taken || l.Taken != l.Completed+l.ProcessingItems || l.Completed == 0 {
		t.Errorf("pushed %d items %d taken %d completed %d processing %d", l.Pushed, l.Items, l.Taken, l.Completed, l.ProcessingItems)
	}
	// A queue nobody consumes: its head is its first job, next since then.
	for _, u := range usersIn(modes, simulator.ListNoConsumer) {
		if h := c.LIndex(ctx, s.QueueKey(u), -1).Val(); !strings.HasSuffix(h, "-"+u+"-1") {
			t.Errorf("%s: head %q, want its first job", u, h)
		}
		if w := l.HeadWaitSeconds[u]; w < 0.8 || w > 1.5 {
			t.Errorf("%s: head wait %vs after a 1s run", u, w)
		}
	}
	// The killed worker's job stays the processing list's head while work
	// goes on around it.
	before := maps.Clone(heads)
	s.Resume()
	t3, _ := runPaused(t, s, 300*time.Millisecond, func() { lens() })
	for _, u := range killed {
		if heads[u] != before[u] || heads[u] == "" {
			t.Errorf("%s: processing head %q then %q", u, before[u], heads[u])
		}
		if t3.ListQueues.ProcessingHeadWaitSeconds[u] < l.ProcessingHeadWaitSeconds[u]+0.25 {
			t.Errorf("%s: processing head wait %v then %v", u, l.ProcessingHeadWaitSeconds[u], t3.ListQueues.ProcessingHeadWaitSeconds[u])
		}
	}
	if t3.ListQueues.Completed <= l.Completed {
		t.Errorf("no work done after Resume: completed %d then %d", l.Completed, t3.ListQueues.Completed)
	}
}

func TestStreamTruthMatchesRedis(t *testing.T) {
	srv := redistest.Start(t)
	c := client(t, srv)
	ctx := context.Background()
	const maxHold, maxDeliveries = 600 * time.Millisecond, 3
	s := start(t, c, simulator.Options{
		Users: 30, NoSlotStreams: true, Seed: 7,
		StreamQueues: simulator.StreamQueueWorkload{
			AddInterval: 50 * time.Millisecond, Process: 20 * time.Millisecond, MinIdle: 150 * time.Millisecond,
			RestartDelay: 30 * time.Millisecond, MaxHold: maxHold, MaxDeliveries: maxDeliveries,
			Healthy: 2, DeadConsumer: 2, Poison: 2, Lagging: 2,
		},
	})
	type stream struct {
		xlen, pending, lag, stuck, redelivered, maxDeliveries, dead int64
		oldest                                                      time.Time
	}
	got := map[string]stream{}
	t1, _ := runPaused(t, s, 1500*time.Millisecond, func() {
		for u := range s.Truth().StreamQueues.Users {
			key := s.StreamKey(u)
			var st stream
			st.xlen = c.XLen(ctx, key).Val()
			groups, err := c.XInfoGroups(ctx, key).Result()
			if err != nil || len(groups) != 1 || groups[0].Name != "workers" {
				t.Fatalf("%s: groups %+v %v", key, groups, err)
			}
			st.pending, st.lag = groups[0].Pending, groups[0].Lag
			ps, err := c.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: key, Group: "workers", Start: "-", End: "+", Count: 100}).Result()
			if err != nil {
				t.Fatal(err)
			}
			for i, p := range ps {
				if p.Idle > maxHold {
					st.stuck++
				}
				if p.RetryCount > maxDeliveries {
					st.redelivered++
				}
				st.maxDeliveries = max(st.maxDeliveries, p.RetryCount)
				if i == 0 {
					ms, _ := strconv.ParseInt(strings.Split(p.ID, "-")[0], 10, 64)
					st.oldest = time.UnixMilli(ms)
				}
			}
			cs, err := c.XInfoConsumers(ctx, key, "workers").Result()
			if err != nil {
				t.Fatal(err)
			}
			for _, cons := range cs {
				if cons.Pending > 0 && cons.Idle > maxHold {
					st.dead++
				}
			}
			got[u] = st
		}
	})
	q := t1.StreamQueues
	var xlen int64
	for u, st := range got {
		xlen += st.xlen
		want := stream{
			pending: q.Used[u], lag: q.LagUsers[u], stuck: q.StuckUsers[u], redelivered: q.RedeliveredUsers[u],
			maxDeliveries: q.MaxDeliveriesByUser[u], dead: q.DeadConsumerUsers[u], xlen: st.xlen, oldest: st.oldest,
		}
		if st != want {
			t.Errorf("%s (%s): Redis %+v, truth %+v", u, q.Users[u], st, want)
		}
		if age := t1.At.Sub(st.oldest).Seconds(); st.pending > 0 && (age-q.OldestPendingSeconds[u] > 0.01 || age-q.OldestPendingSeconds[u] < -0.01) {
			t.Errorf("%s: oldest pending %vs old, truth %vs", u, age, q.OldestPendingSeconds[u])
		}
	}
	if xlen != q.Entries || q.Entries != q.Added || q.Delivered != q.Acked+q.Pending || q.Lag != q.Added-q.Delivered {
		t.Errorf("XLEN %d; truth %+v", xlen, q)
	}
	modes := q.Users
	dead := usersIn(modes, simulator.StreamDeadConsumer)
	if !slices.Equal(sortedKeys(q.DeadConsumerUsers), dead) || !slices.Equal(sortedKeys(q.StuckUsers), dead) || q.ConsumersDead != 2 || q.PendingStuck != 2 {
		t.Errorf("dead %v stuck %v, want %v", q.DeadConsumerUsers, q.StuckUsers, dead)
	}
	if want := usersIn(modes, simulator.StreamPoison); !slices.Equal(sortedKeys(q.RedeliveredUsers), want) || q.Redelivered != 2 {
		t.Errorf("redelivered %v, want %v", q.RedeliveredUsers, want)
	}
	// Only the lagging groups fall behind; others may have an entry or two
	// added and not read yet.
	for u, mode := range modes {
		if lag := q.LagUsers[u]; (mode == simulator.StreamLagging) != (lag >= 5) {
			t.Errorf("%s (%s): lag %d", u, mode, lag)
		}
	}
	if n := len(usersIn(modes, simulator.StreamLagging)); n != 2 {
		t.Fatalf("%d lagging streams", n)
	}
}

// While paused, nothing at all is sent to Redis; after Resume, traffic
// comes back.
func TestPauseStopsEveryWriter(t *testing.T) {
	srv := redistest.Start(t)
	c := client(t, srv)
	ctx := context.Background()
	s := start(t, c, simulator.Options{
		Users: 20, StreamRate: 100, StreamDuration: 300 * time.Millisecond, TTL: time.Second, HeartbeatInterval: 50 * time.Millisecond,
		CounterPrefix: "p:legacy:", Seed: 8,
		RateLimits:   simulator.RateLimitWorkload{Window: time.Second, HitInterval: 10 * time.Millisecond, Healthy: 2, ExpireEveryHit: 1},
		Locks:        simulator.LockWorkload{TTL: 300 * time.Millisecond, Hold: 100 * time.Millisecond, Healthy: 2, Zombie: 1},
		ListQueues:   simulator.ListQueueWorkload{PushInterval: 20 * time.Millisecond, Healthy: 2, KilledWorker: 1},
		StreamQueues: simulator.StreamQueueWorkload{AddInterval: 20 * time.Millisecond, MinIdle: 100 * time.Millisecond, RestartDelay: 50 * time.Millisecond, MaxHold: time.Second, Healthy: 2, Poison: 1},
	})
	processed := func() int64 {
		info := c.Info(ctx, "stats").Val()
		for line := range strings.Lines(info) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_commands_processed:"); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				return n
			}
		}
		t.Fatal("no total_commands_processed")
		return 0
	}
	time.Sleep(400 * time.Millisecond)
	s.Pause()
	if !s.Paused() {
		t.Fatal("not paused")
	}
	a := processed()
	time.Sleep(300 * time.Millisecond)
	b := processed()
	if b-a != 1 { // the first INFO itself
		t.Fatalf("%d commands reached Redis while paused", b-a-1)
	}
	s.Resume()
	time.Sleep(200 * time.Millisecond)
	if d := processed() - b; d < 50 {
		t.Fatalf("only %d commands in 200ms after Resume", d)
	}
	// Stop ends a pause.
	s.Pause()
	done := make(chan struct{})
	go func() { s.Stop(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Stop hung while paused")
	}
}

func TestRecipeActorsAreDrawnFromSeed(t *testing.T) {
	srv := redistest.Start(t)
	c := client(t, srv)
	o := simulator.Options{
		Users: 50, NoSlotStreams: true, Seed: 9,
		RateLimits:   simulator.RateLimitWorkload{Healthy: 5, NoExpire: 5},
		Locks:        simulator.LockWorkload{Healthy: 5, Zombie: 5},
		ListQueues:   simulator.ListQueueWorkload{Healthy: 5, NoConsumer: 5},
		StreamQueues: simulator.StreamQueueWorkload{Healthy: 5, Poison: 5},
	}
	users := func(o simulator.Options) []map[string]string {
		s := start(t, c, o)
		s.Stop()
		tr := s.Truth()
		return []map[string]string{tr.RateLimits.Users, tr.Locks.Users, tr.ListQueues.Users, tr.StreamQueues.Users}
	}
	a, b := users(o), users(o)
	o.Seed = 10
	other := users(o)
	for i := range a {
		if !maps.Equal(a[i], b[i]) || len(a[i]) != 10 {
			t.Errorf("kind %d: same seed, users %v then %v", i, a[i], b[i])
		}
		if maps.Equal(a[i], other[i]) {
			t.Errorf("kind %d: another seed, same users %v", i, a[i])
		}
	}
	if maps.Equal(a[0], a[1]) {
		t.Error("rate limits and locks drew the same users")
	}
	if s := start(t, c, simulator.Options{Users: 5, RateLimits: simulator.RateLimitWorkload{Healthy: 1}}); s.Key("u1") == "" || s.RateKey("u1") != "rl:api:{u1}" ||
		s.LockKey("u1") != "" || s.QueueKey("u1") != "" || s.StreamKey("u1") != "" {
		t.Errorf("keys: %q %q %q %q", s.RateKey("u1"), s.LockKey("u1"), s.QueueKey("u1"), s.StreamKey("u1"))
	}
}

func TestRecipeOptionsValidation(t *testing.T) {
	srv := redistest.Start(t)
	c := client(t, srv)
	for name, o := range map[string]simulator.Options{
		"negative count":         {RateLimits: simulator.RateLimitWorkload{Healthy: -1}},
		"more actors than users": {Users: 3, Locks: simulator.LockWorkload{Healthy: 2, Zombie: 2}},
		"negative window":        {RateLimits: simulator.RateLimitWorkload{Healthy: 1, Window: -time.Second}},
		"sub-ms window":          {RateLimits: simulator.RateLimitWorkload{Healthy: 1, Window: time.Microsecond}},
		"healthy hold zombie":    {Locks: simulator.LockWorkload{Healthy: 1, Hold: time.Minute, MaxHold: time.Minute}},
		"tiny lock ttl":          {Locks: simulator.LockWorkload{Healthy: 1, TTL: time.Millisecond}},
		"max wait too short":     {ListQueues: simulator.ListQueueWorkload{Healthy: 1, Process: time.Second, MaxWait: time.Second}},
		"min idle too short":     {StreamQueues: simulator.StreamQueueWorkload{Healthy: 1, Process: time.Second, MinIdle: time.Second}},
		"max hold too short":     {StreamQueues: simulator.StreamQueueWorkload{Poison: 1, MaxHold: 2 * time.Second}},
		"negative deliveries":    {StreamQueues: simulator.StreamQueueWorkload{Poison: 1, MaxDeliveries: -1}},
	} {
		if _, err := simulator.Run(context.Background(), c, o); err == nil {
			t.Errorf("%s: no error", name)
		} else if !strings.HasPrefix(err.Error(), "simulator: ") {
			t.Errorf("%s: error %q", name, err)
		}
	}
	s := start(t, c, simulator.Options{Users: 10, NoSlotStreams: true,
		Locks: simulator.LockWorkload{Zombie: 1}, StreamQueues: simulator.StreamQueueWorkload{Lagging: 1}})
	s.Stop()
	got := s.Options()
	if got.Locks.TTL != simulator.DefaultLockTTL || got.Locks.MaxHold != 10*simulator.DefaultLockTTL || got.Locks.Prefix != "lock:job:" ||
		got.StreamQueues.Group != "workers" || got.StreamQueues.MaxDeliveries != 5 || got.RateLimits.Prefix != "" {
		t.Errorf("defaults: %+v %+v", got.Locks, got.StreamQueues)
	}
	tr := s.Truth()
	if tr.RateLimits != nil || tr.ListQueues != nil || tr.Locks == nil || tr.StreamQueues == nil || tr.Acquired != 0 {
		t.Errorf("truth of workloads that are off: %+v", tr)
	}
}
