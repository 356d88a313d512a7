package kind

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/redisread"
	"github.com/slotexporter/slot_exporter/internal/redistest"
)

// The layout as Sidekiq 6.4.1 wrote it in a real run (examples/frameworks
// holds the tests with the real framework), with bad data beside it:
// each bad value is skipped with a line saying what and where, and the
// rest is read.
func TestReadSidekiqLayout(t *testing.T) {
	rc := redistest.Start(t).Client()
	ctx := context.Background()
	now := int64(1796183300000)
	id, dead := "vm:12063:a75b6f2ef931", "vm:999:000000000000"
	good := `{"queue":"default","payload":"{\"retry\":false,\"queue\":\"default\",\"class\":\"GateJob\",\"args\":[\"g1\"],\"jid\":\"2fc67ca77cb7be988257c582\",\"enqueued_at\":1796183252.0036457}","run_at":1796183256}`
	mustNil(t, rc.SAdd(ctx, "ns:queues", "default", "mail", "broken").Err())
	mustNil(t, rc.LPush(ctx, "ns:queue:default", `{"jid":"b","enqueued_at":1796183290.5}`, `{"jid":"c","enqueued_at":1796183295}`).Err())
	mustNil(t, rc.LPush(ctx, "ns:queue:mail", `not json`).Err())
	mustNil(t, rc.Set(ctx, "ns:queue:broken", "x", 0).Err())
	mustNil(t, rc.SAdd(ctx, "ns:processes", id, dead).Err())
	mustNil(t, rc.HSet(ctx, "ns:"+id, "beat", "1796183296.66", "busy", "2").Err())
	mustNil(t, rc.HSet(ctx, "ns:"+id+":workers", "8e3", good, "8cv", `{"queue":"default","payload":"{oops`).Err())
	mustNil(t, rc.ZAdd(ctx, "ns:schedule", redis.Z{Score: 1796183000, Member: `{"queue":"mail","jid":"s1"}`}, redis.Z{Score: 1796183299, Member: `{"queue":"mail","jid":"s2"}`}, redis.Z{Score: 1796190000, Member: `{"queue":"mail","jid":"s3"}`}).Err())
	mustNil(t, rc.ZAdd(ctx, "ns:retry", redis.Z{Score: 1796183100, Member: `{"queue":"default","jid":"r1"}`}).Err())

	key := redisread.KeyRead{Key: "ns:queues"}
	fr := &FrameworkRead{}
	r, err := readSidekiq(ctx, rc, newStreamReader(), &key, fr, "ns:", nil, nil, now, 60000)
	if err != nil || key.Status != redisread.OK {
		t.Fatal(err, key.Status)
	}
	if q := r.Queues["default"]; q == nil || q.Jobs[JobWaiting] != 2 || q.OldestWaiting != 1796183290500 || q.Jobs[JobOverdue] != 1 {
		t.Errorf("default: %+v", q)
	}
	if q := r.Queues["mail"]; q == nil || q.Jobs[JobWaiting] != 1 || q.OldestWaiting != -1 || q.Jobs[JobOverdue] != 1 || q.Jobs[JobScheduled] != 2 {
		t.Errorf("mail: %+v", q)
	}
	if q := r.Queues["broken"]; q == nil || q.Jobs != [NumJobStates]int64{} {
		t.Errorf("a queue that is not a list: %+v", q)
	}
	p := r.Procs[id]
	if !p.Listed || !p.Heartbeat || p.Beat != 1796183296660 || len(p.Work) != 1 || p.Work["2fc67ca77cb7be988257c582"].Class != "GateJob" {
		t.Errorf("live process: %+v", p)
	}
	if d := r.Procs[dead]; !d.Listed || d.Heartbeat || len(d.Work) != 0 {
		t.Errorf("dead process: %+v", d)
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
		"ns:queue:mail: bad_value: the next job: queued job is not JSON",
		"ns:queue:broken: wrong_type",
		"ns:vm:12063:a75b6f2ef931:workers: bad_value: thread 8cv: work entry is not JSON",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("bad data %q lacks %q", all, want)
		}
	}
	if len(bad) != 3 {
		t.Errorf("%d bad, want 3: %q", len(bad), all)
	}
}

func mustNil(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
