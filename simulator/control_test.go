package simulator_test

import (
	"context"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/redistest"
	"github.com/slotexporter/slot_exporter/simulator"
)

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
	exportertest.WaitFor(t, time.Minute, "50 commands after Resume", func() bool { return processed()-b >= 50 })
	// Stop ends a pause.
	s.Pause()
	done := make(chan struct{})
	go func() { s.Stop(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
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
