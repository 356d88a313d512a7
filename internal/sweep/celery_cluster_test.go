package sweep_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/redisproc"
	"github.com/slotexporter/slot_exporter/internal/redistest"
	"github.com/slotexporter/slot_exporter/internal/topology"
)

// celeryQueueCase is one queue of the cluster test's Celery broker: its
// binding's exchange, and what the broker holds of it.
type celeryQueueCase struct {
	exchange, queue          string
	waiting, active, orphans int
}

// masterOf is the master that holds key now.
func masterOf(t *testing.T, cl *redistest.Cluster, cc *redis.ClusterClient, key string) *redistest.Server {
	t.Helper()
	c, err := cc.MasterForKey(context.Background(), key)
	if err != nil {
		t.Fatalf("master of %q: %v", key, err)
	}
	s := cl.Node(c.Options().Addr)
	if s == nil {
		t.Fatalf("master of %q: %s is no node of the cluster", key, c.Options().Addr)
	}
	return s
}

// celeryQueuesOn picks n queues whose binding key lives on master on,
// half of them with their lists on another master: kombu's keys carry no
// hash tag, so on a cluster a binding, its queue and unacked are on any
// masters.
func celeryQueuesOn(t *testing.T, cl *redistest.Cluster, cc *redis.ClusterClient, on *redistest.Server, n int) []celeryQueueCase {
	t.Helper()
	var out []celeryQueueCase
	away := 0
	for i := 0; len(out) < n && i < 10_000; i++ {
		ex := fmt.Sprintf("ex%d", i)
		if masterOf(t, cl, cc, "_kombu.binding."+ex) != on {
			continue
		}
		q := "q" + ex
		elsewhere := masterOf(t, cl, cc, q) != on
		if elsewhere && away >= n/2 || !elsewhere && len(out)-away >= n-n/2 {
			continue
		}
		if elsewhere {
			away++
		}
		k := len(out)
		out = append(out, celeryQueueCase{exchange: ex, queue: q, waiting: k + 1, active: 1, orphans: k + 1})
	}
	if len(out) < n {
		t.Fatalf("found %d of %d queues bound on %s", len(out), n, on.Addr)
	}
	return out
}

// writeCeleryBroker writes the queues as kombu does: a binding, the
// list, and the unacked messages with their index entries.
func writeCeleryBroker(t *testing.T, cc *redis.ClusterClient, qs []celeryQueueCase, now int64) {
	t.Helper()
	ctx := context.Background()
	msg := func(id, exchange, route string) string {
		return fmt.Sprintf(`[{"body": "e30=", "headers": {"id": %q, "task": "t", "retries": 0}, "properties": {}}, %q, %q]`, id, exchange, route)
	}
	for _, q := range qs {
		exportertest.Must(t, cc.SAdd(ctx, "_kombu.binding."+q.exchange, q.queue+"\x06\x16\x06\x16"+q.queue).Err())
		for i := range q.waiting {
			exportertest.Must(t, cc.LPush(ctx, q.queue, fmt.Sprintf("m%d", i)).Err())
		}
		for i := range q.active + q.orphans {
			tag := fmt.Sprintf("%s-%d", q.queue, i)
			at := now - 10_000
			if i >= q.active {
				at = now - 2*3_600_000
			}
			exportertest.Must(t, cc.HSet(ctx, "unacked", tag, msg(tag, q.exchange, q.queue)).Err())
			exportertest.Must(t, cc.ZAdd(ctx, "unacked_index", redis.Z{Score: float64(at) / 1000, Member: tag}).Err())
		}
	}
}

// expectCeleryFigures checks every figure the sweep published against
// what the broker holds.
func expectCeleryFigures(t *testing.T, what string, m map[string]float64, qs []celeryQueueCase) {
	t.Helper()
	want := map[string]float64{}
	var waiting, active, orphans int
	for _, q := range qs {
		waiting, active, orphans = waiting+q.waiting, active+q.active, orphans+q.orphans
		for state, n := range map[string]int{"waiting": q.waiting, "active": q.active, "orphaned": q.orphans} {
			want[fmt.Sprintf(`slot_queue_jobs{family="tasks",queue=%q,state=%q}`, q.queue, state)] = float64(n)
		}
	}
	for state, n := range map[string]int{"waiting": waiting, "active": active, "orphaned": orphans} {
		want[fmt.Sprintf(`slot_jobs{family="tasks",state=%q}`, state)] = float64(n)
	}
	want[`slot_exporter_keys_skipped_total{family="tasks",reason="bad_value"}`] = 0
	t.Run(what, func(t *testing.T) { exportertest.Expect(t, m, want) })
}

// TestClusterCeleryUnackedAwayFromBindings: kombu's keys carry no hash
// tag, so on a cluster unacked_index and unacked are on a master other
// than the bindings', and a queue's list on another than its binding's.
// Read through the bindings' node, they answer MOVED, and the bindings
// are read again through the cluster client: the unacked messages must
// be counted all the same, once, and each queue's waiting jobs too. Then
// unacked_index's slot migrates under a sweep (its key moved, the slot
// not yet handed over: ASK) and is handed over under the next.
func TestClusterCeleryUnackedAwayFromBindings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cl := redistest.StartCluster(t, 3, 0)
	cc := cl.Client()
	index, unacked := masterOf(t, cl, cc, "unacked_index"), masterOf(t, cl, cc, "unacked")
	var on *redistest.Server
	for _, m := range cl.Masters() {
		if m != index && (m != unacked || on == nil) {
			on = m
		}
	}
	qs := celeryQueuesOn(t, cl, cc, on, 4)
	writeCeleryBroker(t, cc, qs, redisTimeMs(t, cc))

	logs := exportertest.NewLogs()
	h := newConfiguredHarness(t, redisproc.Config{
		Redis:    clusterSection(cl, "primary"),
		Sampling: []string{"interval: 5s", "timeout: 20s", "scan_count: 50"},
		Families: []redisproc.Family{{Name: "tasks", Kind: "celery", Extra: []string{"visibility_timeout: 1h"}}},
	}.YAML(), logs)

	h.Sweep()
	expectCeleryFigures(t, "unacked on other masters", h.Metrics(), qs)
	h.Sweep()
	expectCeleryFigures(t, "unacked on other masters, again", h.Metrics(), qs)

	// Mid-sweep, once the sweep has listed the nodes: the index moves to
	// the bindings' master, its slot still the source's.
	slot := topology.HashSlot("unacked_index")
	step := func(ctx context.Context) error { return nil }
	h.Sweeper.AfterLostCheck(func() {
		if err := step(ctx); err != nil {
			t.Errorf("migration: %v", err)
		}
		step = func(context.Context) error { return nil }
	})
	step = func(ctx context.Context) error {
		if err := cl.BeginMigration(ctx, slot, index, on); err != nil {
			return err
		}
		_, err := cl.MoveKeys(ctx, slot, index, on, 0, 0)
		return err
	}
	h.Sweep()
	expectCeleryFigures(t, "index migrating", h.Metrics(), qs)
	step = func(ctx context.Context) error { return cl.FinishMigration(ctx, slot, index, on) }
	h.Sweep()
	cl.WaitHealthy(30 * time.Second)
	h.Sweep()
	expectCeleryFigures(t, "index moved", h.Metrics(), qs)
	if t.Failed() {
		t.Logf("logs:\n%s", logs.String())
	}
}
