package kind

import (
	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/redisread"
	"github.com/slotexporter/slot_exporter/internal/snapshot"
	"github.com/slotexporter/slot_exporter/internal/track"
)

// Queue frameworks (bullmq, sidekiq, rq, celery) share one tracker,
// framework, and differ in their layout: what they read of Redis and how
// they classify the jobs they find. The queue is their unit and stands
// where a user stands: its used value is its orphaned jobs (started, owner
// gone), so its floor age is how long it has held orphans without a break;
// a queue with orphaned, stuck or overdue jobs is an anomaly, first under
// the series cap; one with jobs but no anomaly is Listed, after them.
//
// The sweep discovers a framework's keys like any family's (the pattern
// comes from config: <prefix>:*:id for bullmq, the set that lists the
// queues for sidekiq and rq, kombu's binding sets for celery) and hands
// each batch to the layout's Reads, which reads, pipelined on the same
// connection, whatever the layout needs per queue, and leaves a
// *FrameworkRead in KeyRead.Extra. The discovery key's status (gone,
// wrong type, moved) is judged as for any key.

// JobState indexes slot_jobs{state}.
type JobState uint8

// Job states, in catalog order.
const (
	JobWaiting   JobState = iota // queued, not started
	JobActive                    // started, owner alive
	JobOrphaned                  // started, owner gone
	JobStuck                     // started longer than max_hold ago, owner still renewing
	JobScheduled                 // due later (delayed, scheduled, retries)
	JobOverdue                   // scheduled, due more than max_wait ago: nothing moves it
	NumJobStates
)

var jobStateNames = [NumJobStates]string{"waiting", "active", "orphaned", "stuck", "scheduled", "overdue"}

func (s JobState) String() string {
	if s < NumJobStates {
		return jobStateNames[s]
	}
	return "unknown"
}

// JobStateNames are the label values of slot_jobs{state}.
func JobStateNames() [NumJobStates]string { return jobStateNames }

// WorkerState indexes slot_workers{state}.
type WorkerState uint8

// Worker states.
const (
	WorkerLive WorkerState = iota
	WorkerDead
	NumWorkerStates
)

var workerStateNames = [NumWorkerStates]string{"live", "dead"}

// maxOrphansListed bounds the orphaned jobs kept per queue for the
// on-call page; the counts are exact beyond it.
const maxOrphansListed = 100

// Job is one job as the on-call page lists it.
type Job struct {
	ID   string
	Name string
	// Started is when it started (Redis ms), -1 when unknown.
	Started  int64
	Attempts int64
}

// QueueJobs is what a layout found of one queue in a sweep.
type QueueJobs struct {
	Queue string
	Jobs  [NumJobStates]int64
	// OldestWaiting is when the oldest waiting job was enqueued, and
	// OldestOrphaned when the oldest orphaned job started (Redis ms); -1
	// when there is none or it is not known.
	OldestWaiting, OldestOrphaned int64
	// Orphans are up to maxOrphansListed of its orphaned jobs.
	Orphans []Job
}

// NewQueueJobs returns an empty queue's figures.
func NewQueueJobs(queue string) QueueJobs {
	return QueueJobs{Queue: queue, OldestWaiting: -1, OldestOrphaned: -1}
}

// AddOrphan counts one orphaned job and lists it while there is room.
func (q *QueueJobs) AddOrphan(j Job) {
	q.Jobs[JobOrphaned]++
	if j.Started >= 0 && (q.OldestOrphaned < 0 || j.Started < q.OldestOrphaned) {
		q.OldestOrphaned = j.Started
	}
	if len(q.Orphans) < maxOrphansListed {
		q.Orphans = append(q.Orphans, j)
	}
}

// Waited notes a waiting job enqueued at t (Redis ms).
func (q *QueueJobs) Waited(t int64) {
	if t >= 0 && (q.OldestWaiting < 0 || t < q.OldestWaiting) {
		q.OldestWaiting = t
	}
}

// BadData is one piece of a layout's data that was skipped: a job hash
// that is not a hash, a lock of the wrong type, a score that is not a
// number. It counts in keys_skipped_total{reason} and is logged once.
type BadData struct {
	Key    string
	Reason redisread.SkipReason
	Detail string
	// Vanished marks a key that one round of reads named and the next
	// found missing: a job that ended between the two (finished and
	// removed, or the data flushed) looks the same once. It is bad data
	// only when it is missing in two sweeps in a row.
	Vanished bool
}

// FrameworkRead is what a layout's Reads leaves in KeyRead.Extra for one
// discovery key.
type FrameworkRead struct {
	Queues []QueueJobs
	// Workers by state, for layouts that register workers.
	Workers [NumWorkerStates]int64
	Bad     []BadData
	// Extra is the layout's own, for its settle (a sidekiq process's work
	// entries, seen to count them lost when they vanish).
	Extra any
	// Shared, on the one read that carries it, is what the sweep's read
	// of the keys every discovery key shares found (framework_shared.go).
	Shared *SharedRead
}

// frameworkLayout is one framework's reading of Redis.
type frameworkLayout interface {
	// configure takes the family's settings (at start and on reload).
	configure(f *config.Family)
	// reads returns what to read of each discovery key in a sweep at
	// Redis time now (ms).
	reads(now int64) redisread.Reads
	// settle ends a complete sweep with what it read, and returns how
	// many started jobs vanished with their owner since the last one
	// (slot_jobs_lost_total). lost is set when the data vanished (a
	// restart, a flush): nothing is counted lost then. Layouts that can
	// see no such thing return 0.
	settle(reads []*FrameworkRead, lost bool) int64
	// registersWorkers reports whether the framework registers its
	// workers (slot_workers is published for it).
	registersWorkers() bool
	// recovery says how the framework itself requeues orphaned jobs,
	// for the on-call page.
	recovery() string
}

// registerFramework adds a framework kind with its layout.
func registerFramework(k config.Kind, newLayout func() frameworkLayout) {
	register(k, func(f *config.Family, s *config.Sampling) Tracker {
		t := &framework{layout: newLayout()}
		t.Reconfigure(f, s)
		return t
	})
}

// framework is the tracker of every queue framework's family.
type framework struct {
	layout frameworkLayout
	cfg    *config.Family
	cur    frameworkSweep
	last   frameworkSweep
	lost   uint64
	// badSeen are the bad pieces (key and detail) logged in the last
	// sweep: one line when one turns bad, not one per sweep.
	badSeen, badNow map[string]struct{}
	// vanishedPrev and vanishedNow are the Vanished pieces first seen in
	// the last sweep and in this one.
	vanishedPrev, vanishedNow map[string]struct{}
}

type frameworkSweep struct {
	now     int64
	jobs    [NumJobStates]int64
	oldest  [2]int64 // waiting, orphaned: Redis ms, -1 none
	workers [NumWorkerStates]int64
	queues  map[string]*QueueJobs
	// own: the queues whose own figures are in (applyQueue).
	own   map[string]bool
	reads []*FrameworkRead
}

func (t *framework) Reconfigure(f *config.Family, _ *config.Sampling) {
	t.cfg = f
	t.layout.configure(f)
}

func (t *framework) Limits() track.Limits { return track.Limits{} }

func (t *framework) Begin(sw *Sweep) redisread.Reads {
	t.cur = frameworkSweep{now: sw.Now, oldest: [2]int64{-1, -1}, queues: map[string]*QueueJobs{}, own: map[string]bool{}}
	t.badNow = map[string]struct{}{}
	t.vanishedNow = map[string]struct{}{}
	return t.layout.reads(sw.Now)
}

func (t *framework) Apply(sw *Sweep, k Key) {
	fr, ok := k.Read.Extra.(*FrameworkRead)
	if !ok {
		return
	}
	t.cur.reads = append(t.cur.reads, fr)
	for i := range t.cur.workers {
		t.cur.workers[i] += fr.Workers[i]
	}
	t.applyBad(sw, fr.Bad)
	for i := range fr.Queues {
		t.applyQueue(sw, &fr.Queues[i], false)
	}
	t.applyShared(sw, fr.Shared)
}

// applyBad counts and logs a read's bad data.
func (t *framework) applyBad(sw *Sweep, bad []BadData) {
	for _, b := range bad {
		// A shared key (celery's unacked) holds many pieces: each is
		// logged once.
		id := b.Key + "\x00" + b.Detail
		if _, counted := t.badNow[id]; counted {
			// Found twice in one sweep (a celery queue bound in two
			// batches' binding keys): one bad piece, counted once.
			continue
		}
		if _, again := t.vanishedPrev[id]; b.Vanished && !again {
			if _, bad := t.badSeen[id]; !bad {
				t.vanishedNow[id] = struct{}{}
				continue
			}
		}
		t.badNow[id] = struct{}{}
		if sw.Skipped != nil {
			sw.Skipped[b.Reason]++
		}
		if _, seen := t.badSeen[id]; !seen && sw.Log != nil {
			sw.Log.Warn("skipping bad "+string(t.cfg.Kind)+" data (counted in slot_exporter_keys_skipped_total)",
				"key", b.Key, "reason", b.Reason.String(), "detail", b.Detail)
		}
	}
}

func (t *framework) End(_ *Sweep, lost, deferEnds bool) Ended {
	t.badSeen = t.badNow
	t.vanishedPrev = t.vanishedNow
	if !deferEnds {
		t.lost += uint64(max(t.layout.settle(t.cur.reads, lost), 0))
	}
	t.cur.reads = nil
	t.last = t.cur
	return Ended{}
}

func (t *framework) Publish(f *snapshot.Family) {
	g := &t.last
	for s, name := range jobStateNames {
		f.Gauges = append(f.Gauges, gauge(snapshot.Jobs, float64(g.jobs[s]), name))
	}
	for i, name := range [2]string{"waiting", "orphaned"} {
		f.Gauges = append(f.Gauges, gauge(snapshot.JobsOldest, ageSeconds(g.oldest[i], g.now), name))
	}
	if t.layout.registersWorkers() {
		for s, name := range workerStateNames {
			f.Gauges = append(f.Gauges, gauge(snapshot.Workers, float64(g.workers[s]), name))
		}
	}
	f.Counters = append(f.Counters, gauge(snapshot.JobsLost, float64(t.lost)))
}

func (t *framework) UserExtra(v track.UserView) []snapshot.Value {
	q := t.last.queues[v.User] // a queue's name
	if q == nil {
		return nil
	}
	out := make([]snapshot.Value, 0, NumJobStates)
	for s, name := range jobStateNames {
		out = append(out, gauge(snapshot.QueueJobs, float64(q.Jobs[s]), name))
	}
	return out
}

// ageSeconds is the age at now of a Redis time (ms), 0 when there is none
// and never below 0 (a clock stepped back).
func ageSeconds(at, now int64) float64 {
	if at < 0 {
		return 0
	}
	return float64(max(now-at, 0)) / 1000
}

// QueueView is one queue of a framework family as the on-call page shows
// it, from the latest complete sweep.
type QueueView struct {
	QueueJobs
	// Now is that sweep's Redis time (ms), which the jobs' ages count to.
	Now int64
	// Recovery says how the framework itself requeues orphaned jobs.
	Recovery string
}

// QueueOf returns a framework family's queue from its latest sweep; false
// when t is not a framework's tracker or the queue was not seen.
func QueueOf(t Tracker, queue string) (QueueView, bool) {
	fw, ok := t.(*framework)
	if !ok {
		return QueueView{}, false
	}
	v := QueueView{Now: fw.last.now, Recovery: fw.layout.recovery()}
	q := fw.last.queues[queue]
	if q == nil {
		return v, false
	}
	v.QueueJobs = *q
	return v, true
}

// IsFramework reports whether t is a queue framework's tracker: one whose
// users are queues, which the release button never writes to.
func IsFramework(t Tracker) bool {
	_, ok := t.(*framework)
	return ok
}
