package kind

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/slotexporter/slot_exporter/internal/heaptest"
	"github.com/slotexporter/slot_exporter/internal/jsonfields"
)

// The decoders of a whole job's JSON that the streaming scans replaced:
// what they made of a value is what the scans must make of it.
func wholeEnqueuedAt(v string) (int64, bool, error) {
	var p struct {
		EnqueuedAt *float64 `json:"enqueued_at"`
	}
	if err := json.Unmarshal([]byte(v), &p); err != nil {
		return 0, false, err
	}
	if p.EnqueuedAt == nil {
		return 0, false, nil
	}
	if !finite(*p.EnqueuedAt) {
		return 0, false, errors.New("not finite")
	}
	return int64(*p.EnqueuedAt * 1000), true, nil
}

func wholeEntryQueue(v string) (string, error) {
	var p struct {
		Queue string `json:"queue"`
	}
	err := json.Unmarshal([]byte(v), &p)
	return p.Queue, err
}

func wholeWork(v string) (sidekiqJob, error) {
	var w struct {
		Queue   string          `json:"queue"`
		Payload json.RawMessage `json:"payload"`
		RunAt   *float64        `json:"run_at"`
	}
	if err := json.Unmarshal([]byte(v), &w); err != nil {
		return sidekiqJob{}, err
	}
	raw := w.Payload
	if len(raw) == 0 || string(raw) == "null" {
		return sidekiqJob{}, errors.New("no payload")
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return sidekiqJob{}, err
		}
		raw = json.RawMessage(s)
	}
	var p sidekiqPayload
	if err := json.Unmarshal(raw, &p); err != nil {
		return sidekiqJob{}, err
	}
	j := sidekiqJob{JID: p.JID, Class: p.class(), Queue: w.Queue, Attempts: 1}
	if j.Queue == "" {
		j.Queue = p.Queue
	}
	if w.RunAt != nil {
		if !finite(*w.RunAt) {
			return sidekiqJob{}, errors.New("not finite")
		}
		j.RunAt = int64(*w.RunAt * 1000)
	}
	if p.RetryCount != nil {
		j.Attempts = *p.RetryCount + 2
	}
	if j.JID == "" {
		return sidekiqJob{}, errors.New("no jid")
	}
	return j, nil
}

var jsonScanSeeds = []string{
	`{"jid":"b","enqueued_at":1796183290.5}`,
	` { "enqueued_at" : 17e2 , "args" : [ 1 , -0.5e-3 , true , false , null , { } , [ ] , "x" ] } `,
	`{"enqueued_at":null}`, `null`, `[1,2]`, `"s"`, `12`, `true`, ``, `   `, `{`, `{"a"`, `{"a":}`, `{"a":1,}`,
	`{"a":[1,]}`, `{"a":01}`, `{"a":1.}`, `{"a":.5}`, `{"a":-}`, `{"a":1e}`, `{"a":1e+}`, `{"a":tru}`, `{"a":nul}`,
	`{"a":1}x`, `{"a":1} {}`, `{"a":"\x01"}`, `{"a":"\q"}`, `{"a":"\u12"}`, `{"a":"\u12G4"}`, `{1:2}`, `{"a" 1}`,
	`{"enqueued_at":"1"}`, `{"enqueued_at":1,"enqueued_at":2}`, `{"Enqueued_At":3}`, `{"enqueued\u005fat":4}`,
	`{"enqueued_at":1e400}`, `{"enqueued_at":-1}`, `{"x":{"enqueued_at":9}}`, `{"x":[{"enqueued_at":9}]}`,
	`{"queue":"mail","jid":"s1"}`, `{"queue":5}`, `{"queue":"a\"b\\c\u00e9\ud83d\ude00"}`, `{"queue":""}`,
	`{"queue":"default","payload":"{\"retry\":false,\"queue\":\"default\",\"class\":\"GateJob\",\"args\":[\"g1\"],\"jid\":\"2fc67ca77cb7be988257c582\",\"enqueued_at\":1796183252.0036457}","run_at":1796183256}`,
	`{"queue":"mail","payload":{"jid":"abc","class":"X","wrapped":"MailJob","retry_count":2},"run_at":1.5}`,
	`{"queue":"q","payload":"{oops"}`, `{"queue":"q"}`, `{"queue":"q","payload":"{}"}`, `{"payload":null}`,
	`{"payload":"null"}`, `{"payload":""}`, `{"payload":"{\"jid\":\"a\"} x"}`, `{"payload":[1]}`, `{"payload":7}`,
	`{"payload":"[1]"}`, `{"payload":"{\"jid\":\"\\u0041\\ud83d\\ude00\\ud800x\"}"}`, `{"payload":"{\u0022jid\u0022:\u0022u\u0022}"}`,
	`{"payload":{"jid":"a"},"payload":"{\"jid\":\"b\"}"}`, `{"payload":"{\"jid\":\"a\"}","payload":{"jid":"c"}}`,
	`{"payload":{"jid":"a","retry_count":1.5}}`, `{"payload":{"jid":"a","class":["x"]}}`, `{"payload":{"jid":"a"},"run_at":"x"}`,
	`{"payload":"{\"jid\":\"a\",\"jid\":\"z\"}"}`, `{"payload":{"jid":"a","x":{"jid":"no"}}}`, `{"payload":"\ud800"}`,
	`{"payload":"{\"jid\":\"a\ud800\"}"}`, `{"payload":"{\"jid\":\"\\ud800\\u0041\"}"}`, `{"payload":"{\"jid\":\"\\udc00\"}"}`,
	"{\"queue\":\"\xff\xfe\"}", "{\"payload\":{\"jid\":\"\xff\"}}", `{"PAYLOAD":{"JID":"k"}}`,
	`{"queue":"q","payload":"{\"jid\":\"a\",\"jid\":null}","run_at":1}`, `{"enqueued_at":1,"enqueued_at":null}`,
	`{"queue":"a","queue":null}`, `{"queue":null,"queue":"b"}`, `{"queue":5,"queue":"a"}`, `{"enqueued_at":"x","enqueued_at":1}`,
	`{"payload":{"jid":5,"jid":"a"}}`, `{"run_at":1e400,"run_at":1,"payload":{"jid":"a"}}`, `{"enqueued_at":null,"enqueued_at":7}`,
	`{"\u0065\u006e\u0071\u0075\u0065\u0075\u0065\u0064\u005f\u0061\u0074":1796183290}`,
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001), `{"a":` + strings.Repeat("[", 9999) + strings.Repeat("]", 9999) + `,"enqueued_at":5}`,
}

// sameAsWhole checks that the scans, fed v in pieces of n bytes, decode
// it as encoding/json decodes it whole.
func sameAsWhole(t *testing.T, v string, n int) {
	t.Helper()
	scans := newSidekiqScans()
	feed := func(s *jsonfields.Scan) {
		s.Reset()
		for rest := v; len(rest) > 0; {
			k := min(n, len(rest))
			_, _ = io.WriteString(s, rest[:k])
			rest = rest[k:]
		}
	}
	feed(scans.queued)
	at, ok, err := sidekiqEnqueuedAt(scans.queued)
	wat, wok, werr := wholeEnqueuedAt(v)
	if at != wat || ok != wok || (err == nil) != (werr == nil) {
		t.Errorf("queued %q in %d-byte pieces: %d %v %v, whole %d %v %v", v, n, at, ok, err, wat, wok, werr)
	}
	feed(scans.entry)
	q, err := sidekiqEntryQueue(scans.entry)
	wq, werr := wholeEntryQueue(v)
	if (err == nil) != (werr == nil) || err == nil && q != wq {
		t.Errorf("entry %q in %d-byte pieces: %q %v, whole %q %v", v, n, q, err, wq, werr)
	}
	feed(scans.work)
	j, err := sidekiqWork(scans.work)
	wj, werr := wholeWork(v)
	if j != wj || (err == nil) != (werr == nil) {
		t.Errorf("work %q in %d-byte pieces: %+v %v, whole %+v %v", v, n, j, err, wj, werr)
	}
}

// TestJSONScanMatchesWhole: streamed in pieces of any size, a job's JSON
// gives what encoding/json gives of the whole value (errors alike).
func TestJSONScanMatchesWhole(t *testing.T) {
	for _, v := range jsonScanSeeds {
		for _, n := range []int{1, 2, 3, 7, 64, len(v) + 1} {
			sameAsWhole(t, v, n)
		}
	}
}

func FuzzJSONScanMatchesWhole(f *testing.F) {
	for _, v := range jsonScanSeeds {
		f.Add(v, uint8(3))
	}
	f.Fuzz(func(t *testing.T, v string, n uint8) {
		if len(v) > jsonfields.FieldMax {
			return // a field may be longer than the scans keep
		}
		sameAsWhole(t, v, int(n)+1)
	})
}

// TestJSONScanHoldsLittle: the enqueued time of a 20 MB job, and the
// jid of a 20 MB job in a work entry's payload (a string of escaped
// JSON), are read while the scans allocate a small part of it; a field
// longer than jsonfields.FieldMax is too large, not kept.
func TestJSONScanHoldsLittle(t *testing.T) {
	args := strings.Repeat("a", 20<<20)
	job := `{"class":"Big","args":["` + args + `",{"k":[1,2,"\n"]}],"jid":"j1","enqueued_at":1796183290.5,"queue":"default"}`
	work, err := json.Marshal(map[string]any{"queue": "default", "payload": job, "run_at": 1796183291})
	mustNil(t, err)
	queued := []byte(job)
	scans := newSidekiqScans()
	var at int64
	var ok bool
	var j sidekiqJob
	var werr error
	n := heaptest.Allocated(func() {
		for off := 0; off < len(queued); off += 64 << 10 {
			_, _ = scans.queued.Write(queued[off:min(off+64<<10, len(queued))])
		}
		at, ok, err = sidekiqEnqueuedAt(scans.queued)
		for off := 0; off < len(work); off += 64 << 10 {
			_, _ = scans.work.Write(work[off:min(off+64<<10, len(work))])
		}
		j, werr = sidekiqWork(scans.work)
	})
	if at != 1796183290500 || !ok || err != nil {
		t.Errorf("the 20 MB job's enqueued_at: %d %v %v", at, ok, err)
	}
	if j.JID != "j1" || j.Queue != "default" || j.RunAt != 1796183291000 || werr != nil {
		t.Errorf("the 20 MB job's work entry: %+v %v", j, werr)
	}
	if n > 1<<20 {
		t.Errorf("scanning two 20 MB values allocated %d bytes", n)
	}

	scans.entry.Reset()
	_, _ = io.WriteString(scans.entry, `{"queue":"`+strings.Repeat("q", jsonfields.FieldMax)+`"}`)
	if _, err := sidekiqEntryQueue(scans.entry); !errors.Is(err, errJSONFieldTooLarge) || skipReasonOf(err).String() != "value_too_large" {
		t.Errorf("a queue name longer than %d bytes: %v", jsonfields.FieldMax, err)
	}
}
