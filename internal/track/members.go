package track

import (
	"math"

	"github.com/slotexporter/slot_exporter/internal/keytable"
)

// memberSlot is what the exporter remembers of one slot-set member between
// sweeps. A million sets hold about 2.3 million of these, so it is 20
// bytes without pointers (the garbage collector never scans the table):
// the member is known by a hash, its score by its distance from the
// tracker's score base, and times by the generation (the sweep) they were
// seen in. At 24 bytes, with a float64 score, the table was 65 MB of the
// outside measurement's 180 MB; no field is 8 bytes wide, so that the
// slot packs to 20 and not 24.
type memberSlot struct {
	// hLo and hHi are the identity (id): the low half of the key's hash
	// (which lets a key that could not be read keep its members) over
	// the low half of the member's; 0 marks a free slot.
	hLo, hHi uint32
	// score is the last score seen, in the key's own score unit, less
	// the tracker's base; scoreWide: the score is in the tracker's wide
	// map (fractional, or too far from the base).
	score int32
	first uint32 // generation of the sweep that first saw it
	// genState is the generation of the last sweep that saw it (low 29
	// bits: 85 years of 5-second sweeps) and its state then (top 3 bits).
	genState uint32
}

const (
	genBits = 29
	genMask = 1<<genBits - 1
	// maxLoad and growth: a part grows by an eighth once it is 90% full,
	// so parts are 80-90% full, 85% on average. Parts grow at different
	// times; 64 parts grown by half at 80% were 67% full on average, 93
	// MB at 2.6M members against 83 MB in one table that happened to be
	// 75% full (`make bench`'s outside measurement). By a quarter at 85%
	// they were 77% full: 57.8 MB on average from 1M to 2.7M members,
	// 52.2 MB now. A sighting costs more probes, in slots next to each
	// other (medians of 5): BenchmarkObserve 108 -> 122 ns,
	// BenchmarkObserveNew 157 -> 211 ns, 0.1 s over a first read of 1.6M
	// members; BenchmarkTrackerSweep's pass over the smaller table 6.3 ->
	// 3.9 ms.
	maxLoad  = 0.9
	growth   = 1.125
	minSlots = 64
)

func (s *memberSlot) gen() uint32             { return s.genState & genMask }
func (s *memberSlot) state() MemberState      { return MemberState(s.genState >> genBits) }
func (s *memberSlot) key() uint32             { return s.hHi }
func (s *memberSlot) id() uint64              { return uint64(s.hHi)<<32 | uint64(s.hLo) }
func (s *memberSlot) setID(h uint64)          { s.hLo, s.hHi = uint32(h), uint32(h>>32) }
func (s *memberSlot) free() bool              { return s.hLo|s.hHi == 0 }
func packGen(g uint32, st MemberState) uint32 { return g&genMask | uint32(st)<<genBits }

// slotHash is a member's identity in the table. Two members of one key
// share it only if their hashes agree on 32 bits: about one key in four
// billion with two members.
func slotHash(h, keyHash uint64) uint64 {
	s := uint64(uint32(keyHash))<<32 | uint64(uint32(h))
	if s == 0 {
		s = 1 // 0 marks a free slot
	}
	return s
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
	Count     [NumOutcomes]int64
	Durations []float64 // seconds, one per ended hold
}

// MemberTracker remembers each member's first-seen time and last score
// across sweeps, and turns differences between sweeps into acquires,
// heartbeats and ended holds.
//
// It is an open-addressing hash table with linear probing rather than a Go
// map: one probe finds or places a member (a map needs a lookup and an
// assignment), the slots are smaller than a map's, and the table shrinks
// again after the keyspace does.
//
// The table is in memberParts parts, each grown and shrunk on its own. A
// table in one piece holds the old slots and the new at once while it
// grows: at 2.3M slots (55 MB) growing to 3.5M (83 MB), 138 MB for a
// moment, which a collection in that moment counts as live. In `make
// bench`'s outside measurement the first read's largest live heap was
// 264 MB against 243 MB once it was over; a part's growth is a
// sixty-fourth of that, and the first read's largest was 212 MB.
type MemberTracker struct {
	parts [memberParts]memberPart
	n     int
	// Each distinct Redis time passed to Observe is a generation; a slot
	// keeps the generation that last saw it rather than the time, and
	// genTime maps the generations still referenced back to times.
	gen     uint32
	genNow  int64
	genTime map[uint32]int64
	// Scores are kept as a distance from base (memberSlot.score); wide
	// holds the scores that are not, by identity. lastScore is the last
	// finite score set, where a rebase moves the base; wideAtRebase is
	// how many scores stayed wide after the last one.
	base         float64
	haveBase     bool
	lastScore    float64
	wide         map[uint64]float64
	wideAtRebase int
	refs         []uint64   // scratch for Sweep
	replayed     []Replayed // scratch for Replay
	// newGen: Begin was called and nothing observed since.
	newGen bool
	// again counts the members observed since Begin that an earlier
	// sweep saw too, first seen before unprovenFrom when it is set.
	again int
	// unprovenFrom is the generation from which a member first seen
	// proves nothing by being seen again (0: every one does); set by
	// Unproven, cleared by the next sweep that ends members.
	unprovenFrom uint32
}

// memberParts is the number of parts; a member's part is the low bits of
// its member hash, which its place in the part (the high bits) leaves.
const memberParts = 64

// memberPart is one part of the table: linear probing, at most maxLoad
// full, no slots while empty.
type memberPart struct {
	slots []memberSlot
	n     int
}

// NewMemberTracker returns an empty tracker.
func NewMemberTracker() *MemberTracker {
	return &MemberTracker{genTime: map[uint32]int64{}}
}

// Len is the number of tracked members.
func (t *MemberTracker) Len() int { return t.n }

// part is the part that holds h.
func (t *MemberTracker) part(h uint64) *memberPart { return &t.parts[h%memberParts] }

// home is where h's probe starts. The multiplication spreads the member
// half of h into the high bits, so that the members of one key do not
// all start at the same place.
func (p *memberPart) home(h uint64) int { return keytable.Home(h, len(p.slots)) }

// find returns the slot holding h, or the free slot where it belongs.
func (p *memberPart) find(h uint64) *memberSlot {
	i := p.home(h)
	for {
		s := &p.slots[i]
		if id := s.id(); id == h || id == 0 {
			return s
		}
		if i++; i == len(p.slots) {
			i = 0
		}
	}
}

// resize rehashes into n slots, at least minSlots; none if n is 0 (the
// part is empty).
func (p *memberPart) resize(n int) {
	old := p.slots
	p.slots = nil
	if n > 0 {
		p.slots = make([]memberSlot, max(n, minSlots))
	}
	for i := range old {
		if !old[i].free() {
			*p.find(old[i].id()) = old[i]
		}
	}
}

// Begin starts a sweep: what it observes is a generation of its own even
// when Redis time has not moved since the last sweep (two sweeps within a
// millisecond, which a sweep that reads only what changed makes common).
func (t *MemberTracker) Begin() { t.newGen, t.again = true, 0 }

// SeenAgain is how many members observed since Begin an earlier sweep saw
// too, but for those first seen by a sweep marked Unproven or after it.
func (t *MemberTracker) SeenAgain() int { return t.again }

// Unproven marks the members the current sweep saw first, and those seen
// first after it, as no proof that data survived, until a sweep ends
// members (SweepJudgedAt): its reads straddled a FLUSHDB, and what it
// first saw may have been written after the flush.
func (t *MemberTracker) Unproven() {
	t.unprovenFrom = t.gen
	if t.newGen || t.gen == 0 { // it saw nothing: the next generation
		t.unprovenFrom++
	}
}

// provenBy: a member first seen in generation first, seen again now,
// shows that its data survived what happened in between. (Generations
// are taken not to wrap, as in SweepJudgedAt: 85 years of 5 s sweeps.)
func (t *MemberTracker) provenBy(first uint32) bool {
	return t.unprovenFrom == 0 || first < t.unprovenFrom
}

// enter makes the sweep at Redis time now (ms) the current generation, on
// the first member it observes or replays.
func (t *MemberTracker) enter(now int64) {
	if t.newGen || now != t.genNow || t.gen == 0 {
		t.newGen = false
		t.gen = (t.gen + 1) & genMask
		if t.gen == 0 {
			t.gen = 1
		}
		t.genNow = now
		t.genTime[t.gen] = now
	}
}

// Observe records one member seen at Redis time now (ms) with the given
// score, in the key's own score unit; b are the state edges at now.
func (t *MemberTracker) Observe(h uint64, keyHash uint64, score float64, now int64, b *Bounds, rules *Rules) Observation {
	h = slotHash(h, keyHash)
	t.enter(now)
	p := t.part(h)
	if float64(p.n+1) > maxLoad*float64(len(p.slots)) {
		p.resize(max(int(float64(len(p.slots))*growth), minSlots))
	}
	s := p.find(h)
	var o Observation
	first := now
	switch {
	case s.free():
		o.New = true
		t.n++
		p.n++
		*s = memberSlot{first: t.gen}
		s.setID(h)
		t.setScore(s, score)
	case s.gen() == t.gen:
		return Observation{State: s.state(), Duplicate: true}
	default:
		if t.provenBy(s.first) {
			t.again++
		}
		if d := (score - t.score(s)) * rules.Unit; d > 0 && !math.IsInf(d, 0) {
			n := int64(math.Round(d / rules.Heartbeat))
			if n < 1 {
				n = 1
			}
			o.Heartbeats = n
		}
		t.setScore(s, score)
		first = t.genTime[s.first]
	}
	o.State = rules.Classify(b, score, now, first)
	s.genState = packGen(t.gen, o.State)
	return o
}

// Tracked reports whether the member with hash h of the key with hash
// keyHash is tracked.
func (t *MemberTracker) Tracked(h, keyHash uint64) bool { return t.tracked(h, keyHash) != nil }

// tracked is the slot of the member with hash h of the key with hash
// keyHash, or nil if it is not tracked.
func (t *MemberTracker) tracked(h, keyHash uint64) *memberSlot {
	h = slotHash(h, keyHash)
	p := t.part(h)
	if len(p.slots) == 0 {
		return nil
	}
	if s := p.find(h); !s.free() {
		return s
	}
	return nil
}

// TrackedBefore reports whether the member with hash h of the key with
// hash keyHash is tracked and was first seen by an earlier sweep than the
// one observing now (before Begin, if nothing was observed since).
func (t *MemberTracker) TrackedBefore(h, keyHash uint64) bool {
	s := t.tracked(h, keyHash)
	return s != nil && (t.newGen || s.first < t.gen)
}

// FirstSeen returns when the member with hash h of the key with hash
// keyHash was first seen (Redis time, ms), if it is tracked.
func (t *MemberTracker) FirstSeen(h, keyHash uint64) (int64, bool) {
	s := t.tracked(h, keyHash)
	if s == nil {
		return 0, false
	}
	at, ok := t.genTime[s.first]
	return at, ok
}

// Carry keeps every member of a key that could not be read in this sweep
// (oversized, or an error local to that key), so that it does not count
// as ended.
type Carry map[uint32]struct{}

// Sweep ends the members not seen at Redis time now, each judged by its
// own last expiry (EndedOutcome). When lost is true the data vanished
// (Redis restarted empty, a flush, a failover to an empty replica): every
// gone member is lost.
func (t *MemberTracker) Sweep(now int64, carry Carry, lost bool, rules *Rules) Ended {
	return t.SweepJudgedAt(now, now, carry, lost, rules)
}

// SweepJudgedAt is Sweep with the vanished members judged at judgeAt (ms)
// instead of now: the Redis time by which the sweep had read every key. A
// key read some milliseconds after the sweep's TIME may have expired in
// between; judged at now, its member would look released while its
// expiry had in fact passed when the read found it gone.
func (t *MemberTracker) SweepJudgedAt(now, judgeAt int64, carry Carry, lost bool, rules *Rules) Ended {
	var e Ended
	t.unprovenFrom = 0
	seen := uint32(0) // generations start at 1
	if now == t.genNow && !t.newGen {
		seen = t.gen
	}
	// Generations a surviving member refers to, as bits from the oldest
	// one still remembered: the times of the others are forgotten below.
	oldest := t.gen
	for g := range t.genTime {
		oldest = min(oldest, g)
	}
	if n := int((t.gen-oldest)/64 + 1); cap(t.refs) < n {
		t.refs = make([]uint64, n)
	}
	refs := t.refs[:(t.gen-oldest)/64+1]
	clear(refs)
	ref := func(g uint32) { refs[(g-oldest)/64] |= 1 << ((g - oldest) % 64) }
	ref(t.gen)
	for pi := range t.parts {
		p := &t.parts[pi]
		// Deleting with a backward shift keeps probe chains whole
		// without tombstones. Starting just past a free slot, an entry
		// that a shift moves always lands on the position being
		// examined, never on one already passed, so each entry is
		// examined exactly once.
		start := 0
		for start < len(p.slots) && !p.slots[start].free() {
			start++
		}
		for k := 0; k < len(p.slots); {
			i := start + k
			if i >= len(p.slots) {
				i -= len(p.slots)
			}
			s := &p.slots[i]
			if s.free() {
				k++
				continue
			}
			g := s.gen()
			if g == seen {
				ref(s.first)
				k++
				continue
			}
			if _, ok := carry[s.key()]; ok {
				ref(s.first)
				ref(g)
				k++
				continue
			}
			e.Count[EndedOutcome(rules.Expiry(t.score(s)), max(judgeAt, now), lost)]++
			// Redis time can step back (an NTP step, a failover to
			// another clock): a hold is never shorter than zero.
			e.Durations = append(e.Durations, float64(max(t.genTime[g]-t.genTime[s.first], 0))/1000)
			if s.score == scoreWide {
				delete(t.wide, s.id())
			}
			p.delete(i) // the entry shifted into i, if any, is examined next
			t.n--
		}
		if len(p.slots) > minSlots && float64(p.n) < 0.2*float64(len(p.slots)) || p.n == 0 && p.slots != nil {
			p.resize(int(float64(p.n) / 0.5))
		}
	}
	for g := range t.genTime {
		if refs[(g-oldest)/64]&(1<<((g-oldest)%64)) == 0 {
			delete(t.genTime, g)
		}
	}
	if w := len(t.wide); w > rebaseAbove && w > t.n/4 && w > 2*t.wideAtRebase {
		t.rebase(t.lastScore)
	}
	return e
}

// delete frees slot i and shifts back the entries after it whose home is
// at or before i, so that every entry stays reachable from its home.
func (p *memberPart) delete(i int) {
	n := len(p.slots)
	p.n--
	j := i
	for {
		p.slots[i] = memberSlot{}
		for {
			if j++; j == n {
				j = 0
			}
			if p.slots[j].free() {
				return
			}
			// The entry at j may move to i unless its home lies
			// cyclically in (i, j].
			k := p.home(p.slots[j].id())
			if i <= j {
				if i < k && k <= j {
					continue
				}
			} else if i < k || k <= j {
				continue
			}
			break
		}
		p.slots[i] = p.slots[j]
		i = j
	}
}
