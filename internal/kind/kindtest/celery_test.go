package kindtest

import (
	"context"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/redistest"
)

// Celery's Redis broker written by hand as kombu 5.2 writes it (the real
// Celery drives examples/libraries): bindings name the queues, each queue
// is a list plus one per priority step, and unacked/unacked_index hold
// what workers took:
//   - reports: 2 waiting (one at priority 3), one unacked 10 s ago
//     (active), one unacked 2 h ago (orphaned: visibility_timeout 1h);
//   - mail: bound to the celery exchange under routing key "mail"; one
//     orphaned message;
//   - the pidbox and celeryev bindings are fanout: not queues;
//   - bad data: an index entry with no message, a message that is not
//     kombu's JSON, a binding member that is not three fields.
func TestCeleryLayout(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rc := srv.Client()
	ctx := context.Background()
	logs := exportertest.NewLogs()
	h := exportertest.New(t, rc, config(srv.Addr, "1s", 100, `
  - name: tasks
    kind: celery
    visibility_timeout: 1h
`), logs.Logger())
	now := exportertest.RedisTime(t, rc)
	msg := func(id, task, exchange, route string) string {
		return fmt.Sprintf(`[{"body": "e30=", "headers": {"id": %q, "task": %q, "retries": 1}, "properties": {}}, %q, %q]`, id, task, exchange, route)
	}
	sec := func(ms int64) float64 { return float64(ms) / 1000 }
	pipe := rc.Pipeline()
	pipe.SAdd(ctx, "_kombu.binding.reports", "reports\x06\x16\x06\x16reports", "broken-member")
	pipe.SAdd(ctx, "_kombu.binding.celery", "mail\x06\x16\x06\x16mail")
	pipe.SAdd(ctx, "_kombu.binding.celery.pidbox", "\x06\x16\x06\x16worker1.celery.pidbox")
	pipe.SAdd(ctx, "_kombu.binding.celeryev", "worker.#\x06\x16\x06\x16celeryev.abc")
	pipe.LPush(ctx, "reports", "m1")
	pipe.LPush(ctx, "reports\x06\x163", "m2")
	pipe.ZAdd(ctx, "unacked_index",
		redis.Z{Score: sec(now - 10_000), Member: "t-active"},
		redis.Z{Score: sec(now - 7_200_000), Member: "t-orphan"},
		redis.Z{Score: sec(now - 7_300_000), Member: "t-mail"},
		redis.Z{Score: sec(now - 5_000), Member: "t-missing"},
		redis.Z{Score: sec(now - 5_000), Member: "t-garbled"})
	pipe.HSet(ctx, "unacked",
		"t-active", msg("a1", "report.build", "reports", "reports"),
		"t-orphan", msg("o1", "report.build", "reports", "reports"),
		"t-mail", msg("o2", "mail.send", "celery", "mail"),
		"t-garbled", "{not json")
	_, err := pipe.Exec(ctx)
	exportertest.Must(t, err)

	s := newSteps(t, rc, h)
	exportertest.Must(t, rc.ConfigResetStat(ctx).Err())
	s.sweep()
	checkReads(t, rc, "celery", []string{"hmget", "lindex", "llen", "smembers", "zrange"})
	m := h.Metrics()
	jobs := func(state string) string { return fmt.Sprintf(`slot_jobs{family="tasks",state=%q}`, state) }
	queue := func(q, state string) string {
		return fmt.Sprintf(`slot_queue_jobs{family="tasks",queue=%q,state=%q}`, q, state)
	}
	exportertest.Expect(t, m, map[string]float64{
		jobs("waiting"):                     2,
		jobs("active"):                      1,
		jobs("orphaned"):                    2,
		jobs("stuck"):                       0,
		jobs("scheduled"):                   0,
		jobs("overdue"):                     0,
		queue("reports", "waiting"):         2,
		queue("reports", "active"):          1,
		queue("reports", "orphaned"):        1,
		queue("mail", "orphaned"):           1,
		`slot_users_active{family="tasks"}`: 2,
		// t-missing, named by unacked_index and missing from unacked,
		// counts from the second sweep: once, it may have been acked
		// between the two rounds of reads.
		`slot_exporter_keys_skipped_total{family="tasks",reason="bad_value"}`: 2,
		`slot_family_max_wait_seconds{family="tasks"}`:                        300,
	})
	s.since(m, `slot_jobs_oldest_seconds{family="tasks",state="orphaned"}`, now-7_300_000, 0)
	for _, q := range []string{"worker1.celery.pidbox", "celeryev.abc"} {
		absent(t, m, queue(q, "waiting"))
	}
	s.sweep()
	for _, detail := range []string{"t-missing", "t-garbled", "broken-member"} {
		if n := len(logs.Lines("skipping bad celery data", detail)); n != 1 {
			t.Errorf("%s: logged %d times, want once:\n%s", detail, n, logs.String())
		}
	}
}
