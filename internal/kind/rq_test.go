package kind

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/redisread"
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

	l := &rqLayout{prefix: "rq", maxWait: 60000, maxHold: 3600000}
	reads := make([]redisread.KeyRead, 1)
	if err := l.reads(now).Read(ctx, rc, []string{"rq:queues"}, reads); err != nil {
		t.Fatal(err)
	}
	fr, _ := reads[0].Extra.(*FrameworkRead)
	if reads[0].Status != redisread.OK || fr == nil {
		t.Fatalf("read %+v", reads[0])
	}
	qs := map[string]QueueJobs{}
	for _, q := range fr.Queues {
		qs[q.Queue] = q
	}
	d := qs["default"]
	// j1 orphaned, j4 active; j5 (not a hash) and j6 (no hash) in no state.
	if d.Jobs != [NumJobStates]int64{JobWaiting: 2, JobActive: 1, JobOrphaned: 1} || d.OldestWaiting != 1796183278594 || d.OldestOrphaned != 1796183279883 {
		t.Errorf("default: %+v", d)
	}
	if len(d.Orphans) != 1 || d.Orphans[0] != (Job{ID: "j1", Name: "rqjobs.gate('g1')", Started: 1796183279883, Attempts: 1}) {
		t.Errorf("orphans %+v", d.Orphans)
	}
	m := qs["mail"]
	if m.Jobs != [NumJobStates]int64{JobWaiting: 1, JobOverdue: 1, JobScheduled: 1} || m.OldestWaiting != -1 {
		t.Errorf("mail: %+v", m)
	}
	if len(qs) != 2 {
		t.Errorf("queues %v", qs)
	}
	if fr.Workers != [NumWorkerStates]int64{1, 1} {
		t.Errorf("workers %v", fr.Workers)
	}
	var bad []string
	for _, b := range fr.Bad {
		bad = append(bad, b.Key+": "+b.Reason.String()+": "+b.Detail)
	}
	all := strings.Join(bad, "\n")
	for _, want := range []string{
		"rq:job:gone: bad_value: the next job of rq:queue:mail has no hash",
		"rq:job:j5: wrong_type",
		"rq:job:j6: bad_value: job j6 is in rq:wip:default but its hash is missing",
		"rq:job:j7: bad_value: job j7 is in rq:wip:mail but its hash is missing",
		"rq:wip:mail: bad_value: job forever: score +Inf is not a finite expiry",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("bad data %q lacks %q", all, want)
		}
	}
	if len(bad) != 5 {
		t.Errorf("%d bad, want 5: %q", len(bad), all)
	}
}
