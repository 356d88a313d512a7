package track

// HeadTracker remembers, per queue, which element is next at its pop side
// and since when: an element that stays next while time passes is work
// nobody takes. Elements are known only by a hash of their value, never
// kept: a job can be megabytes.
//
// Two different elements with the same value (or the same 64-bit hash)
// look like one: a queue whose new head equals the one before reads as not
// having moved. Jobs carry unique ids in every sane queue (a reliable
// queue's completion removes a job by value, so it needs them anyway).
type HeadTracker struct {
	queues map[uint64]headRec // by key hash
	gen    uint32
}

type headRec struct {
	head  uint64 // hash of the next element
	since int64  // Redis time (ms) of the first sweep that saw it next
	gen   uint32 // the sweep that last saw the queue
}

// NewHeadTracker returns an empty tracker.
func NewHeadTracker() *HeadTracker { return &HeadTracker{queues: map[uint64]headRec{}} }

// Len is the number of queues remembered.
func (t *HeadTracker) Len() int { return len(t.queues) }

// Begin starts a sweep.
func (t *HeadTracker) Begin() { t.gen++ }

// Observe records that head is next in queue key at Redis time now (ms),
// and returns for how long it has been next, in ms. A queue seen for the
// first time starts its wait at now: what came before is not known.
//
// Redis time can step back: a head first seen "after" now is moved to now,
// so that a wait is never negative and does not freeze until the clock
// catches up with the old reading.
func (t *HeadTracker) Observe(key, head uint64, now int64) int64 {
	r, ok := t.queues[key]
	if !ok || r.head != head || r.since > now {
		r.head, r.since = head, now
	}
	r.gen = t.gen
	t.queues[key] = r
	return now - r.since
}

// Sweep forgets the queues not observed since Begin (emptied, deleted, or
// gone with the data), except those whose key is in carry: they could not
// be read in this sweep, and their head keeps its age.
func (t *HeadTracker) Sweep(carry Carry) {
	for k, r := range t.queues {
		if r.gen == t.gen {
			continue
		}
		if _, ok := carry[uint32(k)]; ok {
			continue
		}
		delete(t.queues, k)
	}
}
