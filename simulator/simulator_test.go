package simulator_test

import (
	"context"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/redistest"
	"github.com/slotexporter/slot_exporter/simulator"
)

func client(t *testing.T, srv *redistest.Server) *redis.Client {
	// Fail fast while Redis is down (the restart test).
	c := redis.NewClient(&redis.Options{
		Addr: srv.Addr, DisableIdentity: true,
		MaxRetries: 1, DialTimeout: 300 * time.Millisecond, DialerRetries: 1, DialerRetryTimeout: 10 * time.Millisecond,
	})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func start(t *testing.T, c redis.UniversalClient, o simulator.Options) *simulator.Sim {
	t.Helper()
	s, err := simulator.Run(context.Background(), c, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

func keys(t *testing.T, c *redis.Client, match string) []string {
	t.Helper()
	var out []string
	iter := c.Scan(context.Background(), 0, match, 1000).Iterator()
	for iter.Next(context.Background()) {
		out = append(out, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// members returns key + " " + id -> score for every slot-set member.
func members(t *testing.T, c *redis.Client, prefix string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, k := range keys(t, c, prefix+"*") {
		zs, err := c.ZRangeWithScores(context.Background(), k, 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, z := range zs {
			out[k+" "+z.Member.(string)] = z.Score
		}
	}
	return out
}

// counterSum returns the legacy counters by user and their sum.
func counters(t *testing.T, c *redis.Client, prefix string) (map[string]int64, int64) {
	t.Helper()
	re := regexp.MustCompile(`^` + regexp.QuoteMeta(prefix) + `\{(u\d+)\}$`)
	by := map[string]int64{}
	var sum int64
	for _, k := range keys(t, c, prefix+"*") {
		m := re.FindStringSubmatch(k)
		if m == nil {
			t.Fatalf("counter key %q has the wrong shape", k)
		}
		v, err := c.Get(context.Background(), k).Int64()
		if err != nil {
			t.Fatalf("counter %s: %v", k, err)
		}
		by[m[1]] = v
		sum += v
	}
	return by, sum
}

func TestShapesAndGroundTruth(t *testing.T) {
	srv := redistest.Start(t)
	c := client(t, srv)
	ctx := context.Background()
	o := simulator.Options{
		Users: 30, FreeShare: 0.5,
		KeyPrefix: "t:streams:", CounterPrefix: "t:legacy:",
		StreamRate: 150, StreamDuration: 400 * time.Millisecond,
		TTL: 2 * time.Second, HeartbeatInterval: 100 * time.Millisecond,
		CrashRate: 0.1, ZombieRate: 0.1, FutureRate: 0.1, CounterLeakRate: 0.2,
		Seed: 7,
	}
	s := start(t, c, o)
	// Until every kind of event has happened at least once: how long
	// that takes depends on the machine, not on the simulator.
	truthCounts := func(tr simulator.Truth) map[string]int64 {
		return map[string]int64{
			"acquired": tr.Acquired, "released": tr.Released, "denied": tr.Denied, "crashed": tr.Crashed,
			"zombies": tr.Zombies, "future": tr.Future, "counters_leaked": tr.CountersLeaked, "heartbeats": tr.Heartbeats,
		}
	}
	exportertest.WaitFor(t, 2*time.Minute, "every kind of ground-truth event", func() bool {
		return !slices.Contains(slices.Collect(maps.Values(truthCounts(s.Truth()))), 0)
	})
	s.Stop()
	stopped := time.Now()
	tr := s.Truth()
	slots := s.Slots()
	t.Logf("truth: %+v", tr)

	if tr.Errors != 0 {
		t.Fatalf("%d Redis errors", tr.Errors)
	}
	for name, v := range truthCounts(tr) {
		if v == 0 {
			t.Errorf("truth %s is 0", name)
		}
	}
	if tr.Started != tr.Acquired+tr.Denied+tr.AcquireErrors {
		t.Errorf("started %d != acquired %d + denied %d + errors %d", tr.Started, tr.Acquired, tr.Denied, tr.AcquireErrors)
	}
	if tr.ZombiesActive != tr.Zombies || int64(len(tr.ZombieUsers)) == 0 {
		t.Errorf("zombies %d active %d users %v", tr.Zombies, tr.ZombiesActive, tr.ZombieUsers)
	}

	// Every key has one of the two shapes.
	all := keys(t, c, "*")
	slotRe := regexp.MustCompile(`^t:streams:\{(u\d+)\}$`)
	counterRe := regexp.MustCompile(`^t:legacy:\{(u\d+)\}$`)
	nowMs := float64(time.Now().UnixMilli())
	futureInRedis := 0
	for _, k := range all {
		typ, _ := c.Type(ctx, k).Result()
		switch {
		case slotRe.MatchString(k):
			if typ != "zset" {
				t.Fatalf("%s is a %s", k, typ)
			}
			user := slotRe.FindStringSubmatch(k)[1]
			if n, _ := c.ZCard(ctx, k).Result(); n > int64(s.UserLimit(user)) {
				t.Errorf("%s holds %d slots, limit %d", k, n, s.UserLimit(user))
			}
			if p, _ := c.PTTL(ctx, k).Result(); p <= 0 || p > 2*o.TTL {
				t.Errorf("%s PTTL %v", k, p)
			}
			zs, _ := c.ZRangeWithScores(ctx, k, 0, -1).Result()
			for _, z := range zs {
				id := z.Member.(string)
				if !regexp.MustCompile(`^st-[0-9a-z]+-\d+$`).MatchString(id) {
					t.Errorf("member id %q", id)
				}
				switch {
				case z.Score > 1e15: // microseconds: the unit bug
					futureInRedis++
				case z.Score > nowMs+float64(o.TTL.Milliseconds()) || z.Score < nowMs-10_000:
					t.Errorf("%s %s: score %v is neither an expiry near now (%v) nor a unit bug", k, id, z.Score, nowMs)
				}
			}
		case counterRe.MatchString(k):
			if typ != "string" {
				t.Fatalf("%s is a %s", k, typ)
			}
			if v, err := c.Get(ctx, k).Int64(); err != nil || v < 0 {
				t.Errorf("counter %s = %v %v", k, v, err)
			}
		default:
			t.Errorf("unexpected key %q", k)
		}
	}
	if futureInRedis > int(tr.Future) {
		t.Errorf("%d future-scored members, truth says %d", futureInRedis, tr.Future)
	}

	// The simulator's slots are exactly the unexpired members in Redis.
	inRedis := members(t, c, "t:streams:")
	known := map[string]simulator.Slot{}
	for _, sl := range slots {
		known[sl.Key+" "+sl.ID] = sl
		if _, ok := inRedis[sl.Key+" "+sl.ID]; !ok {
			t.Errorf("slot %+v missing from Redis", sl)
		}
	}
	cut := float64(stopped.UnixMilli()) + 50
	for m, sc := range inRedis {
		sl, ok := known[m]
		if sc > cut && !ok {
			t.Errorf("member %s (score %v) unknown to the simulator", m, sc)
		}
		if ok && (sc > 1e15) != sl.Future {
			t.Errorf("member %s score %v, slot future=%v", m, sc, sl.Future)
		}
	}

	// Counters: every INCR not DECRed is a leak or still in flight.
	by, sum := counters(t, c, "t:legacy:")
	if sum != tr.CountersLeaked+tr.CountersInFlight {
		t.Errorf("counters sum to %d, truth leaked %d + in flight %d", sum, tr.CountersLeaked, tr.CountersInFlight)
	}
	want := map[string]int64{}
	for u, n := range tr.LeakedUsers {
		want[u] += n
	}
	for _, sl := range slots {
		if sl.State == simulator.StateLive && sl.Counter {
			want[sl.User]++
		}
	}
	for _, u := range s.Users() {
		if by[u] != want[u] {
			t.Errorf("counter of %s = %d, want %d", u, by[u], want[u])
		}
	}
}

func TestKillShareFreezesExactlyN(t *testing.T) {
	srv := redistest.Start(t)
	c := client(t, srv)
	o := simulator.Options{
		Users: 50, Limit: 3, KeyPrefix: "k:",
		StreamRate: 300, StreamDuration: 20 * time.Second,
		TTL: 10 * time.Second, HeartbeatInterval: 100 * time.Millisecond,
		Seed: 3,
	}
	s := start(t, c, o)
	exportertest.WaitFor(t, 5*time.Second, "streams in flight", func() bool { return s.Truth().InFlight >= 60 })
	before := s.Truth()
	n := s.KillShare(0.5)
	after := s.Truth()
	if n < 25 || after.Killed != int64(n) || int64(len(after.KilledUsers)) == 0 {
		t.Fatalf("killed %d; truth killed %d, users %v", n, after.Killed, after.KilledUsers)
	}
	if after.InFlight > before.InFlight-int64(n)+20 { // a few may start in between
		t.Fatalf("in flight %d -> %d after killing %d", before.InFlight, after.InFlight, n)
	}
	killed := map[string]bool{}
	for _, sl := range s.Slots() {
		if sl.State == simulator.StateKilled {
			killed[sl.Key+" "+sl.ID] = true
		}
	}
	if len(killed) != n {
		t.Fatalf("Slots lists %d killed, KillShare said %d", len(killed), n)
	}

	s1 := members(t, c, "k:")
	time.Sleep(time.Second) // 10 heartbeat intervals: room for a loaded machine
	s2 := members(t, c, "k:")
	frozen := 0
	for m, sc := range s1 {
		sc2, ok := s2[m]
		if !ok {
			t.Errorf("member %s vanished", m) // streams last >= 10s, ttl 10s
			continue
		}
		switch {
		case sc2 == sc:
			frozen++
			if !killed[m] {
				t.Errorf("member %s stopped advancing but was not killed", m)
			}
		case killed[m]:
			t.Errorf("killed member %s still advances", m)
		}
	}
	if frozen != n {
		t.Fatalf("%d members stopped advancing, want %d", frozen, n)
	}
}

func TestZombiesKeepAdvancingUntilStop(t *testing.T) {
	srv := redistest.Start(t)
	c := client(t, srv)
	o := simulator.Options{
		Users: 5, Limit: 3, KeyPrefix: "z:", CounterPrefix: "zl:",
		StreamRate: 50, StreamDuration: 200 * time.Millisecond,
		TTL: time.Second, HeartbeatInterval: 50 * time.Millisecond,
		ZombieRate: 1, Seed: 5,
	}
	s := start(t, c, o)
	// Zombies never release: every user ends up with 3 zombie slots and
	// every later acquire is denied.
	exportertest.WaitFor(t, 5*time.Second, "all slots held by zombies", func() bool {
		tr := s.Truth()
		return tr.ZombiesActive == 15 && tr.InFlight == 0
	})
	zombies := map[string]bool{}
	for _, sl := range s.Slots() {
		if sl.State != simulator.StateZombie {
			t.Fatalf("slot %+v is not a zombie", sl)
		}
		zombies[sl.Key+" "+sl.ID] = true
	}
	s1 := members(t, c, "z:")
	time.Sleep(1200 * time.Millisecond) // longer than ttl: zombies outlive it
	s2 := members(t, c, "z:")
	if len(s1) != 15 || len(s2) != 15 {
		t.Fatalf("members %d then %d, want 15", len(s1), len(s2))
	}
	for m, sc := range s1 {
		if !zombies[m] {
			t.Errorf("member %s is not a known zombie", m)
		}
		if s2[m] <= sc {
			t.Errorf("zombie %s did not advance: %v -> %v", m, sc, s2[m])
		}
	}
	tr := s.Truth()
	if tr.Denied == 0 || tr.Released != 0 || tr.Zombies != 15 {
		t.Fatalf("truth %+v", tr)
	}
	// Zombies DECR their counter (the stream's finally ran); only the slot leaks.
	if _, sum := counters(t, c, "zl:"); sum != 0 || tr.CountersLeaked != 0 {
		t.Fatalf("counters sum %d, leaked %d", sum, tr.CountersLeaked)
	}

	s.Stop()
	s3 := members(t, c, "z:")
	time.Sleep(200 * time.Millisecond)
	s4 := members(t, c, "z:")
	for m, sc := range s3 {
		if s4[m] != sc {
			t.Errorf("zombie %s advanced after Stop", m)
		}
	}
}

func TestNoRefreshLosesSlots(t *testing.T) {
	srv := redistest.Start(t)
	c := client(t, srv)
	base := simulator.Options{
		Users: 5, Limit: 1,
		StreamRate: 50, StreamDuration: 4 * time.Second,
		TTL: 300 * time.Millisecond, HeartbeatInterval: 50 * time.Millisecond, // keys live 600ms
		Seed: 9,
	}
	bad := base
	bad.KeyPrefix, bad.NoRefreshRate = "bad:", 1
	good := base
	// Generous ttl: on a loaded machine a heartbeat round may run late,
	// and a late heartbeat legitimately loses its slot.
	good.KeyPrefix, good.TTL = "good:", 3*time.Second
	sb := start(t, c, bad)
	sg := start(t, c, good)
	exportertest.WaitFor(t, 10*time.Second, "slots lost under live streams", func() bool { return sb.Truth().Lost >= 5 })
	time.Sleep(200 * time.Millisecond)
	sb.Stop()
	sg.Stop()
	tb, tg := sb.Truth(), sg.Truth()
	if tb.NoRefresh != tb.Acquired || tg.NoRefresh != 0 {
		t.Fatalf("no-refresh counts: bad %d/%d good %d", tb.NoRefresh, tb.Acquired, tg.NoRefresh)
	}
	if tg.Lost != 0 {
		t.Fatalf("refreshing heartbeats lost %d slots", tg.Lost)
	}
	lost := 0
	for _, sl := range sb.Slots() {
		if sl.Lost {
			lost++
		}
	}
	if lost == 0 || len(tb.LostUsers) == 0 {
		t.Fatalf("no lost slots listed (truth lost %d)", tb.Lost)
	}
	// With limit 1, a lost slot lets the user start another stream: more
	// streams in flight than the cap allows.
	if tb.InFlight <= int64(bad.Users) {
		t.Fatalf("in flight %d, want above the cap of %d", tb.InFlight, bad.Users)
	}
	if tg.InFlight > int64(good.Users) {
		t.Fatalf("refreshing sim has %d in flight, cap %d", tg.InFlight, good.Users)
	}
}

func TestSurvivesRedisRestart(t *testing.T) {
	srv := redistest.Start(t)
	c := client(t, srv)
	o := simulator.Options{
		Users: 10, Limit: 3, KeyPrefix: "r:", CounterPrefix: "rl:",
		StreamRate: 100, StreamDuration: 300 * time.Millisecond,
		TTL: 2 * time.Second, HeartbeatInterval: 50 * time.Millisecond,
		Seed: 11,
	}
	s := start(t, c, o)
	exportertest.WaitFor(t, 5*time.Second, "acquires", func() bool { return s.Truth().Acquired >= 10 })
	srv.Kill()
	// An acquire refused by the outage, not just any error: a heartbeat
	// can fail first, and a restart right after it left no acquire
	// attempted while Redis was down (Errors 1, AcquireErrors 0, once in
	// a loaded .ci/run).
	exportertest.WaitFor(t, 5*time.Second, "an acquire error during the outage", func() bool { return s.Truth().AcquireErrors > 0 })
	srv.Restart()
	mid := s.Truth()
	// go-redis fails fast for up to about a second after repeated dial
	// errors (its pool's dial circuit breaker), then recovers.
	exportertest.WaitFor(t, 10*time.Second, "acquires after restart", func() bool { return s.Truth().Acquired >= mid.Acquired+20 })
	if len(keys(t, c, "r:*")) == 0 {
		t.Fatal("no slot sets after restart")
	}
	if _, sum := counters(t, c, "rl:"); sum < 0 {
		t.Logf("counters sum to %d: DECRs of counters lost in the restart", sum)
	}
	s.Stop()
	if tr := s.Truth(); tr.AcquireErrors == 0 || tr.Started != tr.Acquired+tr.Denied+tr.AcquireErrors {
		t.Fatalf("truth after an outage: %+v", tr)
	}
}

func TestOptionsValidation(t *testing.T) {
	srv := redistest.Start(t)
	c := client(t, srv)
	for i, o := range []simulator.Options{
		{CrashRate: 1.5},
		{CrashRate: 0.6, ZombieRate: 0.6},
		{StreamRate: -1},
		{TTL: time.Second, HeartbeatInterval: 2 * time.Second},
		{Users: -1},
	} {
		if _, err := simulator.Run(context.Background(), c, o); err == nil {
			t.Errorf("options %d: no error", i)
		}
	}
	s, err := simulator.Run(context.Background(), c, simulator.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	got := s.Options()
	if got.Users != simulator.DefaultUsers || got.TTL != 120*time.Second || got.HeartbeatInterval != 20*time.Second ||
		got.KeyPrefix != "joishi:streams:" || got.CounterPrefix != "" {
		t.Fatalf("defaults: %+v", got)
	}
	if s.Key("u17") != "joishi:streams:{u17}" || s.CounterKey("u17") != "" {
		t.Fatalf("key %q counter key %q", s.Key("u17"), s.CounterKey("u17"))
	}
	if l := s.UserLimit("u" + strconv.Itoa(simulator.DefaultUsers-1)); l != simulator.PaidLimit {
		t.Fatalf("limit %d with FreeShare 0", l)
	}
}

func TestContextCancelStops(t *testing.T) {
	srv := redistest.Start(t)
	c := client(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	s, err := simulator.Run(ctx, c, simulator.Options{Users: 3, StreamRate: 100, StreamDuration: time.Second, TTL: time.Second, HeartbeatInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	cancel()
	done := make(chan struct{})
	go func() { s.Stop(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("Stop hung after ctx cancel")
	}
	a := s.Truth().Acquired
	time.Sleep(100 * time.Millisecond)
	if s.Truth().Acquired != a {
		t.Fatal("acquires after stop")
	}
}
