package kindtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/redistest"
)

// TestRQLayout: the layout as RQ 1.13 writes it, written by hand so that
// each state shows at once (examples/frameworks runs the real RQ): jobs
// running, one stuck, one orphaned, overdue scheduled jobs, a dead
// worker, a family watching one queue, and bad data skipped, counted and
// logged once.
func TestRQLayout(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rc := srv.Client()
	ctx := context.Background()
	logs := exportertest.NewLogs()
	h := exportertest.New(t, rc, config(srv.Addr, "1s", 100, `
  - name: rq
    kind: rq
    max_wait: 5m
    max_hold: 1h
  - name: rq_mail
    kind: rq
    queues: [mail]
`), logs.Logger())
	now := exportertest.RedisTime(t, rc)
	iso := func(ms int64) string { return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000000Z") }
	score := func(ms int64) float64 { return float64(ms) / 1000 }
	pipe := rc.Pipeline()
	pipe.SAdd(ctx, "rq:queues", "rq:queue:default", "rq:queue:mail")
	pipe.RPush(ctx, "rq:queue:default", "w1", "w2")
	pipe.HSet(ctx, "rq:job:w1", "enqueued_at", iso(now-40_000), "status", "queued")
	pipe.HSet(ctx, "rq:job:w2", "enqueued_at", iso(now-5_000), "status", "queued")
	pipe.ZAdd(ctx, "rq:wip:default",
		redis.Z{Score: score(now + 80_000), Member: "a1"},
		redis.Z{Score: score(now + 80_000), Member: "s1"},
		redis.Z{Score: score(now - 30_000), Member: "o1"},
		redis.Z{Score: score(now - 10_000), Member: "bad"})
	pipe.HSet(ctx, "rq:job:a1", "description", "tasks.a()", "started_at", iso(now-10_000))
	pipe.HSet(ctx, "rq:job:s1", "description", "tasks.s()", "started_at", iso(now-2*3_600_000))
	pipe.HSet(ctx, "rq:job:o1", "description", "tasks.o()", "started_at", iso(now-120_000), "worker_name", "gone")
	pipe.Set(ctx, "rq:job:bad", "not a hash", 0)
	pipe.ZAdd(ctx, "rq:scheduled:mail", redis.Z{Score: score(now - 600_000), Member: "d1"}, redis.Z{Score: score(now + 600_000), Member: "d2"})
	pipe.SAdd(ctx, "rq:workers", "rq:worker:up", "rq:worker:gone")
	pipe.HSet(ctx, "rq:worker:up", "last_heartbeat", iso(now))
	_, err := pipe.Exec(ctx)
	exportertest.Must(t, err)

	s := newSteps(t, rc, h)
	exportertest.Must(t, rc.ConfigResetStat(ctx).Err())
	s.sweep()
	// Its queues are in one key: read by name, with no SCAN of the keyspace.
	if st := checkReads(t, rc, "rq", []string{"exists", "hget", "hmget", "lindex", "llen", "smembers", "zcard", "zcount", "zrange"}); st["scan"].Calls != 0 {
		t.Errorf("rq: %d SCANs to find one key", st["scan"].Calls)
	}
	m := h.Metrics()
	jobs := func(fam, state string) string { return fmt.Sprintf(`slot_jobs{family=%q,state=%q}`, fam, state) }
	exportertest.Expect(t, m, map[string]float64{
		jobs("rq", "waiting"):                                               2,
		jobs("rq", "active"):                                                1,
		jobs("rq", "stuck"):                                                 1,
		jobs("rq", "orphaned"):                                              1,
		jobs("rq", "scheduled"):                                             1,
		jobs("rq", "overdue"):                                               1,
		`slot_workers{family="rq",state="live"}`:                            1,
		`slot_workers{family="rq",state="dead"}`:                            1,
		`slot_jobs_lost_total{family="rq"}`:                                 0,
		`slot_users_active{family="rq"}`:                                    1,
		`slot_queue_jobs{family="rq",queue="default",state="orphaned"}`:     1,
		`slot_queue_jobs{family="rq",queue="mail",state="overdue"}`:         1,
		`slot_exporter_keys_skipped_total{family="rq",reason="wrong_type"}`: 1,
		jobs("rq_mail", "waiting"):                                          0,
		jobs("rq_mail", "overdue"):                                          1,
		`slot_workers{family="rq_mail",state="dead"}`:                       1,
	})
	s.since(m, `slot_jobs_oldest_seconds{family="rq",state="waiting"}`, now-40_000, 0)
	s.since(m, `slot_jobs_oldest_seconds{family="rq",state="orphaned"}`, now-120_000, 0)
	absent(t, m, `slot_queue_jobs{family="rq_mail",queue="default",state="orphaned"}`)
	s.sweep()
	if n := len(logs.Lines("skipping bad rq data", "family=rq", "key=rq:job:bad")); n != 1 {
		t.Errorf("rq:job:bad logged %d times after two sweeps, want once:\n%s", n, logs.String())
	}
}
