package kind

import (
	"math"
	"slices"

	"github.com/cespare/xxhash/v2"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/keytable"
	"github.com/slotexporter/slot_exporter/internal/redisread"
	"github.com/slotexporter/slot_exporter/internal/snapshot"
	"github.com/slotexporter/slot_exporter/internal/track"
)

// A slot set is a sorted set per user, one member per held slot, scored
// by its expiry (or, with score: heartbeat, by its last refresh). It reads
// its members (ZSCAN, or ZRANGE WITHSCORES; see redisread) and PTTL; members are classified by track.Bounds and
// remembered by track.MemberTracker. It feeds slot_members,
// slot_acquires_total, slot_heartbeats_total, slot_holds_ended_total,
// slot_hold_duration_seconds, slot_sets_without_ttl and
// slot_sets_expiring_early.
func init() { register(config.KindSlotSet, newSlotSet) }

type slotSet struct {
	rules      track.Rules
	maxMembers int64
	limit      int64
	members    *track.MemberTracker
	holds      holds

	bounds track.Bounds
	cur    slotSetGauges
	last   slotSetGauges

	// held is, for each key the kind can replay, what the member table
	// does not know: its expiry, and its user, which is the key itself
	// (Key.UserHash == Key.Hash) unless users says otherwise. The
	// members themselves are replayed from the member table, which keeps
	// every member's score under the low half of its key's hash; held is
	// keyed by that half (keytable.LowHalf), and each entry's hash is its
	// key's whole hash.
	held keytable.Table[slotHeld]
	// users is the user of each held key whose user is not named by the
	// key's own hash: a key not under its user's canonical name (the
	// sweep's userID), or any key of a family whose user regexp has no
	// canonical name. Empty for the keys of nearly every family; for a
	// family without a canonical key 21.4 bytes a key at a million (a Go
	// map took 27 at 700k, 37.7 at a million), where the user's hash in
	// slotHeld took 8.
	users keytable.Table[uint64]
	// replayUsed is Replay's count of holding members per held key, by
	// entry number: only while Replay runs, not in every entry between
	// sweeps. A byte a key, with the counts past 255 in replayMore: a
	// slot set of a concurrency cap holds a few members, and at a
	// million keys 32-bit counts were 3 MB more while a sweep replays.
	replayUsed []uint8
	replayMore map[int]int64
	// unreplayable: slot identities of members read from a key whose low
	// half is held for another key (about a hundred pairs among a million
	// keys). Such a key is not held, so it is read every sweep; its
	// members must not be replayed as the other key's when they vanish.
	// Each is forgotten once its hold has ended.
	unreplayable map[uint64]struct{}
	// Scratch for replayMembers.
	lookup []uint64
	found  []int
}

// slotHeld is 8 bytes without pointers (16 in the table, where the
// key's whole hash is; it was 40 with the sweep's generation and
// Replay's count in it, 32 with the high half of the key's hash, 24
// with the user's hash, which is now the key's): at a million keys the
// held table is not scanned by the garbage collector, and each 8 bytes
// less is 8 MB.
type slotHeld struct {
	// expiry is the key's expiry in Redis ms, plus one (0: none), in 48
	// bits: expHi the high 32, expLo the low 16. Any later than 2^48 - 2
	// ms (the year 10889) is kept as that.
	expHi uint32
	expLo uint16
	bits  uint8
	flags uint8 // Replay's anomaly flags for the key
}

const maxHeldExpiry = 1<<48 - 2

// expiry is the key's expiry (Redis ms), -1 without one.
func (e *slotHeld) expiry() int64 { return (int64(e.expHi)<<16 | int64(e.expLo)) - 1 }

func (e *slotHeld) setExpiry(ms int64) {
	v := uint64(min(max(ms, -1), maxHeldExpiry) + 1)
	e.expHi, e.expLo = uint32(v>>16), uint16(v)
}

// slotHeld's bits.
const (
	// heldSeen: applied or replayed in this sweep. Begin clears it on
	// every entry, so that a failed sweep's keys are not taken for
	// applied by the next one.
	heldSeen = 1 << iota
	replaying
	replayedEarly
)

// find returns key h's held entry number, or -1.
func (t *slotSet) find(h uint64) int {
	if i := t.held.Find(h); i >= 0 {
		if held, _ := t.held.At(i); held == h {
			return i
		}
	}
	return -1
}

func (t *slotSet) drop(h uint64) {
	if i := t.find(h); i >= 0 {
		t.deleteHeld(i)
	}
}

// deleteHeld forgets held key i; the last entry takes number i.
func (t *slotSet) deleteHeld(i int) {
	if t.users.Len() > 0 {
		h, _ := t.held.At(i)
		t.users.Delete(h)
	}
	t.held.DeleteAt(i)
}

// userOf is held key h's user.
func (t *slotSet) userOf(h uint64) uint64 {
	if u := t.users.Get(h); u != nil {
		return *u
	}
	return h
}

type slotSetGauges struct {
	members       [track.NumStates]int
	withoutTTL    int
	expiringEarly int
}

func newSlotSet(f *config.Family, s *config.Sampling) Tracker {
	t := &slotSet{
		rules:      slotRules(f),
		maxMembers: int64(s.MaxMembersPerKey),
		limit:      int64(f.Limit),
		members:    track.NewMemberTracker(),
		holds:      newHolds(),
		held:       keytable.LowHalf[slotHeld](),

		unreplayable: map[uint64]struct{}{},
	}
	return t
}

// slotRules are a family's timings as the state rules take them.
func slotRules(f *config.Family) track.Rules {
	r := track.Rules{
		TTL: ms(f.TTL), Heartbeat: ms(f.HeartbeatInterval), StaleAfter: ms(f.StaleAfter),
		MaxHold: ms(f.MaxHold), Skew: ms(f.ClockSkewTolerance), Unit: 1,
		HeartbeatScore: f.Score == config.ScoreHeartbeat,
	}
	if r.Heartbeat <= 0 {
		r.Heartbeat = 1
	}
	if f.ScoreUnit == config.ScoreUnitSeconds {
		r.Unit = 1000
	}
	return r
}

func (t *slotSet) Reconfigure(f *config.Family, s *config.Sampling) {
	t.rules, t.maxMembers, t.limit = slotRules(f), int64(s.MaxMembersPerKey), int64(f.Limit)
}

func (t *slotSet) Limits() track.Limits {
	return track.Limits{Limit: t.limit, OverLimitIsAnomaly: true}
}

func (t *slotSet) Begin(sw *Sweep) redisread.Reads {
	t.bounds = t.rules.Bounds(sw.Now)
	t.cur = slotSetGauges{}
	for i := range t.held.Len() {
		_, e := t.held.At(i)
		e.bits = 0
	}
	t.members.Begin()
	return &redisread.ZSetReads{MaxMembers: t.maxMembers, Edges: redisread.Edges(t.bounds)}
}

// rangeStates maps the ZCOUNT ranges of an oversized set to states.
var rangeStates = [redisread.NumRanges]track.MemberState{
	redisread.RangeExpired: track.StateExpired,
	redisread.RangeStale:   track.StateStale,
	redisread.RangeLive:    track.StateLive,
	redisread.RangeFuture:  track.StateFuture,
}

func (t *slotSet) Apply(sw *Sweep, k Key) {
	t.drop(k.Hash)
	if sw.Hold && !k.Read.Oversized {
		// Another key holds the low half of this one's hash.
		shared := t.held.Find(k.Hash) >= 0
		if !shared {
			e := t.held.Put(k.Hash)
			*e = slotHeld{bits: heldSeen}
			e.setExpiry(expiryOf(k.Read.PTTL, sw.Now))
			if k.UserHash != k.Hash {
				*t.users.Put(k.Hash) = k.UserHash
			}
		}
		if shared || len(t.unreplayable) > 0 {
			for _, m := range k.Read.Members {
				if s := track.Slot(m.Hash, k.Hash); shared {
					t.unreplayable[s] = struct{}{}
				} else {
					// Held now: the other key is gone.
					delete(t.unreplayable, s)
				}
			}
		}
	}
	t.apply(sw, k)
}

func (t *slotSet) Held(h uint64) bool { return t.find(h) >= 0 }

func (t *slotSet) Forget(h uint64) { t.drop(h) }

// Replay re-classifies the members of every held key not read in this
// sweep at the new bounds: its state, zombie age and the user's used
// follow from the scores the member table holds.
func (t *slotSet) Replay(sw *Sweep) int {
	n := 0
	for i := 0; i < t.held.Len(); i++ {
		h, e := t.held.At(i)
		if e.bits&heldSeen != 0 {
			continue
		}
		if _, ok := sw.Carry[uint32(h)]; ok {
			continue
		}
		if _, ok := remaining(e.expiry(), sw.Now); !ok {
			t.deleteHeld(i) // the last entry takes number i
			i--
			continue
		}
		e.bits, e.flags = heldSeen|replaying, 0
		n++
	}
	if n == 0 {
		return 0
	}
	t.replayUsed, t.replayMore = make([]uint8, t.held.Len()), nil
	t.members.Replay(sw.Now, &t.bounds, &t.rules, t.replayMembers)
	for i := range t.held.Len() {
		h, e := t.held.At(i)
		if e.bits&replaying == 0 {
			continue
		}
		switch {
		case e.expiry() < 0:
			t.cur.withoutTTL++
		case e.bits&replayedEarly != 0:
			t.cur.expiringEarly++
		}
		sw.Floor.Add(t.userOf(h), "", int64(t.replayUsed[i])+t.replayMore[i], e.flags)
		e.bits &^= replaying | replayedEarly
	}
	t.replayUsed, t.replayMore = nil, nil
	return n
}

// countReplayed counts one more holding member of held key i.
func (t *slotSet) countReplayed(i int) {
	if t.replayUsed[i] < math.MaxUint8 {
		t.replayUsed[i]++
		return
	}
	if t.replayMore == nil {
		t.replayMore = map[int]int64{}
	}
	t.replayMore[i]++
}

// replayMembers tallies a batch of members the member table offers to
// the held keys they belong to, if those are replaying.
func (t *slotSet) replayMembers(ms []track.Replayed) {
	t.lookup, t.found = t.lookup[:0], slices.Grow(t.found[:0], len(ms))[:len(ms)]
	for _, m := range ms {
		t.lookup = append(t.lookup, uint64(m.Key))
	}
	t.held.FindMany(t.lookup, t.found)
	for i := range ms {
		m := &ms[i]
		if t.found[i] < 0 {
			continue
		}
		_, e := t.held.At(t.found[i])
		if e.bits&replaying == 0 {
			continue
		}
		if _, ok := t.unreplayable[m.Slot]; ok {
			continue
		}
		m.Keep = true
		t.cur.members[m.State]++
		e.flags |= m.State.Anomaly()
		if m.State.Holding() {
			t.countReplayed(t.found[i])
			// As apply's check on the newest score: the key expires
			// before this member would, by more than the skew.
			if exp := e.expiry(); m.State != track.StateFuture && exp >= 0 && float64(exp)+t.rules.Skew < t.rules.Expiry(m.Score) {
				e.bits |= replayedEarly
			}
		}
	}
}

func (t *slotSet) apply(sw *Sweep, k Key) {
	kr := k.Read
	var used int64
	var flags uint8
	latest := math.Inf(-1) // newest unexpired, not future, score
	if kr.Oversized {
		// Counted by score ranges; its members are neither read nor
		// tracked, so they are carried rather than ended.
		sw.Carry[uint32(k.Hash)] = struct{}{}
		for rg, n := range kr.Ranges {
			st := rangeStates[rg]
			t.cur.members[st] += int(n)
			if st.Holding() {
				used += n
			}
			if n > 0 {
				flags |= st.Anomaly()
			}
		}
		if kr.Ranges[redisread.RangeLive]+kr.Ranges[redisread.RangeStale] > 0 {
			latest = kr.Newest
		}
	} else {
		for _, m := range kr.Members {
			o := t.members.Observe(m.Hash, k.Hash, m.Score, sw.Now, &t.bounds, &t.rules)
			if o.Duplicate {
				continue
			}
			if o.New {
				t.holds.acquires++
			}
			t.holds.heartbeats += uint64(o.Heartbeats)
			t.cur.members[o.State]++
			flags |= o.State.Anomaly()
			if o.State.Holding() {
				used++
				if o.State != track.StateFuture && m.Score > latest {
					latest = m.Score
				}
			}
		}
	}
	switch {
	case kr.PTTL == -1:
		t.cur.withoutTTL++
	case kr.PTTL >= 0 && !math.IsInf(latest, -1) &&
		float64(sw.Now+kr.PTTL)+t.rules.Skew < t.rules.Expiry(latest):
		// A key that expires together with its newest slot (a library
		// that PEXPIREs ttl on every refresh) is healthy: only an expiry
		// earlier by more than the skew tolerance loses live slots.
		t.cur.expiringEarly++
	}
	sw.Floor.Add(k.UserHash, k.User, used, flags)
}

func (t *slotSet) Survived() int { return t.members.SeenAgain() }

func (t *slotSet) Unproven() { t.members.Unproven() }

func (t *slotSet) Known(k Key, thisSweep bool) bool {
	known := t.members.TrackedBefore
	if thisSweep {
		known = t.members.Tracked
	}
	for _, m := range k.Read.Members {
		if known(m.Hash, k.Hash) {
			return true
		}
	}
	return false
}

func (t *slotSet) End(sw *Sweep, lost, deferEnds bool) Ended {
	if deferEnds {
		t.last = t.cur
		return Ended{}
	}
	e := t.holds.end(sw, t.members.SweepJudgedAt(sw.Now, sw.ReadBy, sw.Carry, lost, &t.rules))
	t.last = t.cur
	for i := 0; i < t.held.Len(); i++ {
		h, e := t.held.At(i)
		if e.bits&heldSeen != 0 {
			continue
		}
		if _, ok := sw.Carry[uint32(h)]; !ok {
			t.deleteHeld(i) // the last entry takes number i
			i--
		}
	}
	for s := range t.unreplayable {
		if !t.members.Has(s) {
			delete(t.unreplayable, s)
		}
	}
	return Ended{Lost: e.Count[track.OutcomeLost]}
}

func (t *slotSet) Publish(f *snapshot.Family) {
	memberGauges(f, &t.last.members)
	f.Gauges = append(f.Gauges,
		gauge(snapshot.WithoutTTL, float64(t.last.withoutTTL)),
		gauge(snapshot.ExpiringEarly, float64(t.last.expiringEarly)))
	t.holds.publish(f, true)
}

func (t *slotSet) UserExtra(track.UserView) []snapshot.Value { return nil }

func (t *slotSet) FirstSeen(key string, memberHash uint64) (int64, bool) {
	return t.members.FirstSeen(memberHash, xxhash.Sum64String(key))
}

// dropUnseen forgets the held keys a complete sweep neither read nor
// replayed (and did not carry): they are gone.
func dropUnseen[E any](held map[uint64]E, gen uint32, carry track.Carry, genOf func(E) uint32) {
	for h, e := range held {
		if genOf(e) == gen {
			continue
		}
		if _, ok := carry[uint32(h)]; !ok {
			delete(held, h)
		}
	}
}
