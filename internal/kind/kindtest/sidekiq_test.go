package kindtest

import (
	"context"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/redistest"
)

// TestSidekiqLayout: the layout as Sidekiq 6.4.1 writes it, under a
// redis-namespace namespace, written by hand so that each state shows at
// once (examples/frameworks runs the real Sidekiq): a process with a job in
// hand and one stuck; a job lost when its process's hashes vanish; a dead
// process; overdue scheduled and retried jobs; bad data skipped, counted
// and logged once.
func TestSidekiqLayout(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rc := srv.Client()
	ctx := context.Background()
	logs := exportertest.NewLogs()
	h := exportertest.New(t, rc, config(srv.Addr, "1s", 100, `
  - name: sk
    kind: sidekiq
    prefix: app
    max_wait: 5m
    max_hold: 1h
  - name: sk_other
    kind: sidekiq
    prefix: app
    queues: [other]
`), logs.Logger())
	now := exportertest.RedisTime(t, rc)
	sec := func(ms int64) string { return fmt.Sprintf("%d.%03d", ms/1000, ms%1000) }
	work := func(q, jid string, runAt int64) string {
		payload := fmt.Sprintf(`{"queue":%q,"class":"MailJob","jid":%q,"enqueued_at":%s}`, q, jid, sec(runAt-1000))
		return fmt.Sprintf(`{"queue":%q,"payload":%q,"run_at":%d}`, q, payload, runAt/1000)
	}
	live, dying, dead := "web:1:aaa", "web:2:bbb", "web:3:ccc"
	pipe := rc.Pipeline()
	pipe.SAdd(ctx, "app:queues", "mail", "empty")
	pipe.LPush(ctx, "app:queue:mail", fmt.Sprintf(`{"jid":"w1","enqueued_at":%s}`, sec(now-30_000)), fmt.Sprintf(`{"jid":"w2","enqueued_at":%s}`, sec(now-10_000)))
	pipe.SAdd(ctx, "app:processes", live, dying, dead)
	pipe.HSet(ctx, "app:"+live, "beat", sec(now-1000), "busy", 3)
	pipe.HSet(ctx, "app:"+live+":workers", "t1", work("mail", "a1", now-5000), "t2", work("mail", "s1", now-2*3_600_000), "t3", `{"queue":"mail","payload":"{not json"}`)
	pipe.HSet(ctx, "app:"+dying, "beat", sec(now-2000), "busy", 2)
	pipe.HSet(ctx, "app:"+dying+":workers", "t1", work("mail", "l1", now-20_000), "t2", work("mail", "l2", now-10_000))
	pipe.ZAdd(ctx, "app:schedule", redis.Z{Score: float64(now-600_000) / 1000, Member: `{"queue":"mail","jid":"o1"}`}, redis.Z{Score: float64(now+600_000) / 1000, Member: `{"queue":"mail","jid":"f1"}`})
	pipe.ZAdd(ctx, "app:retry", redis.Z{Score: float64(now-900_000) / 1000, Member: `{"queue":"mail","jid":"o2","retry_count":1}`})
	_, err := pipe.Exec(ctx)
	exportertest.Must(t, err)

	s := newSteps(t, rc, h)
	exportertest.Must(t, rc.ConfigResetStat(ctx).Err())
	s.sweep()
	// Its queues are in one key: read by name, with no SCAN of the keyspace.
	if st := checkReads(t, rc, "sidekiq", []string{"hget", "hgetall", "lindex", "llen", "smembers", "zcard", "zcount", "zrange"}); st["scan"].Calls != 0 {
		t.Errorf("sidekiq: %d SCANs to find one key", st["scan"].Calls)
	}
	m := h.Metrics()
	jobs := func(state string) string { return fmt.Sprintf(`slot_jobs{family="sk",state=%q}`, state) }
	exportertest.Expect(t, m, map[string]float64{
		jobs("waiting"):                          2,
		jobs("active"):                           1 + 2,
		jobs("stuck"):                            1,
		jobs("orphaned"):                         0,
		jobs("scheduled"):                        1,
		jobs("overdue"):                          2,
		`slot_workers{family="sk",state="live"}`: 2,
		`slot_workers{family="sk",state="dead"}`: 1,
		`slot_jobs_lost_total{family="sk"}`:      0,
		`slot_queue_jobs{family="sk",queue="mail",state="overdue"}`:         2,
		`slot_exporter_keys_skipped_total{family="sk",reason="bad_value"}`:  1,
		`slot_user_used_max{family="sk",user="mail"}`:                       0,
		`slot_queue_jobs{family="sk",queue="mail",state="stuck"}`:           1,
		`slot_exporter_keys_skipped_total{family="sk",reason="wrong_type"}`: 0,
		`slot_queue_jobs{family="sk",queue="mail",state="waiting"}`:         2,
		`slot_queue_jobs{family="sk",queue="mail",state="active"}`:          3,
	})
	s.since(m, `slot_jobs_oldest_seconds{family="sk",state="waiting"}`, now-30_000, 0)
	absent(t, m, `slot_queue_jobs{family="sk",queue="empty",state="waiting"}`)
	if n := len(logs.Lines("skipping bad sidekiq data", "family=sk ", "key=app:"+live+":workers", "thread t3")); n != 1 {
		t.Errorf("the bad work entry logged %d times, want once:\n%s", n, logs.String())
	}

	// The dying process's hashes expire (as 60 s after its last beat):
	// its 2 jobs in hand are lost, once; it is dead until pruned.
	exportertest.Must(t, rc.Del(ctx, "app:"+dying, "app:"+dying+":workers").Err())
	s.sweep()
	s.sweep()
	exportertest.Expect(t, h.Metrics(), map[string]float64{
		`slot_jobs_lost_total{family="sk"}`:       2,
		`slot_jobs_lost_total{family="sk_other"}`: 0, // lost from mail, not watched there
		jobs("active"):                           1,
		`slot_workers{family="sk",state="dead"}`: 2,
		`slot_workers{family="sk",state="live"}`: 1,
	})
	if n := len(logs.Lines("skipping bad sidekiq data", "family=sk ", "thread t3")); n != 1 {
		t.Errorf("the bad work entry logged %d times after three sweeps, want once", n)
	}

	// The live process beats again without a1 (it finished): not lost.
	exportertest.Must(t, rc.HDel(ctx, "app:"+live+":workers", "t1").Err())
	exportertest.Must(t, rc.HSet(ctx, "app:"+live, "beat", sec(now+4000)).Err())
	s.sweep()
	exportertest.Expect(t, h.Metrics(), map[string]float64{
		`slot_jobs_lost_total{family="sk"}`: 2,
		jobs("active"):                      0,
		jobs("stuck"):                       1,
	})
}
