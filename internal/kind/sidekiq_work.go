package kind

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/slotexporter/slot_exporter/internal/jsonfields"
)

// sidekiqJob is what the exporter keeps of one job a Sidekiq process was
// working on, from a value of its work hash.
type sidekiqJob struct {
	JID      string
	Class    string
	Queue    string
	RunAt    int64 // Unix ms the process started it
	Attempts int64 // retry_count + 1 once retried, else 1
}

// A work hash value, as Sidekiq 6.4's heartbeat (Launcher#❤) writes it:
// {"queue":"default","payload":"<the job's JSON>","run_at":1700000000}.
// payload is the job's JSON as a string since Sidekiq 6.0 (#4316); older
// releases, and Sidekiq 7's `<identity>:work` where it is a hash, nest it
// as an object. Both are read. The payload is decoded from what a
// jsonfields.Scan kept of it, not whole (sidekiqScans).
type sidekiqWorkValue struct {
	Queue string   `json:"queue"`
	RunAt *float64 `json:"run_at"`
}

type sidekiqPayload struct {
	JID        string   `json:"jid"`
	Class      any      `json:"class"`
	Wrapped    string   `json:"wrapped"`
	Queue      string   `json:"queue"`
	RetryCount *int64   `json:"retry_count"`
	EnqueuedAt *float64 `json:"enqueued_at"`
}

// sidekiqScans are the scans a Sidekiq read streams each job's JSON
// through, each keeping only the fields sidekiqPayload and
// sidekiqWorkValue decode; one of each per read, reset from value to
// value.
type sidekiqScans struct {
	queued *jsonfields.Scan // a job in a queue: enqueued_at
	entry  *jsonfields.Scan // a schedule or retry entry: queue
	work   *jsonfields.Scan // a work entry, and its payload's job
}

var sidekiqJobFields = []string{"jid", "class", "wrapped", "queue", "retry_count", "enqueued_at"}

func newSidekiqScans() *sidekiqScans {
	return &sidekiqScans{
		queued: jsonfields.New([]string{"enqueued_at"}, "", nil),
		entry:  jsonfields.New([]string{"queue"}, "", nil),
		work:   jsonfields.New([]string{"queue", "run_at", "payload"}, "payload", jsonfields.New(sidekiqJobFields, "", nil)),
	}
}

// errJSONFieldTooLarge: a field the exporter reads is longer than
// jsonfields.FieldMax (counted as value_too_large).
var errJSONFieldTooLarge = errors.New("longer than the exporter reads")

// decodeKept decodes what scan s kept of a JSON object into v, for a
// value described as what ("work entry"): a syntax error, a value that
// is not an object, a field too long or of the wrong type is an error.
func decodeKept(s *jsonfields.Scan, syntaxErr error, what string, v any) error {
	switch {
	case syntaxErr != nil:
		return fmt.Errorf("%s is not JSON: %w", what, syntaxErr)
	case s.Top() != '{' && s.Top() != 'n':
		// As encoding/json says it of a struct.
		return fmt.Errorf("%s is not JSON: json: cannot unmarshal %s into an object", what, jsonfields.KindOf(s.Top()))
	case s.TooLong() != "":
		return fmt.Errorf("%s's %s is %w (%d bytes)", what, s.TooLong(), errJSONFieldTooLarge, jsonfields.FieldMax)
	}
	if err := json.Unmarshal(s.Object(), v); err != nil {
		return fmt.Errorf("%s is not JSON: %w", what, err)
	}
	return nil
}

// parseSidekiqWork reads one work hash value. An error says what is wrong
// with it, for the log line of a skipped entry.
func parseSidekiqWork(v string) (sidekiqJob, error) {
	s := newSidekiqScans().work
	_, _ = io.WriteString(s, v)
	return sidekiqWork(s)
}

// sidekiqWork is the job of a work entry scanned by s (sidekiqScans.work).
func sidekiqWork(s *jsonfields.Scan) (sidekiqJob, error) {
	var w sidekiqWorkValue
	if err := decodeKept(s, s.Finish(), "work entry", &w); err != nil {
		return sidekiqJob{}, err
	}
	var p sidekiqPayload
	switch s.NestedKind() {
	case 0, 'n':
		return sidekiqJob{}, errors.New("work entry has no payload")
	case '{', '"':
		if err := decodeKept(s.Nested(), s.NestedErr(), "work entry's payload", &p); err != nil {
			return sidekiqJob{}, err
		}
	default:
		return sidekiqJob{}, fmt.Errorf("work entry's payload is not a job's JSON: a JSON %s", jsonfields.KindOf(s.NestedKind()))
	}
	j := sidekiqJob{JID: p.JID, Class: p.class(), Queue: w.Queue, Attempts: 1}
	if j.Queue == "" {
		j.Queue = p.Queue
	}
	if w.RunAt != nil {
		if !finite(*w.RunAt) {
			return sidekiqJob{}, errors.New("work entry's run_at is not a finite number")
		}
		j.RunAt = int64(*w.RunAt * 1000)
	}
	if p.RetryCount != nil {
		j.Attempts = *p.RetryCount + 2
	}
	if j.JID == "" {
		return sidekiqJob{}, errors.New("work entry's payload has no jid")
	}
	return j, nil
}

// class is the job's class; ActiveJob's wrapper names the real one in
// wrapped, as Sidekiq's own Web UI shows it.
func (p sidekiqPayload) class() string {
	if p.Wrapped != "" {
		return p.Wrapped
	}
	if s, ok := p.Class.(string); ok {
		return s
	}
	return ""
}

// parseSidekiqEnqueuedAt reads enqueued_at (Unix seconds, a float) of a
// job's JSON in a queue list, in ms. ok is false without one (Sidekiq's
// own latency then counts 0; the exporter reports no age for it).
func parseSidekiqEnqueuedAt(v string) (int64, bool, error) {
	s := newSidekiqScans().queued
	_, _ = io.WriteString(s, v)
	return sidekiqEnqueuedAt(s)
}

// sidekiqEnqueuedAt is parseSidekiqEnqueuedAt of a job scanned by s
// (sidekiqScans.queued).
func sidekiqEnqueuedAt(s *jsonfields.Scan) (int64, bool, error) {
	var p sidekiqPayload
	if err := decodeKept(s, s.Finish(), "queued job", &p); err != nil {
		return 0, false, err
	}
	if p.EnqueuedAt == nil {
		return 0, false, nil
	}
	if !finite(*p.EnqueuedAt) {
		return 0, false, errors.New("queued job's enqueued_at is not a finite number")
	}
	return int64(*p.EnqueuedAt * 1000), true, nil
}

// sidekiqEntryQueue is the queue of a schedule or retry entry scanned by
// s (sidekiqScans.entry); "" when it names none.
func sidekiqEntryQueue(s *jsonfields.Scan) (string, error) {
	var p sidekiqPayload
	if err := decodeKept(s, s.Finish(), "entry", &p); err != nil {
		return "", err
	}
	return p.Queue, nil
}

// parseSidekiqBeat reads a heartbeat's beat (Time.now.to_f) in ms.
func parseSidekiqBeat(v string) (int64, error) {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || !finite(f) {
		return 0, fmt.Errorf("heartbeat's beat %q is not a number", v)
	}
	return int64(f * 1000), nil
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// sidekiqProcesses remembers, per Sidekiq process, the jobs its work hash
// held when it was last read and the heartbeat (beat) it was read with,
// to tell a job that finished from one that was lost.
//
// Sidekiq 6.4 rewrites a process's work hash and then its heartbeat hash
// every 5 s, each with a 60 s TTL, in two MULTI blocks. A job gone from
// the work hash is judged by what happened to its process since it was
// last seen:
//
//   - the process beat again (beat moved): it rewrote its work without
//     the job, which finished, failed into `retry` or `dead`, or was
//     requeued by a shutdown: ended;
//   - the heartbeat hash is gone: work hash and heartbeat expired
//     together, the process stopped beating with the job in hand. OSS
//     Sidekiq never requeues it: lost;
//   - the heartbeat is still there, not moved, and the process left the
//     `processes` set: a graceful stop (Launcher#clear_heartbeat removes
//     it from `processes` and unlinks the work hash, after requeueing what
//     it could not finish): ended;
//   - otherwise (still listed, same beat) the read fell between the two
//     MULTI blocks, or the work hash expired moments before its heartbeat:
//     the job stays pending and is judged at the next sweep.
//
// What it cannot see: a job started and killed between two heartbeats
// (within 5 s) is never written to Redis; a process that died before the
// exporter first read it, or whose hashes expired while the exporter was
// not sweeping, leaves nothing to count. A graceful stop whose heartbeat
// expires before the next sweep reads as lost.
type sidekiqProcesses struct {
	procs map[string]*sidekiqProcess
}

type sidekiqProcess struct {
	beat    int64 // ms; 0 before a heartbeat was read
	jobs    map[string]sidekiqJob
	pending map[string]sidekiqJob
	seen    bool // in this sweep
}

// sidekiqSighting is one sweep's read of a process.
type sidekiqSighting struct {
	Listed    bool  // in the `processes` set
	Heartbeat bool  // its heartbeat hash exists
	Beat      int64 // ms, when Heartbeat
	// Work is what its work hash holds, by jid (nil: no work hash).
	Work map[string]sidekiqJob
}

func newSidekiqProcesses() *sidekiqProcesses {
	return &sidekiqProcesses{procs: map[string]*sidekiqProcess{}}
}

// begin starts a sweep.
func (s *sidekiqProcesses) begin() {
	for _, p := range s.procs {
		p.seen = false
	}
}

// remembered lists the processes with jobs still to judge, which the sweep
// must read even when `processes` no longer lists them.
func (s *sidekiqProcesses) remembered() []string {
	out := make([]string, 0, len(s.procs))
	for id, p := range s.procs {
		if len(p.jobs)+len(p.pending) > 0 {
			out = append(out, id)
		}
	}
	return out
}

// observe folds one sweep's read of a process and returns the jobs found
// lost in it.
func (s *sidekiqProcesses) observe(id string, r sidekiqSighting) (lost []sidekiqJob) {
	p := s.procs[id]
	if p == nil {
		if !r.Listed && !r.Heartbeat && len(r.Work) == 0 {
			return nil
		}
		p = &sidekiqProcess{}
		s.procs[id] = p
	}
	p.seen = true
	beatMoved := r.Heartbeat && r.Beat != p.beat
	judge := func(j sidekiqJob) {
		switch {
		case beatMoved:
		case !r.Heartbeat:
			lost = append(lost, j)
		case !r.Listed:
		default:
			if p.pending == nil {
				p.pending = map[string]sidekiqJob{}
			}
			p.pending[j.JID] = j
		}
	}
	pending := p.pending
	p.pending = nil
	for jid, j := range pending {
		if _, still := r.Work[jid]; !still {
			judge(j)
		}
	}
	for jid, j := range p.jobs {
		if _, still := r.Work[jid]; !still {
			if _, was := pending[jid]; !was {
				judge(j)
			}
		}
	}
	p.jobs = r.Work
	if r.Heartbeat {
		p.beat = r.Beat
	}
	if !r.Listed && !r.Heartbeat && len(r.Work) == 0 && len(p.pending) == 0 {
		delete(s.procs, id)
	}
	return lost
}

// end forgets the processes a complete sweep did not read: gone from
// `processes` with nothing left to judge.
func (s *sidekiqProcesses) end() {
	for id, p := range s.procs {
		if !p.seen {
			delete(s.procs, id)
		}
	}
}
