package simulator_test

import (
	"context"
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
			if n := c.LLen(ctx, s.ProcessingKey(u)).Val(); n > 0 {
				p[u] = n
				heads[u] = c.LIndex(ctx, s.ProcessingKey(u), -1).Val()
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
	t1, t2 := runPaused(t, s, 1500*time.Millisecond, func() {
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
	q, q2 := t1.StreamQueues, t2.StreamQueues
	var xlen int64
	for u, st := range got {
		xlen += st.xlen
		// Idle times grow while Redis is read: the truth before the reads
		// bounds Redis's verdicts from below, the truth after from above.
		if lo, hi := q.StuckUsers[u]-q.StuckUnsureUsers[u], q2.StuckUsers[u]; st.stuck < lo || st.stuck > hi {
			t.Errorf("%s (%s): Redis has %d entries stuck, truth %d to %d", u, q.Users[u], st.stuck, lo, hi)
		}
		if lo, hi := q.DeadConsumerUsers[u]-q.DeadUnsureUsers[u], q2.DeadConsumerUsers[u]; st.dead < lo || st.dead > hi {
			t.Errorf("%s (%s): Redis has %d consumers dead, truth %d to %d", u, q.Users[u], st.dead, lo, hi)
		}
		want := stream{
			pending: q.Used[u], lag: q.LagUsers[u], redelivered: q.RedeliveredUsers[u],
			maxDeliveries: q.MaxDeliveriesByUser[u], xlen: st.xlen, oldest: st.oldest,
		}
		if st.stuck, st.dead = 0, 0; st != want {
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
