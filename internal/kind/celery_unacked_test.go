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
	"github.com/slotexporter/slot_exporter/internal/redisread"
	"github.com/slotexporter/slot_exporter/internal/redistest"
)

// celeryNow is the Redis time (ms) the unacked tests read at.
const celeryNow = 1796183300000

// kombuMessage is an unacked value as kombu 5.2 writes it for a Celery
// protocol 2 task: [message, exchange, routing key].
func kombuMessage(id, task string, retries int, exchange, route string) string {
	return fmt.Sprintf(`[{"body": "W1syLCAyXSwge30sIHsiY2FsbGJhY2tzIjogbnVsbH1d", "content-encoding": "utf-8", `+
		`"content-type": "application/json", "headers": {"lang": "py", "task": %q, "id": %q, "shadow": null, `+
		`"eta": null, "expires": null, "group": null, "group_index": null, "retries": %d, "timelimit": [null, null], `+
		`"root_id": %q, "parent_id": null, "argsrepr": "(2, 2)", "kwargsrepr": "{}", "origin": "gen1@host", `+
		`"ignore_result": false}, "properties": {"correlation_id": %q, "reply_to": "5b1e", "delivery_mode": 2, `+
		`"delivery_info": {"exchange": %q, "routing_key": %q}, "priority": 0, "body_encoding": "base64", `+
		`"delivery_tag": "d1"}}, %q, %q]`, task, id, retries, id, id, exchange, route, exchange, route)
}

// celeryUnackedCase is one unacked message and what a sweep makes of it:
// "active <queue>", "orphaned <queue> <id>|<task>|<attempts>|<started>",
// or the skip reason ("bad_value", with " vanished" for a message the
// index names and the hash lacks).
type celeryUnackedCase struct {
	tag   string
	value *string // nil: in unacked_index only
	age   int64   // ms before celeryNow
	want  string
}

func str(s string) *string { return &s }

const (
	celeryOrphanAge = 2 * 3600_000
	celeryActiveAge = 10_000
)

// celeryUnackedCases are messages as kombu writes them, Celery protocol
// 1's (the task in the body, headers empty), and the ways a value can
// differ from them: missing or null parts, wrong types, duplicate keys
// (decoded as encoding/json decodes them: merged, the last wins, a null
// passed over, any wrong type failing), and text that is not JSON. Each
// counts under a queue of its own, named after its tag.
var celeryUnackedCases = []celeryUnackedCase{
	{"t-orphan", str(kombuMessage("id-o", "tasks.add", 2, "", "q-orphan")), celeryOrphanAge,
		fmt.Sprintf("orphaned q-orphan id-o|tasks.add|2|%d", celeryNow-celeryOrphanAge)},
	{"t-active", str(kombuMessage("id-a", "tasks.add", 0, "", "q-active")), celeryActiveAge, "active q-active"},
	{"t-routed", str(kombuMessage("id-m", "mail.send", 1, "celery", "mail")), celeryOrphanAge,
		fmt.Sprintf("orphaned mail id-m|mail.send|1|%d", celeryNow-celeryOrphanAge)},
	{"t-proto1", str(`[{"body": "gAJ9cQAoWAQAAAB0YXNrcQFYCQAAAHRhc2tzLmFkZHECWAIAAABpZHEDWAEAAAB4cQR1Lg==", "headers": {}, ` +
		`"content-type": "application/x-python-serialize", "content-encoding": "binary", "properties": ` +
		`{"delivery_info": {"priority": 0, "routing_key": "q-proto1", "exchange": "celery"}, "delivery_mode": 2, ` +
		`"delivery_tag": "d2", "body_encoding": "base64"}}, "celery", "q-proto1"]`), celeryOrphanAge,
		fmt.Sprintf("orphaned q-proto1 ||0|%d", celeryNow-celeryOrphanAge)},
	{"t-noheaders", str(`[{"body": "e30="}, "", "q-noheaders"]`), celeryOrphanAge, fmt.Sprintf("orphaned q-noheaders ||0|%d", celeryNow-celeryOrphanAge)},
	{"t-nullheaders", str(`[{"headers": null}, "", "q-nullheaders"]`), celeryOrphanAge, fmt.Sprintf("orphaned q-nullheaders ||0|%d", celeryNow-celeryOrphanAge)},
	{"t-nullmsg", str(`[null, "", "q-nullmsg"]`), celeryActiveAge, "active q-nullmsg"},
	{"t-nullfields", str(`[{"headers": {"id": null, "task": null, "retries": null}}, null, "q-nullfields"]`), celeryOrphanAge,
		fmt.Sprintf("orphaned q-nullfields ||0|%d", celeryNow-celeryOrphanAge)},
	{"t-fold", str(`[{"HEADERS": {"ID": "x", "Task": "t", "RETRIES": 4, "\u0069d": "y"}}, "", "q-fold"]`), celeryOrphanAge,
		fmt.Sprintf("orphaned q-fold y|t|4|%d", celeryNow-celeryOrphanAge)},
	{"t-escapes", str(`[{"headers": {"id": "\u00e9\ud83d\ude00\ud800", "task": "a\"b\\c\n", "retries": -1}}, "", "q-escapes"]`), celeryOrphanAge,
		fmt.Sprintf("orphaned q-escapes é😀\ufffd|a\"b\\c\n|-1|%d", celeryNow-celeryOrphanAge)},
	{"t-badutf8", str("[{\"headers\": {\"id\": \"\xff\"}}, \"\", \"q-badutf8\"]"), celeryOrphanAge,
		fmt.Sprintf("orphaned q-badutf8 \ufffd||0|%d", celeryNow-celeryOrphanAge)},
	{"t-spaces", str(" \n[ { \"headers\" : { \"id\" : \"w\" } } ,\t\"\" , \"q-spaces\" ]\r\n"), celeryOrphanAge,
		fmt.Sprintf("orphaned q-spaces w||0|%d", celeryNow-celeryOrphanAge)},
	{"t-maxint", str(`[{"headers": {"retries": 9223372036854775807}}, "", "q-maxint"]`), celeryOrphanAge,
		fmt.Sprintf("orphaned q-maxint ||9223372036854775807|%d", celeryNow-celeryOrphanAge)},
	{"t-dupmerge", str(`[{"headers": {"id": "a", "task": "t0"}, "headers": {"task": "t"}}, "", "q-dupmerge"]`), celeryOrphanAge,
		fmt.Sprintf("orphaned q-dupmerge a|t|0|%d", celeryNow-celeryOrphanAge)},
	{"t-dupnull", str(`[{"headers": {"id": "a", "retries": 2, "id": null}, "headers": null}, "", "q-dupnull"]`), celeryOrphanAge,
		fmt.Sprintf("orphaned q-dupnull a||2|%d", celeryNow-celeryOrphanAge)},
	{"t-dupfold", str(`[{"headers": {"id": "a"}, "Headers": {"ID": "b"}}, "", "q-dupfold"]`), celeryOrphanAge,
		fmt.Sprintf("orphaned q-dupfold b||0|%d", celeryNow-celeryOrphanAge)},
	{"t-deep", str(`[{"body": [[[{"headers": {"id": "no"}}]]], "headers": {"x": {"id": "no"}, "id": "yes"}}, "", "q-deep"]`), celeryOrphanAge,
		fmt.Sprintf("orphaned q-deep yes||0|%d", celeryNow-celeryOrphanAge)},

	{"t-idnum", str(`[{"headers": {"id": 5}}, "", "q-idnum"]`), celeryOrphanAge, "bad_value"},
	{"t-idobj", str(`[{"headers": {"id": {}}}, "", "q-idobj"]`), celeryOrphanAge, "bad_value"},
	{"t-taskbool", str(`[{"headers": {"task": true}}, "", "q-taskbool"]`), celeryActiveAge, "bad_value"},
	{"t-retriesstr", str(`[{"headers": {"retries": "1"}}, "", "q-retriesstr"]`), celeryOrphanAge, "bad_value"},
	{"t-retriesfloat", str(`[{"headers": {"retries": 1.5}}, "", "q-retriesfloat"]`), celeryOrphanAge, "bad_value"},
	{"t-retriesexp", str(`[{"headers": {"retries": 1e2}}, "", "q-retriesexp"]`), celeryOrphanAge, "bad_value"},
	{"t-retriesbig", str(`[{"headers": {"retries": 9223372036854775808}}, "", "q-retriesbig"]`), celeryOrphanAge, "bad_value"},
	{"t-headersstr", str(`[{"headers": "{\"id\": \"a\"}"}, "", "q-headersstr"]`), celeryOrphanAge, "bad_value"},
	{"t-headersarr", str(`[{"headers": []}, "", "q-headersarr"]`), celeryActiveAge, "bad_value"},
	{"t-dupbadfirst", str(`[{"headers": {"id": 5, "id": "b"}}, "", "q-dupbadfirst"]`), celeryOrphanAge, "bad_value"},
	{"t-dupheadersbad", str(`[{"headers": 5, "headers": {"id": "a"}}, "", "q-dupheadersbad"]`), celeryOrphanAge, "bad_value"},
	{"t-msgstr", str(`["x", "", "q-msgstr"]`), celeryOrphanAge, "bad_value"},
	{"t-msgarr", str(`[[{"headers": {}}], "", "q-msgarr"]`), celeryOrphanAge, "bad_value"},
	{"t-exnum", str(`[{}, 5, "q-exnum"]`), celeryOrphanAge, "bad_value"},
	{"t-routeobj", str(`[{}, "", {"q": 1}]`), celeryOrphanAge, "bad_value"},
	{"t-len2", str(`[{}, ""]`), celeryOrphanAge, "bad_value"},
	{"t-len4", str(`[{}, "", "q-len4", "x"]`), celeryOrphanAge, "bad_value"},
	{"t-empty-array", str(`[]`), celeryOrphanAge, "bad_value"},
	{"t-object", str(`{"headers": {"id": "a"}}`), celeryOrphanAge, "bad_value"},
	{"t-null", str(`null`), celeryOrphanAge, "bad_value"},
	{"t-string", str(`"[{}, \"\", \"q\"]"`), celeryOrphanAge, "bad_value"},
	{"t-garbled", str(`{not json`), celeryOrphanAge, "bad_value"},
	{"t-cut", str(`[{"headers": {"id": "a"}}, "", "q-cut"`), celeryOrphanAge, "bad_value"},
	{"t-trailing", str(`[{}, "", "q-trailing"] x`), celeryOrphanAge, "bad_value"},
	{"t-twice", str(`[{}, "", "q-twice"][{}, "", "q-twice"]`), celeryOrphanAge, "bad_value"},
	{"t-comma", str(`[{"headers": {"id": "a",}}, "", "q-comma"]`), celeryOrphanAge, "bad_value"},
	{"t-blank", str(``), celeryOrphanAge, "bad_value"},
	{"t-missing", nil, celeryOrphanAge, "bad_value vanished"},
}

// writeCeleryUnacked writes cases into unacked and unacked_index, and a
// binding of queue mail to the celery exchange under routing key mail.
func writeCeleryUnacked(t *testing.T, rc redis.Cmdable, cases []celeryUnackedCase) {
	t.Helper()
	ctx := context.Background()
	pipe := rc.Pipeline()
	pipe.SAdd(ctx, "_kombu.binding.celery", "mail"+celerySep+celerySep+"mail")
	for _, c := range cases {
		pipe.ZAdd(ctx, "unacked_index", redis.Z{Score: float64(celeryNow-c.age) / 1000, Member: c.tag})
		if c.value != nil {
			pipe.HSet(ctx, "unacked", c.tag, *c.value)
		}
	}
	_, err := pipe.Exec(ctx)
	mustNil(t, err)
}

// readCeleryUnacked sweeps the layout once, at celeryNow, and says what
// it made of each unacked message, by tag (celeryUnackedCase.want).
func readCeleryUnacked(t *testing.T, rc redis.Cmdable) map[string]string {
	t.Helper()
	l := &celeryLayout{heads: map[string]celeryHead{}, stream: newStreamReader()}
	l.configure(&config.Family{Kind: config.KindCelery, VisibilityTimeout: time.Hour})
	reads := make([]redisread.KeyRead, 1)
	mustNil(t, l.reads(celeryNow).Read(context.Background(), rc, []string{"_kombu.binding.celery"}, reads))
	fr, _ := reads[0].Extra.(*FrameworkRead)
	if reads[0].Status != redisread.OK || fr == nil {
		t.Fatalf("the binding key's read: %+v", reads[0])
	}
	got := map[string]string{}
	add := func(tag, what string) {
		if prev, dup := got[tag]; dup {
			t.Errorf("%s: %s, and %s", tag, prev, what)
		}
		got[tag] = what
	}
	for _, q := range fr.Queues {
		tag := "t-" + strings.TrimPrefix(q.Queue, "q-")
		if q.Queue == "mail" {
			tag = "t-routed"
		}
		if n := q.Jobs[JobActive]; n > 0 {
			add(tag, fmt.Sprintf("active %s", q.Queue))
		}
		for _, j := range q.Orphans {
			add(tag, fmt.Sprintf("orphaned %s %s|%s|%d|%d", q.Queue, j.ID, j.Name, j.Attempts, j.Started))
		}
		if q.Jobs[JobActive] > 1 || q.Jobs[JobOrphaned] != int64(len(q.Orphans)) || q.Queue != "mail" && q.Jobs[JobWaiting] != 0 {
			t.Errorf("queue %s: %+v", q.Queue, q)
		}
	}
	for _, b := range fr.Bad {
		f := strings.Fields(b.Detail)
		if b.Key != "unacked" || len(f) < 3 || f[0] != "delivery" || f[1] != "tag" {
			t.Errorf("bad data not of an unacked message: %+v", b)
			continue
		}
		what := b.Reason.String()
		if b.Vanished {
			what += " vanished"
		}
		add(strings.TrimSuffix(f[2], ":"), what)
	}
	return got
}

// checkCeleryUnacked compares what a sweep made of cases with what each
// wants.
func checkCeleryUnacked(t *testing.T, cases []celeryUnackedCase, got map[string]string) {
	t.Helper()
	for _, c := range cases {
		if got[c.tag] != c.want {
			t.Errorf("%s: %q, want %q", c.tag, got[c.tag], c.want)
		}
		delete(got, c.tag)
	}
	var extra []string
	for tag, what := range got {
		extra = append(extra, tag+": "+what)
	}
	sort.Strings(extra)
	if len(extra) > 0 {
		t.Errorf("found but not written: %s", strings.Join(extra, "; "))
	}
}

// TestCeleryUnackedMessages: each unacked message counts under the queue
// its exchange and routing key name, orphaned (with its id, task and
// retries) when delivered more than visibility_timeout ago, else active;
// one that is not kombu's JSON, or whose headers are of the wrong types,
// is skipped as bad_value, and one missing from unacked as vanished.
func TestCeleryUnackedMessages(t *testing.T) {
	rc := redistest.Start(t).Client()
	writeCeleryUnacked(t, rc, celeryUnackedCases)
	checkCeleryUnacked(t, celeryUnackedCases, readCeleryUnacked(t, rc))
}
