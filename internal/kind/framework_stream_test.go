package kind

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/heaptest"
	"github.com/slotexporter/slot_exporter/internal/redisread"
	"github.com/slotexporter/slot_exporter/internal/redistest"
	"github.com/slotexporter/slot_exporter/internal/resp"
)

// bigJob is a Sidekiq job whose arguments are size bytes, its
// enqueued_at after them as Sidekiq's client writes it.
func bigJob(jid string, size int, enqueuedAt float64) string {
	return fmt.Sprintf(`{"class":"Big","args":["%s"],"retry":true,"queue":"default","jid":%q,"created_at":%f,"enqueued_at":%f}`,
		strings.Repeat("a", size), jid, enqueuedAt, enqueuedAt)
}

// bigSidekiq writes a Sidekiq layout under ns whose next job in queue
// default, one work entry and one scheduled job are each a 20 MB job.
func bigSidekiq(t *testing.T, c redis.Cmdable, ns string) {
	t.Helper()
	ctx := context.Background()
	const size = 20 << 20
	id := "vm:1:abc"
	work, err := json.Marshal(map[string]any{"queue": "default", "payload": bigJob("w1", size, 1796183200), "run_at": 1796183201})
	mustNil(t, err)
	mustNil(t, c.SAdd(ctx, ns+"queues", "default").Err())
	mustNil(t, c.LPush(ctx, ns+"queue:default", bigJob("j1", size, 1796183290.5), `{"jid":"j2","enqueued_at":1796183295}`).Err())
	mustNil(t, c.SAdd(ctx, ns+"processes", id).Err())
	mustNil(t, c.HSet(ctx, ns+id, "beat", "1796183296.5").Err())
	mustNil(t, c.HSet(ctx, ns+id+":work", "tid1", string(work)).Err())
	mustNil(t, c.ZAdd(ctx, ns+"schedule", redis.Z{Score: 1796190000, Member: bigJob("s1", size, 1796183000)}).Err())
}

// checkBigSidekiq reads the layout bigSidekiq wrote with c and checks
// what was found in it, and that the read held little of its 60 MB.
func checkBigSidekiq(t *testing.T, c redis.Cmdable, ns string) {
	t.Helper()
	ctx := context.Background()
	sr := newStreamReader()
	key := redisread.KeyRead{Key: ns + "queues"}
	fr := &FrameworkRead{}
	var r *sidekiqRead
	var err error
	n := heaptest.Allocated(func() { r, err = readSidekiq(ctx, c, sr, &key, fr, ns, nil, nil, 1796183300000, 60000) })
	if err != nil || key.Status != redisread.OK {
		t.Fatal(err, key.Status)
	}
	if n > 8<<20 {
		t.Errorf("reading three 20 MB jobs allocated %d bytes", n)
	}
	if q := r.Queues["default"]; q == nil || q.Jobs[JobWaiting] != 2 || q.OldestWaiting != 1796183290500 || q.Jobs[JobScheduled] != 1 {
		t.Errorf("default: %+v", q)
	}
	if p := r.Procs["vm:1:abc"]; !p.Heartbeat || p.Work["w1"].RunAt != 1796183201000 || p.Work["w1"].Queue != "default" {
		t.Errorf("the process: %+v", p)
	}
	if len(fr.Bad) != 0 {
		t.Errorf("bad data: %+v", fr.Bad)
	}
}

// TestSidekiqBigJobsStreamed: a 20 MB job at the head of a queue, in a
// work hash and in `schedule` is read for what the layout uses of it
// (its enqueued_at, its jid and run_at, its queue) while the read holds
// a small part of it: the jobs stream over a raw connection.
func TestSidekiqBigJobsStreamed(t *testing.T) {
	rc := redistest.Start(t).Client()
	bigSidekiq(t, rc, "ns:")
	checkBigSidekiq(t, rc, "ns:")
}

// TestClusterSidekiqBigJobsStreamed: through a cluster client (Sidekiq's
// keys on several masters) each job streams from its key's node.
func TestClusterSidekiqBigJobsStreamed(t *testing.T) {
	cc := redistest.StartCluster(t, 3, 0).Client()
	bigSidekiq(t, cc, "")
	checkBigSidekiq(t, cc, "")
}

// TestSidekiqThroughGoRedis: a client the raw path cannot dial (here, an
// OnConnect hook) is read through go-redis, with the same figures.
func TestSidekiqThroughGoRedis(t *testing.T) {
	srv := redistest.Start(t)
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr, OnConnect: func(context.Context, *redis.Conn) error { return nil }})
	t.Cleanup(func() { _ = rc.Close() })
	ctx := context.Background()
	mustNil(t, rc.SAdd(ctx, "queues", "default").Err())
	mustNil(t, rc.LPush(ctx, "queue:default", bigJob("j1", 100, 1796183290.5)).Err())
	mustNil(t, rc.SAdd(ctx, "processes", "p").Err())
	mustNil(t, rc.HSet(ctx, "p:work", "t", `{"queue":"default","payload":{"jid":"w1"},"run_at":1796183201}`).Err())
	mustNil(t, rc.ZAdd(ctx, "retry", redis.Z{Score: 1796100000, Member: `{"queue":"mail"}`}).Err())
	key := redisread.KeyRead{Key: "queues"}
	fr := &FrameworkRead{}
	r, err := readSidekiq(ctx, rc, newStreamReader(), &key, fr, "", nil, nil, 1796183300000, 60000)
	mustNil(t, err)
	if q := r.Queues["default"]; q == nil || q.OldestWaiting != 1796183290500 {
		t.Errorf("default: %+v", q)
	}
	if q := r.Queues["mail"]; q == nil || q.Jobs[JobOverdue] != 1 {
		t.Errorf("mail: %+v", q)
	}
	if p := r.Procs["p"]; p.Work["w1"].RunAt != 1796183201000 {
		t.Errorf("the process: %+v", p)
	}
}

// TestCeleryBigHeadStreamed: a queue whose next message is 20 MB is
// dated by that message's hash, computed as it streams: the read holds a
// small part of it.
func TestCeleryBigHeadStreamed(t *testing.T) {
	rc := redistest.Start(t).Client()
	ctx := context.Background()
	big := `{"body":"` + strings.Repeat("b", 20<<20) + `","headers":{"id":"a","task":"t"}}`
	mustNil(t, rc.SAdd(ctx, "_kombu.binding.celery", "celery"+celerySep+celerySep+"celery").Err())
	mustNil(t, rc.LPush(ctx, "celery", big, "small").Err())
	l := &celeryLayout{heads: map[string]celeryHead{}, stream: newStreamReader()}
	l.configure(&config.Family{Kind: config.KindCelery, VisibilityTimeout: time.Hour})
	reads := make([]redisread.KeyRead, 1)
	if n := heaptest.Allocated(func() {
		mustNil(t, l.reads(1796183300000).Read(ctx, rc, []string{"_kombu.binding.celery"}, reads))
	}); n > 4<<20 {
		t.Errorf("reading a 20 MB head allocated %d bytes", n)
	}
	fr, _ := reads[0].Extra.(*FrameworkRead)
	if fr == nil || len(fr.Queues) != 1 || fr.Queues[0].Jobs[JobWaiting] != 2 || fr.Queues[0].OldestWaiting != 1796183300000 {
		t.Fatalf("the queue: %+v", fr)
	}
	if h := l.heads["celery"]; h.hash != xxhash.Sum64String(big) {
		t.Errorf("the head's hash %x, want the message's %x", h.hash, xxhash.Sum64String(big))
	}
}

// TestStreamHGetAllNamesItsCommand: a reply HGETALL's read cannot parse
// fails with an error that names HGETALL and its key (the raw connection
// carries other commands' replies too); an error reply is Redis's own.
func TestStreamHGetAllNamesItsCommand(t *testing.T) {
	for _, c := range []struct{ reply, want string }{
		{":1\r\n", "HGETALL p:work: "},
		{"*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n", "HGETALL p:work: 3 elements, not field and value pairs"},
		{"*2\r\n$1\r\na\r\n:5\r\n", "HGETALL p:work: "},
	} {
		client, server := net.Pipe()
		go func() {
			_, _ = server.Write([]byte(c.reply))
			_ = server.Close()
		}()
		var f, v strings.Builder
		r := streamHGetAll("p:work", &f, &v, func() {})
		errMsg, err := r.raw(resp.NewConn(client, 10*time.Second))
		_ = client.Close()
		if err == nil || !strings.HasPrefix(err.Error(), c.want) || strings.Contains(err.Error(), "ZRANGE") || errMsg != nil {
			t.Errorf("%q: %q, %v; want an error starting %q", c.reply, errMsg, err, c.want)
		}
	}
	client, server := net.Pipe()
	defer client.Close()
	go func() {
		_, _ = server.Write([]byte("-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"))
	}()
	var f, v strings.Builder
	errMsg, err := streamHGetAll("p:work", &f, &v, func() {}).raw(resp.NewConn(client, 10*time.Second))
	if err != nil || !strings.HasPrefix(string(errMsg), "WRONGTYPE") {
		t.Errorf("an error reply: %q, %v", errMsg, err)
	}
}

// TestStreamSMembersNamesItsCommand: a reply SMEMBERS's read cannot parse
// fails naming SMEMBERS and its key; an error reply is Redis's own.
func TestStreamSMembersNamesItsCommand(t *testing.T) {
	for _, c := range []struct{ reply, want string }{
		{":1\r\n", "SMEMBERS _kombu.binding.celery: "},
		{"*2\r\n$1\r\na\r\n:5\r\n", "SMEMBERS _kombu.binding.celery: "},
		{"*2\r\n$1\r\na\r\n$-1\r\n", "SMEMBERS _kombu.binding.celery: a member that is not a string"},
	} {
		client, server := net.Pipe()
		go func() {
			_, _ = server.Write([]byte(c.reply))
			_ = server.Close()
		}()
		var m strings.Builder
		errMsg, err := streamSMembers("_kombu.binding.celery", &m, func() {}).raw(resp.NewConn(client, 10*time.Second))
		_ = client.Close()
		if err == nil || !strings.HasPrefix(err.Error(), c.want) || errMsg != nil {
			t.Errorf("%q: %q, %v; want an error starting %q", c.reply, errMsg, err, c.want)
		}
	}
	client, server := net.Pipe()
	defer client.Close()
	go func() {
		_, _ = server.Write([]byte("-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"))
	}()
	var m strings.Builder
	errMsg, err := streamSMembers("_kombu.binding.celery", &m, func() {}).raw(resp.NewConn(client, 10*time.Second))
	if err != nil || !strings.HasPrefix(string(errMsg), "WRONGTYPE") {
		t.Errorf("an error reply: %q, %v", errMsg, err)
	}
}
