package kind

import (
	"sync"

	"github.com/cespare/xxhash/v2"

	"github.com/slotexporter/slot_exporter/internal/redisread"
	"github.com/slotexporter/slot_exporter/internal/track"
)

// A layout may read, beside its discovery keys, keys that all of them
// share (celery's unacked and unacked_index), once a sweep. Without hash
// tags those keys live on any node of a cluster, so the read that takes
// them on may be answered MOVED or ASK and be read again through the
// cluster client, fail and be read again by the next attempt, or be
// dropped by the sweep as a duplicate of a key read on two nodes while
// its slot moved. Deciding "read this sweep" when the read was sent lost
// the shared figures in each of those cases (a cluster counted no
// unacked message whenever unacked_index lived on another master than
// the first bindings read). So the decision is made when the figures join
// the sweep: a read claims the shared part (sharedOnce.claim), gives it
// back if its carrier does not come out read (release), and the tracker
// takes it once, whichever read carries it (take).

// sharedOnce is one sweep's "the shared part has been read": the one
// place that decides it.
type sharedOnce struct {
	mu      sync.Mutex
	claimed bool // a read is under way that carries it
	taken   bool // its figures are in the sweep
}

// claim reports whether the caller should read the shared part: neither
// taken, nor carried by a read under way (which would double its cost).
func (o *sharedOnce) claim() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.claimed || o.taken {
		return false
	}
	o.claimed = true
	return true
}

// release gives back a claim whose read will not carry the part into
// the sweep (it failed, or its carrier is to be read again).
func (o *sharedOnce) release() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.claimed = false
}

// take reports whether a carried part joins the sweep: the first does.
func (o *sharedOnce) take() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.taken {
		return false
	}
	o.taken, o.claimed = true, false
	return true
}

// SharedRead is what a read found of the shared keys: per queue the jobs
// they show (added to the queue's own figures, not in their place), and
// their bad data.
type SharedRead struct {
	FrameworkRead
	once *sharedOnce
}

// SharedKeeper is a tracker whose reads may carry a shared part. A read
// that the sweep drops, because it applied that key's read already,
// still hands over its shared part, which no other read carries.
type SharedKeeper interface {
	KeepShared(sw *Sweep, r *redisread.KeyRead)
}

// KeepShared takes the shared part of a read the sweep dropped.
func (t *framework) KeepShared(sw *Sweep, r *redisread.KeyRead) {
	if fr, ok := r.Extra.(*FrameworkRead); ok {
		t.applyShared(sw, fr.Shared)
	}
}

func (t *framework) applyShared(sw *Sweep, s *SharedRead) {
	if s == nil || !s.once.take() {
		return
	}
	t.applyBad(sw, s.Bad)
	for i := range s.Queues {
		t.applyQueue(sw, &s.Queues[i], true)
	}
}

// applyQueue adds a queue's figures from one read: its own (shared
// false), taken from the first read that names the queue, or those of the
// shared keys, added to them.
func (t *framework) applyQueue(sw *Sweep, q *QueueJobs, shared bool) {
	if !t.cfg.Watches(q.Queue) {
		return
	}
	if !shared {
		if t.cur.own[q.Queue] {
			// Named twice (a celery queue bound to two exchanges): read
			// once is enough.
			return
		}
		t.cur.own[q.Queue] = true
	}
	cur := t.cur.queues[q.Queue]
	if cur == nil {
		nq := NewQueueJobs(q.Queue)
		cur = &nq
		t.cur.queues[q.Queue] = cur
	}
	var any int64
	for s, n := range q.Jobs {
		cur.Jobs[s] += n
		t.cur.jobs[s] += n
		any += n
	}
	cur.Waited(q.OldestWaiting)
	if q.OldestOrphaned >= 0 && (cur.OldestOrphaned < 0 || q.OldestOrphaned < cur.OldestOrphaned) {
		cur.OldestOrphaned = q.OldestOrphaned
	}
	cur.Orphans = append(cur.Orphans, q.Orphans[:min(len(q.Orphans), maxOrphansListed-len(cur.Orphans))]...)
	for i, at := range [2]int64{q.OldestWaiting, q.OldestOrphaned} {
		if at >= 0 && (t.cur.oldest[i] < 0 || at < t.cur.oldest[i]) {
			t.cur.oldest[i] = at
		}
	}
	var flags uint8
	switch {
	case q.Jobs[JobOrphaned]+q.Jobs[JobStuck]+q.Jobs[JobOverdue] > 0:
		flags = track.AnomalyKind
	case any > 0:
		flags = track.Listed
	}
	// The floor adds up a user's parts, and their flags.
	sw.Floor.Add(xxhash.Sum64String(q.Queue), q.Queue, q.Jobs[JobOrphaned], flags)
}
