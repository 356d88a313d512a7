package simulator_test

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/simulator"
)

// The exporter's --demo runs the simulator on miniredis, an in-process
// Redis. This test is not about Redis (the others run a real redis-server):
// it pins down which parts of the recipes miniredis serves as Redis does,
// and which it does not, so that the demo's figures are understood.
func TestRecipesOnMiniredis(t *testing.T) {
	mr := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr(), DisableIdentity: true})
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	// miniredis expires keys only when its clock is moved: keep it in step
	// with real time, as the demo does.
	stop := make(chan struct{})
	ticked := make(chan struct{})
	go func() {
		defer close(ticked)
		last := time.Now()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case now := <-tick.C:
				mr.FastForward(now.Sub(last))
				last = now
			}
		}
	}()
	s := start(t, c, simulator.Options{
		Users: 30, NoSlotStreams: true, Seed: 11,
		RateLimits: simulator.RateLimitWorkload{Limit: 5, Window: 10 * time.Second, HitInterval: 30 * time.Millisecond,
			Healthy: 2, NoExpire: 1, ExpireEveryHit: 1, MillisAsSeconds: 1},
		Locks: simulator.LockWorkload{TTL: time.Second, Hold: 200 * time.Millisecond, Idle: 50 * time.Millisecond,
			Healthy: 2, NoTTL: 1, Zombie: 1, WrongUnit: 1},
		ListQueues: simulator.ListQueueWorkload{PushInterval: 50 * time.Millisecond, Process: 20 * time.Millisecond,
			MaxWait: 500 * time.Millisecond, RestartDelay: 50 * time.Millisecond, Healthy: 1, NoConsumer: 1, KilledWorker: 1},
		StreamQueues: simulator.StreamQueueWorkload{AddInterval: 50 * time.Millisecond, Process: 20 * time.Millisecond,
			MinIdle: 150 * time.Millisecond, RestartDelay: 30 * time.Millisecond, MaxHold: 600 * time.Millisecond, MaxDeliveries: 3,
			Healthy: 1, DeadConsumer: 1, Poison: 1, Lagging: 1},
	})
	// Until each actor has done what the checks below look for: how long
	// that takes depends on the machine.
	exportertest.WaitFor(t, 2*time.Minute, "every actor's events", func() bool {
		tr := s.Truth()
		r, l, q, st := tr.RateLimits, tr.Locks, tr.ListQueues, tr.StreamQueues
		return r.Refused > 0 && l.Released > 0 && q.Completed > 0 && q.Orphaned >= 1 &&
			st.ConsumersDead >= 1 && st.PendingStuck >= 1 && st.Redelivered >= 1
	})
	s.Pause()
	close(stop)
	<-ticked // miniredis's clock stands still from here: nothing expires during the reads
	tr := s.Truth()
	if tr.Errors != 0 {
		t.Fatalf("%d errors: miniredis refused a command", tr.Errors)
	}

	// Rate limits: the script, INCR, PEXPIRE and PTTL.
	r := tr.RateLimits
	for u := range r.Users {
		v, err := c.Get(ctx, s.RateKey(u)).Int64()
		if errors.Is(err, redis.Nil) {
			v = 0
		}
		if v != r.Used[u] {
			t.Errorf("rate %s (%s): %d, truth %d", u, r.Users[u], v, r.Used[u])
		}
		_, noTTL := r.NoTTLUsers[u]
		if p := c.PTTL(ctx, s.RateKey(u)).Val(); v > 0 && noTTL != (p == -1) {
			t.Errorf("rate %s: PTTL %v, truth without TTL %v", u, p, noTTL)
		}
	}
	if r.KeysWithoutTTL != 1 || r.KeysTTLBeyondWindow != 1 || r.Refused == 0 {
		t.Errorf("rate truth %+v", r)
	}

	// Locks: SET NX PX, the token-checked scripts.
	l := tr.Locks
	held := map[string]int64{}
	for u := range l.Users {
		if c.Exists(ctx, s.LockKey(u)).Val() == 1 {
			held[u] = 1
		}
	}
	if !maps.Equal(held, l.Used) || l.Released == 0 || l.WithoutTTL != 1 {
		t.Errorf("locks in miniredis %v; truth %+v", held, l)
	}

	// Lists: BLMOVE with a fractional timeout, LREM in a script.
	q := tr.ListQueues
	for u := range q.Users {
		if n := c.LLen(ctx, s.QueueKey(u)).Val(); n != q.Used[u] {
			t.Errorf("queue %s: %d, truth %d", u, n, q.Used[u])
		}
		if n := c.LLen(ctx, s.ProcessingKey(u)).Val(); n != q.ProcessingUsed[u] {
			t.Errorf("processing %s: %d, truth %d", u, n, q.ProcessingUsed[u])
		}
	}
	if q.Completed == 0 || q.Orphaned != 1 {
		t.Errorf("list truth %+v", q)
	}

	// Streams: XADD, XGROUP CREATE MKSTREAM, XREADGROUP, XACK, XAUTOCLAIM
	// and XPENDING (summary, extended, IDLE) as Redis has them.
	st := tr.StreamQueues
	idleBeyond := map[string]int64{}
	for u, mode := range st.Users {
		key := s.StreamKey(u)
		ps, err := c.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: key, Group: "workers", Start: "-", End: "+", Count: 100}).Result()
		if err != nil {
			t.Fatal(err)
		}
		var maxDel int64
		for _, p := range ps {
			maxDel = max(maxDel, p.RetryCount)
		}
		if int64(len(ps)) != st.Used[u] || maxDel != st.MaxDeliveriesByUser[u] {
			t.Errorf("stream %s (%s): %d pending, max deliveries %d; truth %d, %d", u, mode, len(ps), maxDel, st.Used[u], st.MaxDeliveriesByUser[u])
		}
		idle, err := c.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: key, Group: "workers", Idle: 600 * time.Millisecond, Start: "-", End: "+", Count: 100}).Result()
		if err != nil {
			t.Fatal(err)
		}
		idleBeyond[u] = int64(len(idle))
		groups, err := c.XInfoGroups(ctx, key).Result()
		if err != nil || len(groups) != 1 || groups[0].Pending != st.Used[u] {
			t.Fatalf("stream %s: XINFO GROUPS %+v %v", u, groups, err)
		}
		// Where miniredis differs from Redis: XINFO GROUPS reports the
		// stream's length as lag, and XINFO CONSUMERS knows no idle time
		// for consumers that only XREADGROUP and XAUTOCLAIM (-1).
		if xlen := c.XLen(ctx, key).Val(); groups[0].Lag != xlen {
			t.Logf("miniredis now reports XINFO GROUPS lag %d (XLEN %d, truth %d): update the demo notes", groups[0].Lag, xlen, st.LagUsers[u])
		}
		cs, err := c.XInfoConsumers(ctx, key, "workers").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, cons := range cs {
			if cons.Idle >= 0 {
				t.Logf("miniredis now reports consumer idle %v for %s/%s: update the demo notes", cons.Idle, key, cons.Name)
			}
		}
	}
	// Entries go on idling while the checks run: the truth before them
	// bounds what XPENDING IDLE lists from below, the truth after them
	// from above.
	after := s.Truth().StreamQueues
	for u, n := range idleBeyond {
		if lo, hi := st.StuckUsers[u]-st.StuckUnsureUsers[u], after.StuckUsers[u]; n < lo || n > hi {
			t.Errorf("stream %s: XPENDING IDLE lists %d, truth stuck %d to %d", u, n, lo, hi)
		}
	}
	if st.ConsumersDead != 1 || st.PendingStuck != 1 || st.Redelivered != 1 {
		t.Errorf("stream truth %+v", st)
	}
}
