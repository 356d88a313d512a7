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

// The BullMQ/Bull layout written by hand as the frameworks write it (the
// real ones drive examples/libraries), with one queue per case:
//   - healthy: two waiting, one started by a live worker (its lock held),
//     one delayed due in an hour;
//   - dead: three waiting and three started by a worker that died (no
//     lock): orphaned;
//   - stuck: one started two hours ago whose lock is still renewed;
//   - late: two delayed jobs due ten minutes ago (overdue: no worker
//     promotes them) and one due in an hour;
//   - bad: active ids whose job hash is missing (bad_value from the
//     second sweep on: missing once, a job may have ended between the
//     two rounds of reads), is a string
//     (wrong_type), whose lock is a list (wrong_type), and one orphan;
//   - a discovery key that is a hash (a job whose id ends in ":id"):
//     wrong_type.
//
// A second family watches only the queue "dead".
func TestBullMQLayout(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rc := srv.Client()
	ctx := context.Background()
	logs := exportertest.NewLogs()
	h := exportertest.New(t, rc, config(srv.Addr, "1s", 100, `
  - name: jobs
    kind: bullmq
    max_wait: 5m
    max_hold: 1h
  - name: only_dead
    kind: bullmq
    queues: [dead]
`), logs.Logger())
	now := exportertest.RedisTime(t, rc)
	pipe := rc.Pipeline()
	job := func(q, id string, fields ...any) {
		pipe.HSet(ctx, "bull:"+q+":"+id, append([]any{"name", "send-" + q, "timestamp", now - 60_000}, fields...)...)
	}
	delayed := func(q, id string, due int64, counter int64) {
		pipe.ZAdd(ctx, "bull:"+q+":delayed", redis.Z{Score: float64(due*0x1000 + counter), Member: id})
		job(q, id, "delay", due-now)
	}
	for _, q := range []string{"healthy", "dead", "stuck", "late", "bad"} {
		pipe.Set(ctx, "bull:"+q+":id", 9, 0)
	}
	// healthy
	pipe.LPush(ctx, "bull:healthy:wait", "2", "3")
	job("healthy", "2", "timestamp", now-30_000)
	job("healthy", "3", "timestamp", now-10_000)
	pipe.LPush(ctx, "bull:healthy:active", "1")
	job("healthy", "1", "processedOn", now-5_000, "atm", 0)
	pipe.Set(ctx, "bull:healthy:1:lock", "token", time.Minute)
	delayed("healthy", "4", now+3_600_000, 1)
	// dead
	pipe.LPush(ctx, "bull:dead:wait", "4", "5", "6")
	for _, id := range []string{"4", "5", "6"} {
		job("dead", id)
	}
	pipe.LPush(ctx, "bull:dead:active", "1", "2", "3")
	for i, id := range []string{"1", "2", "3"} {
		job("dead", id, "processedOn", now-int64(40_000+i*1000), "atm", 1)
	}
	// stuck
	pipe.LPush(ctx, "bull:stuck:active", "1")
	job("stuck", "1", "processedOn", now-2*3_600_000)
	pipe.Set(ctx, "bull:stuck:1:lock", "token", time.Minute)
	// late
	delayed("late", "1", now-600_000, 1)
	delayed("late", "2", now-600_000, 2)
	delayed("late", "3", now+3_600_000, 3)
	// bad
	pipe.LPush(ctx, "bull:bad:active", "1", "2", "3", "4")
	pipe.Set(ctx, "bull:bad:2", "not a hash", 0)
	job("bad", "3", "processedOn", now-1000)
	pipe.RPush(ctx, "bull:bad:3:lock", "not a lock")
	job("bad", "4", "processedOn", now-20_000, "attemptsMade", 2)
	pipe.HSet(ctx, "bull:bad:x:id", "name", "a job whose id ends in :id")
	_, err := pipe.Exec(ctx)
	exportertest.Must(t, err)

	s := newSteps(t, rc, h)
	exportertest.Must(t, rc.ConfigResetStat(ctx).Err())
	s.sweep()
	checkReads(t, rc, "bullmq", []string{"get", "hmget", "lindex", "llen", "lrange", "zcard", "zcount"})
	m := h.Metrics()
	jobs := func(fam, state string) string {
		return fmt.Sprintf(`slot_jobs{family=%q,state=%q}`, fam, state)
	}
	queue := func(q, state string) string {
		return fmt.Sprintf(`slot_queue_jobs{family="jobs",queue=%q,state=%q}`, q, state)
	}
	exportertest.Expect(t, m, map[string]float64{
		jobs("jobs", "waiting"):                         2 + 3,
		jobs("jobs", "active"):                          1,
		jobs("jobs", "orphaned"):                        3 + 1,
		jobs("jobs", "stuck"):                           1,
		jobs("jobs", "scheduled"):                       1 + 1,
		jobs("jobs", "overdue"):                         2,
		`slot_jobs_lost_total{family="jobs"}`:           0,
		`slot_sets{family="jobs"}`:                      5,
		`slot_users_active{family="jobs"}`:              2, // dead, bad
		`slot_user_used_max{family="jobs",user="dead"}`: 3,
		queue("dead", "orphaned"):                       3,
		queue("dead", "waiting"):                        3,
		queue("healthy", "waiting"):                     2,
		queue("healthy", "active"):                      1,
		queue("healthy", "scheduled"):                   1,
		queue("stuck", "stuck"):                         1,
		queue("late", "overdue"):                        2,
		queue("late", "scheduled"):                      1,
		queue("bad", "orphaned"):                        1,
		queue("bad", "active"):                          0,
		`slot_exporter_keys_skipped_total{family="jobs",reason="bad_value"}`:  0,
		`slot_exporter_keys_skipped_total{family="jobs",reason="wrong_type"}`: 3,
		jobs("only_dead", "orphaned"):                                         3,
		jobs("only_dead", "waiting"):                                          3,
		jobs("only_dead", "overdue"):                                          0,
		// Queues it does not watch are not read: nothing to skip.
		`slot_exporter_keys_skipped_total{family="only_dead",reason="wrong_type"}`: 0,
	})
	// Oldest waiting: dead's jobs, added 60 s before now (healthy's
	// oldest, 30 s); oldest orphaned: dead's job 3, started 42 s before.
	s.since(m, `slot_jobs_oldest_seconds{family="jobs",state="waiting"}`, now-60_000, 0)
	s.since(m, `slot_jobs_oldest_seconds{family="jobs",state="orphaned"}`, now-42_000, 0)
	absent(t, m, `slot_workers{family="jobs",state="live"}`, `slot_queue_jobs{family="only_dead",queue="healthy",state="waiting"}`)
	if got := users(m, "slot_user_used_max", "only_dead"); len(got) != 1 || !got["dead"] {
		t.Errorf("only_dead: queues with series %v, want only dead", got)
	}
	for _, key := range []string{"bull:bad:2", "bull:bad:3:lock"} {
		if n := len(logs.Lines("skipping bad bullmq data", "family=jobs", "key="+key)); n != 1 {
			t.Errorf("%s: logged %d times, want once:\n%s", key, n, logs.String())
		}
	}

	// Bad data is logged when it turns bad, not every sweep; it is
	// counted every sweep it is there.
	s.sweep()
	if n := len(logs.Lines("skipping bad bullmq data", "key=bull:bad:1")); n != 1 {
		t.Errorf("bull:bad:1 logged %d times after two sweeps, want once", n)
	}
	exportertest.Expect(t, h.Metrics(), map[string]float64{
		`slot_exporter_keys_skipped_total{family="jobs",reason="bad_value"}`:  1,
		`slot_exporter_keys_skipped_total{family="jobs",reason="wrong_type"}`: 6,
	})
}
