package kind

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/heaptest"
	"github.com/slotexporter/slot_exporter/internal/jsonfields"
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
	takeShared(reads)
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
		if b.Key == "unacked_index" {
			// A tag too long to be read is named by its length.
			m := celeryTagLength.FindStringSubmatch(b.Detail)
			if m == nil {
				t.Errorf("bad data of unacked_index that names no tag's length: %+v", b)
				continue
			}
			add("bytes:"+m[1], b.Reason.String()+" in unacked_index")
			continue
		}
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

var celeryTagLength = regexp.MustCompile(`^delivery tag ".*"\.\.\. is (\d+) bytes`)

// checkCeleryUnacked compares what a sweep made of cases with what each
// wants.
func checkCeleryUnacked(t *testing.T, cases []celeryUnackedCase, got map[string]string) {
	t.Helper()
	for _, c := range cases {
		tag := c.tag
		if _, ok := got[tag]; !ok {
			tag = fmt.Sprintf("bytes:%d", len(c.tag))
		}
		if got[tag] != c.want {
			t.Errorf("%.40s (%d bytes): %q, want %q", c.tag, len(c.tag), got[tag], c.want)
		}
		delete(got, tag)
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

// celeryTooLargeCases have a field the exporter reads longer than the
// scan keeps (jsonfields.FieldMax), which decoding the whole value read:
// value_too_large. A long field that is not read changes nothing, and a
// value that is not kombu's JSON stays bad_value.
var celeryTooLargeCases = func() []celeryUnackedCase {
	long := strings.Repeat("x", jsonfields.FieldMax)
	half := strings.Repeat("x", jsonfields.FieldMax/2)
	return []celeryUnackedCase{
		{"t-longid", str(`[{"headers": {"id": "` + long + `"}}, "", "q-longid"]`), celeryOrphanAge, "value_too_large"},
		{"t-longtask", str(`[{"headers": {"task": "` + long + `"}}, "", "q-longtask"]`), celeryActiveAge, "value_too_large"},
		{"t-longroute", str(`[{}, "", "q-` + long + `"]`), celeryOrphanAge, "value_too_large"},
		{"t-longexchange", str(`[{}, "` + long + `", "q-longexchange"]`), celeryOrphanAge, "value_too_large"},
		{"t-repeatedid", str(`[{"headers": {"id": "` + half + `"}, "headers": {"id": "` + half + `"}}, "", "q-repeatedid"]`), celeryOrphanAge, "value_too_large"},
		{"t-longargs", str(`[{"headers": {"argsrepr": "` + long + long + `", "id": "i", "task": "t", "retries": 3}}, "", "q-longargs"]`), celeryOrphanAge,
			fmt.Sprintf("orphaned q-longargs i|t|3|%d", celeryNow-celeryOrphanAge)},
		{"t-longbad", str(`[{"headers": {"id": "` + long + `"}}, "", "q-longbad", 4]`), celeryOrphanAge, "bad_value"},
	}
}()

// celeryLongTagCase is an unacked message under a delivery tag of n
// bytes (kombu's are 36): one to be counted ("active") is routed to a
// queue named after its tag, any other to q-unread, which nothing may
// count.
func celeryLongTagCase(n int, want string) celeryUnackedCase {
	name, route := strings.Repeat("l", n-2), "q-unread"
	if want == "active" {
		route = "q-" + name
		want = "active " + route
	}
	return celeryUnackedCase{"t-" + name, str(kombuMessage("id-l", "tasks.add", 0, "", route)), celeryActiveAge, want}
}

// celeryLongTagCases: a delivery tag is read up to 512 bytes (as a lock's
// token is); a longer one is value_too_large, its message not read.
var celeryLongTagCases = []celeryUnackedCase{
	celeryLongTagCase(512, "active"),
	celeryLongTagCase(513, "value_too_large in unacked_index"),
	celeryLongTagCase(1<<20, "value_too_large in unacked_index"),
}

// TestCeleryUnackedMessages: each unacked message counts under the queue
// its exchange and routing key name, orphaned (with its id, task and
// retries) when delivered more than visibility_timeout ago, else active;
// one that is not kombu's JSON, or whose headers are of the wrong types,
// is skipped as bad_value, one missing from unacked as vanished, and one
// with a field read longer than the exporter reads, or under a delivery
// tag longer than it reads, as value_too_large.
func TestCeleryUnackedMessages(t *testing.T) {
	rc := redistest.Start(t).Client()
	cases := append(append(append([]celeryUnackedCase(nil), celeryUnackedCases...), celeryTooLargeCases...), celeryLongTagCases...)
	writeCeleryUnacked(t, rc, cases)
	checkCeleryUnacked(t, cases, readCeleryUnacked(t, rc))
}

// TestClusterCeleryUnackedMessages: through a cluster client, unacked is
// streamed from its own node, with the same results.
func TestClusterCeleryUnackedMessages(t *testing.T) {
	cc := redistest.StartCluster(t, 3, 0).Client()
	cases := append(append([]celeryUnackedCase(nil), celeryUnackedCases...), celeryLongTagCases...)
	writeCeleryUnacked(t, cc, cases)
	checkCeleryUnacked(t, cases, readCeleryUnacked(t, cc))
}

// TestCeleryUnackedThroughGoRedis: a client the raw path cannot dial
// (here, an OnConnect hook) reads unacked and unacked_index whole through
// go-redis, with the same results: a tag too long is held for the
// moment of its read, and not sent back.
func TestCeleryUnackedThroughGoRedis(t *testing.T) {
	srv := redistest.Start(t)
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr, OnConnect: func(context.Context, *redis.Conn) error { return nil }})
	t.Cleanup(func() { _ = rc.Close() })
	cases := append(append(append([]celeryUnackedCase(nil), celeryUnackedCases...), celeryTooLargeCases...), celeryLongTagCases...)
	writeCeleryUnacked(t, rc, cases)
	checkCeleryUnacked(t, cases, readCeleryUnacked(t, rc))
}

// wholeCeleryUnacked is the decoding of a whole unacked value that the
// streaming scan replaced: what it made of a value is what the scan must
// make of it.
func wholeCeleryUnacked(raw string) (celeryUnacked, error) {
	var entry []json.RawMessage
	var exchange, route string
	var msg struct {
		Headers celeryHeaders `json:"headers"`
	}
	if err := json.Unmarshal([]byte(raw), &entry); err != nil || len(entry) != 3 ||
		json.Unmarshal(entry[1], &exchange) != nil || json.Unmarshal(entry[2], &route) != nil ||
		json.Unmarshal(entry[0], &msg) != nil {
		return celeryUnacked{}, errors.New("not kombu's JSON")
	}
	return celeryUnacked{Exchange: exchange, Route: route, Headers: msg.Headers}, nil
}

var celeryScanSeeds = func() []string {
	var seeds []string
	for _, c := range celeryUnackedCases {
		if c.value != nil {
			seeds = append(seeds, *c.value)
		}
	}
	return append(seeds, `[{},"",""]`, `[{"headers":{}},"a","b"]`, `[{"headers":{"id":"a"}},"e\u0041","r\ud800"]`,
		`[{"headers":{"id":"a"},"headers":"x"}, "", ""]`, `[{"headers":{"id":"a"},"headers":{"id":null}}, "", ""]`,
		`[{"headers":{"id":"a","task":"t"},"headers":{"id":"b"},"headers":null,"headers":{"retries":1}}, "", ""]`,
		`[{"headers":{"task":"t","task":5}}, "", ""]`, `[{"headers":null,"headers":[]}, "", ""]`, `[{"x":1,"headers":{}}, null, null]`,
		`[{"headers":{"id":"a"}}, "", ""`, `[{"headers":{"id":"a"}} "", ""]`, `[{"headers":{"id":"a"}}, "", "",]`, `[,]`, `[1,2,3]`,
		`[{"headers":{"x":[{"id":"no"}],"id":"yes"}},"",""]`, `[{"HeAdErS":{"Id":"i","TASK":"t","rEtRiEs":-7}},"",""]`,
		`[{"headers":{"retries":0.0}},"",""]`, `[{"headers":{"retries":-9223372036854775808}},"",""]`, `[{"headers":{"retries":true}},"",""]`,
		`[{"headers":{"id":"\u0000"}},"",""]`, "[{\"headers\":{\"id\":\"\x01\"}},\"\",\"\"]", `[{"\u0068eaders":{"\u0069d":"e"}},"",""]`,
		`[{"headers":{"id":"a"}},"",""]   `, `[{"headers":{"id":"a"}},"",""] []`, `[[1],"",""]`, `[true,"",""]`, `[{},"",[]]`,
		strings.Repeat("[", 10001)+strings.Repeat("]", 10001), `[{"body":`+strings.Repeat("[", 9998)+strings.Repeat("]", 9998)+`,"headers":{"id":"d"}},"",""]`)
}()

// sameAsWholeCelery checks that the scan, fed v in pieces of n bytes,
// makes of it what the whole decoding made.
func sameAsWholeCelery(t *testing.T, s *jsonfields.Scan, v string, n int) {
	t.Helper()
	s.Reset()
	for rest := v; len(rest) > 0; {
		k := min(n, len(rest))
		_, _ = io.WriteString(s, rest[:k])
		rest = rest[k:]
	}
	got, err := celeryUnackedOf(s)
	want, werr := wholeCeleryUnacked(v)
	if errors.Is(err, errJSONFieldTooLarge) {
		return // whole, it was read; streamed, it is not
	}
	if (err == nil) != (werr == nil) || err == nil && got != want {
		t.Errorf("%q in %d-byte pieces: %+v %v, whole %+v %v", v, n, got, err, want, werr)
	}
}

// TestCeleryScanMatchesWhole: streamed in pieces of any size, an unacked
// value gives what encoding/json gave of the whole value (errors alike).
func TestCeleryScanMatchesWhole(t *testing.T) {
	s := newCeleryUnackedScan()
	for _, v := range celeryScanSeeds {
		for _, n := range []int{1, 2, 3, 7, 64, len(v) + 1} {
			sameAsWholeCelery(t, s, v, n)
		}
	}
}

func FuzzCeleryScanMatchesWhole(f *testing.F) {
	for _, v := range celeryScanSeeds {
		f.Add(v, uint8(3))
	}
	s := newCeleryUnackedScan()
	f.Fuzz(func(t *testing.T, v string, n uint8) {
		sameAsWholeCelery(t, s, v, int(n)+1)
	})
}

// TestCeleryBigUnackedStreamed: an unacked message of 32 MB (a 24 MB
// body, and 8 MB of argsrepr in its headers) is counted and named while
// the read holds a small part of it: messages stream over a raw
// connection, through a scan that keeps only the fields read.
func TestCeleryBigUnackedStreamed(t *testing.T) {
	rc := redistest.Start(t).Client()
	big := `[{"body": "` + strings.Repeat("b", 24<<20) + `", "headers": {"argsrepr": "` + strings.Repeat("a", 8<<20) +
		`", "id": "id-big", "task": "tasks.big", "retries": 1}, "properties": {"delivery_tag": "d3"}}, "", "q-big"]`
	cases := []celeryUnackedCase{
		{"t-big", &big, celeryOrphanAge, fmt.Sprintf("orphaned q-big id-big|tasks.big|1|%d", celeryNow-celeryOrphanAge)},
		celeryUnackedCases[1],
	}
	writeCeleryUnacked(t, rc, cases)
	var got map[string]string
	if n := heaptest.Allocated(func() { got = readCeleryUnacked(t, rc) }); n > 4<<20 {
		t.Errorf("reading a 32 MB unacked message allocated %d bytes", n)
	}
	checkCeleryUnacked(t, cases, got)
}

// TestCeleryBigDeliveryTagStreamed: a 32 MB member of unacked_index is
// value_too_large, named by its length, while the read holds a small
// part of it and sends none of it back; the other unacked messages count
// as before.
func TestCeleryBigDeliveryTagStreamed(t *testing.T) {
	rc := redistest.Start(t).Client()
	cases := append([]celeryUnackedCase{celeryLongTagCase(32<<20, "value_too_large in unacked_index")}, celeryUnackedCases[:3]...)
	writeCeleryUnacked(t, rc, cases)
	var got map[string]string
	if n := heaptest.Allocated(func() { got = readCeleryUnacked(t, rc) }); n > 4<<20 {
		t.Errorf("reading a 32 MB delivery tag allocated %d bytes", n)
	}
	checkCeleryUnacked(t, cases, got)
}

// takeShared does to a batch's reads what the tracker does: each queue's
// own figures come from the first read that names it, and the shared
// part's (unacked) are added to them, once; its bad data joins its
// carrier's. The reads' Extra become what the sweep counts.
func takeShared(reads []redisread.KeyRead) {
	type at struct {
		fr *FrameworkRead
		i  int
	}
	seen := map[string]at{}
	var shared *SharedRead
	var carrier *FrameworkRead
	for i := range reads {
		fr, _ := reads[i].Extra.(*FrameworkRead)
		if fr == nil {
			continue
		}
		own := &FrameworkRead{Bad: fr.Bad}
		for _, q := range fr.Queues {
			if _, dup := seen[q.Queue]; !dup {
				seen[q.Queue] = at{own, len(own.Queues)}
				own.Queues = append(own.Queues, q)
			}
		}
		if fr.Shared != nil && fr.Shared.once.take() {
			shared, carrier = fr.Shared, own
		}
		reads[i].Extra = own
	}
	if shared == nil {
		return
	}
	carrier.Bad = append(carrier.Bad, shared.Bad...)
	for _, sq := range shared.Queues {
		where, ok := seen[sq.Queue]
		if !ok {
			carrier.Queues = append(carrier.Queues, sq)
			continue
		}
		q := &where.fr.Queues[where.i]
		for s, n := range sq.Jobs {
			q.Jobs[s] += n
		}
		q.Orphans = append(q.Orphans, sq.Orphans...)
		if sq.OldestOrphaned >= 0 && (q.OldestOrphaned < 0 || sq.OldestOrphaned < q.OldestOrphaned) {
			q.OldestOrphaned = sq.OldestOrphaned
		}
	}
}
