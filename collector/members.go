package collector

import (
	"math"

	"github.com/cespare/xxhash/v2"
)

// memberRec is what the exporter remembers of one slot-set member between
// sweeps. It is kept small on purpose: a million sets hold about 1.6 million
// of these, so the member itself is only known by a 64-bit hash.
type memberRec struct {
	score float64 // last score seen, milliseconds
	first int64   // Redis time (ms) of the sweep that first saw it
	last  int64   // Redis time (ms) of the last sweep that saw it
	key   uint32  // low half of the key's hash: lets a key that could not be read keep its members
	state MemberState
}

// memberHash identifies a member of a key. The separator byte keeps
// ("ab","c") and ("a","bc") apart.
func memberHash(d *xxhash.Digest, key, member string) uint64 {
	d.Reset()
	_, _ = d.WriteString(key)
	_, _ = d.Write([]byte{0})
	_, _ = d.WriteString(member)
	return d.Sum64()
}

// Observation is what MemberTracker.Observe learnt of one member.
type Observation struct {
	State      MemberState
	New        bool  // first time seen: an acquire
	Heartbeats int64 // heartbeats inferred from the score moving forward
	Duplicate  bool  // already seen in this sweep (a key read twice during a cluster reshard)
}

// Ended describes holds that ended in one sweep.
type Ended struct {
	Released, Expired, Lost int64
	Durations               []float64 // seconds, one per ended hold
}

// MemberTracker remembers each member's first-seen time and last score
// across sweeps, and turns differences between sweeps into acquires,
// heartbeats and ended holds.
type MemberTracker struct {
	m map[uint64]memberRec
}

// NewMemberTracker returns an empty tracker.
func NewMemberTracker() *MemberTracker {
	return &MemberTracker{m: make(map[uint64]memberRec)}
}

// Len is the number of tracked members.
func (t *MemberTracker) Len() int { return len(t.m) }

// Observe records one member seen at Redis time now (ms) with the given
// score (ms). hb is the family's heartbeat interval in ms.
func (t *MemberTracker) Observe(h uint64, keyHash uint64, score float64, now int64, rules *SlotRules) Observation {
	rec, ok := t.m[h]
	var o Observation
	switch {
	case !ok:
		o.New = true
		rec = memberRec{score: score, first: now, key: uint32(keyHash)}
	case rec.last == now:
		return Observation{State: rec.state, Duplicate: true}
	default:
		if d := score - rec.score; d > 0 && !math.IsInf(d, 0) {
			n := int64(math.Round(d / rules.Heartbeat))
			if n < 1 {
				n = 1
			}
			o.Heartbeats = n
		}
		rec.score = score
	}
	rec.last = now
	rec.state = rules.Classify(score, float64(now), float64(rec.first))
	t.m[h] = rec
	o.State = rec.state
	return o
}

// Carry keeps every member of a key that could not be read in this sweep
// (oversized, or an error local to that key), so that it does not count
// as ended.
type Carry map[uint32]struct{}

// Sweep ends the members not seen at Redis time now. A member whose last
// state was live, zombie or future was released; stale or expired means the
// holder died and the TTL cleaned up. When lost is true the whole keyspace
// vanished at once (Redis restarted empty): every gone member is lost.
func (t *MemberTracker) Sweep(now int64, carry Carry, lost bool) Ended {
	var e Ended
	for h, rec := range t.m {
		if rec.last == now {
			continue
		}
		if _, ok := carry[rec.key]; ok {
			continue
		}
		delete(t.m, h)
		switch {
		case lost:
			e.Lost++
		case rec.state == StateStale || rec.state == StateExpired:
			e.Expired++
		default:
			e.Released++
		}
		e.Durations = append(e.Durations, float64(rec.last-rec.first)/1000)
	}
	return e
}
