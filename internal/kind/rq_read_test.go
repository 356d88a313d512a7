package kind

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/redistest"
)

// The layout as RQ 1.13 wrote it in a real run (examples/frameworks holds
// the tests with the real framework), with bad data beside it: each bad
// value is skipped with a line saying what and where, and the rest is
// read.
func TestReadRQLayout(t *testing.T) {
	rc := redistest.Start(t).Client()
	ctx := context.Background()
	now := int64(1796183400000)
	mustNil(t, rc.SAdd(ctx, "rq:queues", "rq:queue:default", "rq:queue:mail", "unrelated").Err())
	mustNil(t, rc.RPush(ctx, "rq:queue:default", "j2", "j3").Err())
	mustNil(t, rc.HSet(ctx, "rq:job:j2", "status", "queued", "enqueued_at", "2026-12-02T03:47:58.594064Z").Err())
	mustNil(t, rc.RPush(ctx, "rq:queue:mail", "gone").Err())
	// j1: started, past its expiry (its worker died); j4: running; j5: a
	// job hash that is not a hash; j6: a started entry with no job hash.
	mustNil(t, rc.ZAdd(ctx, "rq:wip:default",
		redis.Z{Score: 1796183369, Member: "j1"}, redis.Z{Score: 1796183460, Member: "j4"},
		redis.Z{Score: 1796183300, Member: "j5"}, redis.Z{Score: 1796183470, Member: "j6"}).Err())
	mustNil(t, rc.HSet(ctx, "rq:job:j1", "description", "rqjobs.gate('g1')", "started_at", "2026-12-02T03:47:59.883406Z", "worker_name", "w1").Err())
	mustNil(t, rc.HSet(ctx, "rq:job:j4", "description", "rqjobs.gate('g1')", "started_at", "2026-12-02T03:49:00Z", "worker_name", "w2").Err())
	mustNil(t, rc.Set(ctx, "rq:job:j5", "x", 0).Err())
	mustNil(t, rc.ZAdd(ctx, "rq:wip:mail", redis.Z{Score: 1796183300, Member: "j7"}).Err())
	mustNil(t, rc.Do(ctx, "ZADD", "rq:wip:mail", "+inf", "forever").Err())
	mustNil(t, rc.ZAdd(ctx, "rq:scheduled:mail", redis.Z{Score: 1796182800, Member: "s1"}, redis.Z{Score: 1796183399, Member: "s2"}).Err())
	mustNil(t, rc.SAdd(ctx, "rq:workers", "rq:worker:w1", "rq:worker:w2").Err())
	mustNil(t, rc.HSet(ctx, "rq:worker:w2", "last_heartbeat", "2026-12-02T03:49:59.870480Z").Err())

	r, err := readRQ(ctx, rc, "rq", nil, now, 60000)
	if err != nil {
		t.Fatal(err)
	}
	d := r.Queues["default"]
	if d == nil || d.Waiting != 2 || d.Oldest != 1796183278594 || d.StartedExpired != 2 || d.StartedLive != 2 || len(d.Started) != 4 {
		t.Fatalf("default: %+v", d)
	}
	if j := d.Started[1]; j.ID != "j1" || j.Expiry != 1796183369000 || j.StartedAt != 1796183279883 || j.Worker != "w1" || j.Description != "rqjobs.gate('g1')" {
		t.Errorf("j1: %+v", j)
	}
	m := r.Queues["mail"]
	if m == nil || m.Waiting != 1 || m.Oldest != 0 || m.Overdue != 1 || m.Scheduled != 1 || m.StartedLive != 0 || m.StartedExpired != 1 {
		t.Errorf("mail: %+v", m)
	}
	if len(r.Queues) != 2 {
		t.Errorf("queues %v", r.Queues)
	}
	if r.WorkersLive != 1 || r.WorkersDead != 1 {
		t.Errorf("workers live %d dead %d", r.WorkersLive, r.WorkersDead)
	}
	bad := strings.Join(r.Bad, "\n")
	for _, want := range []string{
		"rq:queue:mail: the next job's hash is missing",
		"rq:job:j5 is not a hash",
		"rq:job:j6 is missing (started in rq:wip:default)",
		"rq:job:j7 is missing (started in rq:wip:mail)",
		"rq:wip:mail: job forever skipped: its score +Inf is not a finite expiry",
	} {
		if !strings.Contains(bad, want) {
			t.Errorf("bad lines %q lack %q", bad, want)
		}
	}
	if len(r.Bad) != 5 {
		t.Errorf("%d bad lines, want 5: %q", len(r.Bad), bad)
	}
}
