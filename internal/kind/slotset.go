package kind

import (
	"math"

	"github.com/cespare/xxhash/v2"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/keytable"
	"github.com/slotexporter/slot_exporter/internal/redisread"
	"github.com/slotexporter/slot_exporter/internal/snapshot"
	"github.com/slotexporter/slot_exporter/internal/track"
)

// A slot set is a sorted set per user, one member per held slot, scored
// by its expiry (or, with score: heartbeat, by its last refresh). It reads
// ZRANGE WITHSCORES and PTTL; members are classified by track.Bounds and
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

	// held is what the last read of each key found, to replay it; the
	// members of every held key are back to back in slab.
	held keytable.Table[slotHeld]
	slab memberSlab
	gen  uint32
}

// slotHeld is 32 bytes without pointers: at a million keys the held
// table is not scanned by the garbage collector.
type slotHeld struct {
	user   uint64
	expiry int64 // Redis ms; -1 none
	ref    slabRef
	n      uint32
	gen    uint32
}

func (t *slotSet) drop(h uint64) {
	if i := t.held.Find(h); i >= 0 {
		t.dropAt(i)
	}
}

// dropAt forgets held entry i; the last entry takes its number.
func (t *slotSet) dropAt(i int) {
	_, e := t.held.At(i)
	t.slab.drop(int(e.n))
	t.held.DeleteAt(i)
}

// compact rewrites the slab once most of it is garbage.
func (t *slotSet) compact() {
	if !t.slab.wasteful() {
		return
	}
	old := t.slab
	t.slab = memberSlab{}
	for i := range t.held.Len() {
		_, e := t.held.At(i)
		e.ref, _ = t.slab.add(old.get(e.ref, e.n))
	}
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
	t.gen++
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
		if ref, ok := t.slab.add(k.Read.Members); ok {
			*t.held.Put(k.Hash) = slotHeld{user: k.UserHash, expiry: expiryOf(k.Read.PTTL, sw.Now),
				ref: ref, n: uint32(len(k.Read.Members)), gen: t.gen}
		}
	}
	t.apply(sw, k)
}

func (t *slotSet) Held(h uint64) bool { return t.held.Find(h) >= 0 }

func (t *slotSet) Forget(h uint64) { t.drop(h) }

// Replay re-classifies each held member at the new bounds: its state,
// zombie age and the user's used follow from the score held.
func (t *slotSet) Replay(sw *Sweep) int {
	n := 0
	var kr redisread.KeyRead
	for i := 0; i < t.held.Len(); i++ {
		h, e := t.held.At(i)
		if e.gen == t.gen {
			continue
		}
		if _, ok := sw.Carry[uint32(h)]; ok {
			continue
		}
		pttl, ok := remaining(e.expiry, sw.Now)
		if !ok {
			t.dropAt(i)
			i--
			continue
		}
		e.gen = t.gen
		kr = redisread.KeyRead{Status: redisread.OK, PTTL: pttl, At: sw.Now, Members: t.slab.get(e.ref, e.n)}
		t.apply(sw, Key{Read: &kr, Hash: h, UserHash: e.user})
		n++
	}
	return n
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

func (t *slotSet) End(sw *Sweep, lost, deferEnds bool) Ended {
	if deferEnds {
		t.last = t.cur
		return Ended{}
	}
	e := t.members.SweepJudgedAt(sw.Now, sw.ReadBy, sw.Carry, lost, &t.rules)
	t.holds.end(e)
	t.last = t.cur
	for i := 0; i < t.held.Len(); i++ {
		h, e := t.held.At(i)
		if e.gen == t.gen {
			continue
		}
		if _, ok := sw.Carry[uint32(h)]; !ok {
			t.dropAt(i)
			i--
		}
	}
	t.compact()
	return Ended{Lost: e.Count[track.OutcomeLost]}
}

func (t *slotSet) Publish(f *snapshot.Family) {
	memberGauges(f, &t.last.members)
	f.Gauges = append(f.Gauges,
		gauge(snapshot.WithoutTTL, float64(t.last.withoutTTL)),
		gauge(snapshot.ExpiringEarly, float64(t.last.expiringEarly)))
	t.holds.publish(f, true)
}

func (t *slotSet) UserExtra(string) []snapshot.Value { return nil }

func (t *slotSet) FirstSeen(key, member string) (int64, bool) {
	return t.members.FirstSeen(track.MemberHash(xxhash.New(), key, member), xxhash.Sum64String(key))
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
