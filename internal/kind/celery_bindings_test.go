package kind

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/heaptest"
	"github.com/slotexporter/slot_exporter/internal/redisread"
	"github.com/slotexporter/slot_exporter/internal/redistest"
)

// celeryBindingCase is one member of a binding set and what a sweep
// makes of it: "queue <name>" (found, its lists counted), a skip reason,
// or "" (a fanout exchange's member, passed over).
type celeryBindingCase struct {
	key, member, want string
}

// celeryBinding is kombu's member: routing key, pattern and queue.
func celeryBinding(route, queue string) string { return route + celerySep + celerySep + queue }

// celeryLongBinding is a member of n bytes binding a queue named after
// its length: one to be read, and one just over what is read.
func celeryLongBinding(n int) string {
	route := fmt.Sprintf("r%d", n)
	return celeryBinding(route, "q-"+strings.Repeat("l", n-len(route)-2*len(celerySep)-2))
}

// celeryBindingCases are kombu's bindings beside members that are too
// long to be read (value_too_large, never used) or not three fields
// (bad_value), short and long. A member of 512 bytes is read whole.
var celeryBindingCases = []celeryBindingCase{
	{"_kombu.binding.celery", celeryBinding("celery", "celery"), "queue celery"},
	{"_kombu.binding.celery", celeryBinding("mail", "mail"), "queue mail"},
	{"_kombu.binding.reports", celeryBinding("reports", "reports"), "queue reports"},
	{"_kombu.binding.celeryev", celeryBinding("worker.#", "celeryev.abc"), ""},
	{"_kombu.binding.celery", celeryLongBinding(redisread.MaxValueBytes), "queue " + strings.Split(celeryLongBinding(redisread.MaxValueBytes), celerySep)[2]},
	{"_kombu.binding.reports", celeryLongBinding(redisread.MaxValueBytes + 1), "value_too_large"},
	{"_kombu.binding.reports", strings.Repeat("x", 1<<20), "value_too_large"},
	{"_kombu.binding.celery", "broken-member", "bad_value"},
	{"_kombu.binding.celery", "only" + celerySep + "two", "bad_value"},
	{"_kombu.binding.celery", strings.Repeat("y", 400), "bad_value"},
}

// writeCeleryBindings writes cases, and for each queue they bind as
// many waiting messages as its name's length mod 3, plus one (one of
// them at priority 3), and one unacked message routed to mail through
// the celery exchange.
func writeCeleryBindings(t *testing.T, rc redis.Cmdable, cases []celeryBindingCase) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	waiting := map[string]int64{}
	for _, c := range cases {
		mustNil(t, rc.SAdd(ctx, c.key, c.member).Err())
		name, ok := strings.CutPrefix(c.want, "queue ")
		if !ok {
			continue
		}
		n := int64(len(name)%3 + 1)
		waiting[name] = n
		mustNil(t, rc.LPush(ctx, name+celerySep+"3", "m0").Err())
		for i := int64(1); i < n; i++ {
			mustNil(t, rc.LPush(ctx, name, fmt.Sprintf("m%d", i)).Err())
		}
	}
	mustNil(t, rc.ZAdd(ctx, "unacked_index", redis.Z{Score: float64(celeryNow-celeryActiveAge) / 1000, Member: "t-mail"}).Err())
	mustNil(t, rc.HSet(ctx, "unacked", "t-mail", kombuMessage("id-m", "mail.send", 0, "celery", "mail")).Err())
	return waiting
}

// celeryBindingKeys are the binding keys of cases, each once.
func celeryBindingKeys(cases []celeryBindingCase) []string {
	seen := map[string]bool{}
	var keys []string
	for _, c := range cases {
		if !seen[c.key] {
			seen[c.key] = true
			keys = append(keys, c.key)
		}
	}
	sort.Strings(keys)
	return keys
}

// sweepCeleryBindings sweeps the binding keys of cases once, at
// celeryNow, and says how many bytes the sweep allocated.
func sweepCeleryBindings(t *testing.T, rc redis.Cmdable, cases []celeryBindingCase) ([]redisread.KeyRead, uint64) {
	t.Helper()
	l := &celeryLayout{heads: map[string]celeryHead{}, stream: newStreamReader()}
	l.configure(&config.Family{Kind: config.KindCelery, VisibilityTimeout: time.Hour})
	keys := celeryBindingKeys(cases)
	reads := make([]redisread.KeyRead, len(keys))
	n := heaptest.Allocated(func() {
		mustNil(t, l.reads(celeryNow).Read(context.Background(), rc, keys, reads))
		takeShared(reads)
	})
	return reads, n
}

// checkCeleryBindings compares what a sweep made of cases with what each
// wants: every queue bound found and counted exactly (mail with its
// unacked message), no other; each member skipped under its key and
// reason, named by a detail short enough for a log line: the member
// quoted whole up to 32 bytes, else its first 32 and its length.
func checkCeleryBindings(t *testing.T, cases []celeryBindingCase, waiting map[string]int64, reads []redisread.KeyRead) {
	t.Helper()
	found := map[string]QueueJobs{}
	var bad []BadData
	for _, r := range reads {
		fr, _ := r.Extra.(*FrameworkRead)
		if r.Status != redisread.OK || fr == nil {
			t.Fatalf("binding key %s: %+v", r.Key, r)
		}
		for _, q := range fr.Queues {
			if _, dup := found[q.Queue]; dup {
				t.Errorf("queue %.40s found twice", q.Queue)
			}
			found[q.Queue] = q
		}
		for _, b := range fr.Bad {
			if b.Key != r.Key {
				t.Errorf("bad data of %s recorded under %s: %.200s", b.Key, r.Key, b.Detail)
			}
			if len(b.Detail) > 256 {
				t.Errorf("a %d-byte detail for %s: %.200s...", len(b.Detail), b.Key, b.Detail)
			}
			bad = append(bad, b)
		}
	}
	for _, c := range cases {
		if name, ok := strings.CutPrefix(c.want, "queue "); ok {
			q, ok := found[name]
			active := int64(0)
			if name == "mail" {
				active = 1
			}
			if !ok || q.Jobs[JobWaiting] != waiting[name] || q.Jobs[JobActive] != active || q.OldestWaiting != celeryNow {
				t.Errorf("queue %.40s (%d bytes): %+v, want %d waiting, %d active", name, len(name), q, waiting[name], active)
			}
			delete(found, name)
			continue
		}
		if c.want == "" {
			continue
		}
		name := fmt.Sprintf("%q", c.member)
		if len(c.member) > 32 {
			name = fmt.Sprintf("%q...", c.member[:32])
		}
		at := -1
		for i, b := range bad {
			if b.Key == c.key && b.Reason.String() == c.want && strings.Contains(b.Detail, "binding "+name) &&
				(len(c.member) <= 32 || strings.Contains(b.Detail, fmt.Sprintf(" %d bytes", len(c.member)))) {
				at = i
				break
			}
		}
		if at < 0 {
			t.Errorf("%s: no %s naming %.40q (%d bytes)", c.key, c.want, c.member, len(c.member))
			continue
		}
		bad = append(bad[:at], bad[at+1:]...)
	}
	for name := range found {
		t.Errorf("queue %.40s (%d bytes) found, not bound", name, len(name))
	}
	for _, b := range bad {
		t.Errorf("bad data not written: %s %s %.200s", b.Key, b.Reason, b.Detail)
	}
}

// TestCeleryBindings: a binding member is read up to 512 bytes; a longer
// one is value_too_large under its key and one that is not three fields
// bad_value, neither used, each named by its first 32 bytes and its
// length (whole when shorter); the other bindings' queues are found and
// counted as before.
func TestCeleryBindings(t *testing.T) {
	rc := redistest.Start(t).Client()
	waiting := writeCeleryBindings(t, rc, celeryBindingCases)
	reads, _ := sweepCeleryBindings(t, rc, celeryBindingCases)
	checkCeleryBindings(t, celeryBindingCases, waiting, reads)
}

// TestCeleryBigBindingStreamed: a 32 MB binding member is value_too_large
// while the sweep holds a small part of it, and sends none of it back;
// the queues bound beside it are found and counted.
func TestCeleryBigBindingStreamed(t *testing.T) {
	rc := redistest.Start(t).Client()
	cases := append([]celeryBindingCase{{"_kombu.binding.celery", celeryLongBinding(32 << 20), "value_too_large"}}, celeryBindingCases[:4]...)
	waiting := writeCeleryBindings(t, rc, cases)
	reads, n := sweepCeleryBindings(t, rc, cases)
	if n > 4<<20 {
		t.Errorf("reading a 32 MB binding member allocated %d bytes", n)
	}
	t.Logf("a sweep with a 32 MB binding member allocated %d bytes", n)
	checkCeleryBindings(t, cases, waiting, reads)
}

// TestClusterCeleryBindings: through a cluster client, each binding key
// is streamed from its own node, with the same results.
func TestClusterCeleryBindings(t *testing.T) {
	cc := redistest.StartCluster(t, 3, 0).Client()
	waiting := writeCeleryBindings(t, cc, celeryBindingCases)
	reads, _ := sweepCeleryBindings(t, cc, celeryBindingCases)
	checkCeleryBindings(t, celeryBindingCases, waiting, reads)
}

// TestCeleryBindingsThroughGoRedis: a client the raw path cannot dial
// (here, an OnConnect hook) reads the bindings whole through go-redis,
// with the same results: a member too long is held for the moment of
// its read, then neither used nor logged whole.
func TestCeleryBindingsThroughGoRedis(t *testing.T) {
	srv := redistest.Start(t)
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr, OnConnect: func(context.Context, *redis.Conn) error { return nil }})
	t.Cleanup(func() { _ = rc.Close() })
	waiting := writeCeleryBindings(t, rc, celeryBindingCases)
	reads, _ := sweepCeleryBindings(t, rc, celeryBindingCases)
	checkCeleryBindings(t, celeryBindingCases, waiting, reads)
}
