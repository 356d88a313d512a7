package track

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"
)

// refTracker is the straightforward map-based tracker that MemberTracker
// must behave exactly like.
type refRec struct {
	score       float64
	first, last int64
	key         uint32
	state       MemberState
}

type refTracker struct{ m map[uint64]refRec }

func (t *refTracker) observe(h, keyHash uint64, score float64, now int64, rules *Rules) Observation {
	rec, ok := t.m[h]
	var o Observation
	switch {
	case !ok:
		o.New = true
		rec = refRec{score: score, first: now, key: uint32(keyHash)}
	case rec.last == now:
		return Observation{State: rec.state, Duplicate: true}
	default:
		if d := score - rec.score; d > 0 && !math.IsInf(d, 0) {
			o.Heartbeats = max(int64(math.Round(d/rules.Heartbeat)), 1)
		}
		rec.score = score
	}
	rec.last = now
	b := rules.Bounds(now)
	rec.state = rules.Classify(&b, score, now, rec.first)
	t.m[h] = rec
	o.State = rec.state
	return o
}

func (t *refTracker) sweep(now int64, carry Carry, lost bool, rules *Rules) Ended {
	var e Ended
	for h, rec := range t.m {
		if rec.last == now {
			continue
		}
		if _, ok := carry[rec.key]; ok {
			continue
		}
		delete(t.m, h)
		e.Count[EndedOutcome(rules.Expiry(rec.score), now, lost)]++
		e.Durations = append(e.Durations, float64(rec.last-rec.first)/1000)
	}
	return e
}

// TestMemberTrackerMatchesMap drives the table and the reference map with
// the same random sweeps: members come and go, scores move, keys are
// carried, sweeps fail half way (no Sweep call) and Redis restarts. Small
// pools of hashes crowd the table so that probe chains wrap around its end
// and deletions shift entries across it; the table grows and shrinks. It
// also checks that exactly the generations members refer to keep a time.
func TestMemberTrackerMatchesMap(t *testing.T) {
	rules := Rules{TTL: 2000, Heartbeat: 200, StaleAfter: 400, MaxHold: 5000, Skew: 500, Unit: 1}
	wrapped := 0
	defer func() {
		if !t.Failed() && wrapped == 0 {
			t.Errorf("no probe chain ever wrapped around the table's end: the test missed that case")
		}
	}()
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 99))
		tr, ref := NewMemberTracker(), &refTracker{m: map[uint64]refRec{}}
		now := int64(1_000_000)
		pool := make([]uint64, 50+rng.IntN(3000))
		for i := range pool {
			pool[i] = rng.Uint64()
		}
		pool = append(pool, 0)
		scores := map[uint64]float64{}
		wideSeen := 0
		for sweep := 0; sweep < 60; sweep++ {
			now += int64(100 + rng.IntN(900))
			// Each sweep sees a random fraction of the pool; the
			// fraction swings so that the table both grows and shrinks.
			frac := 0.05 + 0.9*math.Abs(math.Sin(float64(sweep)/7))
			for _, h := range pool {
				if rng.Float64() > frac {
					continue
				}
				if rng.IntN(3) == 0 {
					scores[h] = float64(now) + float64(rng.IntN(2500)) - 200
					// Scores the slot cannot hold as a distance from
					// the base: fractional, -0, and beyond 31 bits.
					switch rng.IntN(12) {
					case 0:
						scores[h] += 0.25
					case 1:
						scores[h] += 3e9
					case 2:
						scores[h] = math.Copysign(0, -1)
					case 3:
						scores[h] = math.Inf(1)
					}
				} else if _, ok := scores[h]; !ok {
					scores[h] = float64(now + 2000)
				}
				kh := h >> 3 % 97
				for dup := 0; dup <= rng.IntN(2); dup++ {
					got := tr.Observe(h, kh, scores[h], now, bp(&rules, now), &rules)
					want := ref.observe(h, kh, scores[h], now, &rules)
					if got != want {
						t.Fatalf("seed %d sweep %d: Observe(%x) = %+v, want %+v", seed, sweep, h, got, want)
					}
				}
			}
			if rng.IntN(8) == 0 {
				continue // a failed sweep: no Sweep call
			}
			carry := Carry{}
			for range rng.IntN(4) {
				carry[uint32(rng.IntN(97))] = struct{}{}
			}
			lost := rng.IntN(15) == 0
			got, want := tr.Sweep(now, carry, lost, &rules), ref.sweep(now, carry, lost, &rules)
			slices.Sort(got.Durations)
			slices.Sort(want.Durations)
			if got.Count[OutcomeReleased] != want.Count[OutcomeReleased] || got.Count[OutcomeExpired] != want.Count[OutcomeExpired] || got.Count[OutcomeLost] != want.Count[OutcomeLost] || !slices.Equal(got.Durations, want.Durations) {
				t.Fatalf("seed %d sweep %d: Sweep = %+v, want %+v", seed, sweep, got, want)
			}
			if tr.Len() != len(ref.m) {
				t.Fatalf("seed %d sweep %d: Len %d, want %d", seed, sweep, tr.Len(), len(ref.m))
			}
			// Every remaining member must still be found from its home.
			for h := range ref.m {
				hh := slotHash(h, h>>3%97)
				if s := tr.part(hh).find(hh); s.id() != hh {
					t.Fatalf("seed %d sweep %d: member %x unreachable after deletions", seed, sweep, h)
				}
			}
			for _, p := range tr.parts {
				if len(p.slots) > 0 && p.slots[0].id() != 0 && p.home(p.slots[0].id()) != 0 {
					wrapped++
				}
			}
			// Each part holds what it counts, at most maxLoad full,
			// and no slots while empty.
			total := 0
			for pi, p := range tr.parts {
				held := 0
				for _, s := range p.slots {
					if !s.free() {
						held++
						if int(s.id()%memberParts) != pi {
							t.Fatalf("seed %d sweep %d: member %x in part %d", seed, sweep, s.id(), pi)
						}
					}
				}
				if held != p.n || float64(p.n) > maxLoad*float64(len(p.slots)) || p.n == 0 && p.slots != nil {
					t.Fatalf("seed %d sweep %d: part %d holds %d, counts %d, in %d slots", seed, sweep, pi, held, p.n, len(p.slots))
				}
				total += p.n
			}
			if total != tr.Len() {
				t.Fatalf("seed %d sweep %d: parts hold %d, Len %d", seed, sweep, total, tr.Len())
			}
			// The wide map holds exactly the scores of the slots
			// marked wide, and each slot gives back its score.
			wide := 0
			for _, p := range tr.parts {
				for i := range p.slots {
					s := &p.slots[i]
					if s.free() {
						continue
					}
					if s.score == scoreWide {
						wide++
						if _, ok := tr.wide[s.id()]; !ok {
							t.Fatalf("seed %d sweep %d: a wide slot without its score", seed, sweep)
						}
					}
				}
			}
			if wide != len(tr.wide) {
				t.Fatalf("seed %d sweep %d: %d wide slots, %d wide scores kept", seed, sweep, wide, len(tr.wide))
			}
			if wideSeen += wide; sweep == 59 && wideSeen == 0 {
				t.Errorf("seed %d: no score was ever wide: the test missed that case", seed)
			}
			// Exactly the generations that members refer to keep a time.
			refs := map[uint32]bool{tr.gen: true}
			for _, p := range tr.parts {
				for _, s := range p.slots {
					if !s.free() {
						refs[s.first], refs[s.gen()] = true, true
					}
				}
			}
			if len(refs) != len(tr.genTime) {
				t.Fatalf("seed %d sweep %d: %d generation times kept, %d referred to", seed, sweep, len(tr.genTime), len(refs))
			}
		}
	}
}

// TestMemberTrackerShrinks: the table gives memory back once the keyspace
// shrinks, and forgets the times of sweeps nothing refers to.
func TestMemberTrackerShrinks(t *testing.T) {
	rules := Rules{TTL: 2000, Heartbeat: 200, StaleAfter: 400, MaxHold: 5000, Skew: 500, Unit: 1}
	tr := NewMemberTracker()
	for i := range 100_000 {
		tr.Observe(uint64(i)*0x9E3779B97F4A7C15, 1, 3000, 1000, bp(&rules, 1000), &rules)
	}
	slots := func() int {
		n := 0
		for _, p := range tr.parts {
			n += len(p.slots)
		}
		return n
	}
	big := slots()
	if float64(tr.Len()) > maxLoad*float64(big) {
		t.Fatalf("load %d/%d above %v", tr.Len(), big, maxLoad)
	}
	for i := range 10 {
		tr.Observe(uint64(i)*0x9E3779B97F4A7C15, 1, 3000, 2000, bp(&rules, 2000), &rules)
	}
	e := tr.Sweep(2000, nil, false, &rules)
	if e.Count[OutcomeReleased] != 99_990 || tr.Len() != 10 {
		t.Fatalf("ended %+v, %d left", e, tr.Len())
	}
	if slots() >= big/100 {
		t.Fatalf("table kept %d slots for %d members", slots(), tr.Len())
	}
	// The survivors were first seen at 1000 and last at 2000.
	if len(tr.genTime) != 2 {
		t.Fatalf("generation times kept: %v", tr.genTime)
	}
}

// TestMemberScoresRebase: scores that are expiries move on with the clock.
// Once most of them are out of the base's reach, the base moves after
// them, and every score reads back the same; scores spread wider than a
// slot can hold stay wide without a pass over the table every sweep.
func TestMemberScoresRebase(t *testing.T) {
	if size := unsafe.Sizeof(memberSlot{}); size != 20 {
		t.Fatalf("a member slot is %d bytes, want 20", size)
	}
	rules := Rules{TTL: 2000, Heartbeat: 200, StaleAfter: 400, MaxHold: 5000, Skew: 500, Unit: 1}
	tr := NewMemberTracker()
	const n = 5000
	now := int64(1_000_000)
	observe := func(i int, score float64) Observation {
		return tr.Observe(uint64(i)*0x9E3779B97F4A7C15, uint64(i%50), score, now, bp(&rules, now), &rules)
	}
	for i := range n {
		observe(i, float64(now+2000))
	}
	tr.Sweep(now, nil, false, &rules)
	if len(tr.wide) != 0 {
		t.Fatalf("%d wide scores near the base", len(tr.wide))
	}
	// 40 days on (an exporter that ran on): every score is beyond 31
	// bits of the base until the sweep moves it.
	now += 40 * 86400 * 1000
	for i := range n {
		observe(i, float64(now+2000)+float64(i%3))
	}
	if len(tr.wide) != n {
		t.Fatalf("%d wide scores, want %d", len(tr.wide), n)
	}
	tr.Sweep(now, nil, false, &rules)
	if len(tr.wide) != 0 || tr.Len() != n {
		t.Fatalf("after the sweep: %d wide scores, %d members; want 0 and %d", len(tr.wide), tr.Len(), n)
	}
	now += 1000
	for i := range n {
		// Each score moved on by 200 ms: one heartbeat.
		if o := observe(i, float64(now+2000-800)+float64(i%3)); o.Heartbeats != 1 || o.New {
			t.Fatalf("member %d after the rebase: %+v, want 1 heartbeat", i, o)
		}
	}
	// Half the members far from the other half: a rebase cannot reach
	// both, and the base stays where the second pass left it.
	split := func() {
		now += 1000
		for i := range n {
			score := float64(now + 2000)
			if i%2 == 0 {
				score += 1e12
			}
			observe(i, score)
		}
		tr.Sweep(now, nil, false, &rules)
	}
	split()
	base, wide := tr.base, len(tr.wide)
	for range 5 {
		split()
	}
	if tr.base != base || len(tr.wide) != wide || wide < n/2-1 || wide > n/2+1 {
		t.Errorf("base %v with %d wide, then %v with %d: the base moved every sweep", base, wide, tr.base, len(tr.wide))
	}
}

// TestSeenAgainUnproven: after a sweep marked Unproven, members it or a
// later sweep saw first do not count as seen again, older ones do, and
// the next sweep that ends members lifts the mark.
func TestSeenAgainUnproven(t *testing.T) {
	rules := Rules{TTL: 60_000, Heartbeat: 1000, StaleAfter: 30_000, MaxHold: 600_000, Skew: 500, Unit: 1}
	for _, start := range []uint32{0, 1000} {
		tr := NewMemberTracker()
		tr.gen = start
		now := int64(1_000_000)
		sweep := func(members ...uint64) int {
			now += 1000
			tr.Begin()
			for _, m := range members {
				tr.Observe(m*0x9E3779B97F4A7C15, 7, float64(now+30_000), now, bp(&rules, now), &rules)
			}
			return tr.SeenAgain()
		}
		sweep(1, 2)    // the sweep before the flush
		sweep(1, 2, 3) // reads across a flush: 3 written after it
		tr.Unproven()  // (no Sweep: it left its ends to the next)
		if n := sweep(1, 2, 3, 4); n != 2 {
			t.Errorf("start %d: seen again %d, want 2 (members 1 and 2; not 3, first seen by the unproven sweep)", start, n)
		}
		tr.Sweep(now, nil, false, &rules)
		if n := sweep(1, 2, 3, 4); n != 4 {
			t.Errorf("start %d: after a sweep that ended members, seen again %d, want 4", start, n)
		}
		tr.Sweep(now, nil, false, &rules)
		// A sweep that saw nothing marks the next generation.
		tr.Begin()
		tr.Unproven()
		if n := sweep(4, 5); n != 1 {
			t.Errorf("start %d: seen again %d after an empty unproven sweep, want 1 (member 4)", start, n)
		}
		if n := sweep(4, 5); n != 1 {
			t.Errorf("start %d: seen again %d in the sweep after, want 1: the mark holds until members end", start, n)
		}
	}
}

// TestTrackedBefore: a member counts as tracked before the sweep that
// observes now only if an earlier sweep saw it first, whether or not this
// one has seen it again; before this sweep observes anything, every
// tracked member does.
func TestTrackedBefore(t *testing.T) {
	rules := Rules{TTL: 60_000, Heartbeat: 1000, StaleAfter: 30_000, MaxHold: 600_000, Skew: 500, Unit: 1}
	tr := NewMemberTracker()
	now := int64(1_000_000)
	h := func(m uint64) uint64 { return m * 0x9E3779B97F4A7C15 }
	observe := func(members ...uint64) {
		for _, m := range members {
			tr.Observe(h(m), 7, float64(now+30_000), now, bp(&rules, now), &rules)
		}
	}
	tr.Begin()
	observe(1, 2)
	if tr.TrackedBefore(h(1), 7) {
		t.Error("a member first seen by the sweep observing now counts as tracked before it")
	}
	now += 1000
	tr.Begin()
	if !tr.TrackedBefore(h(1), 7) || !tr.TrackedBefore(h(2), 7) {
		t.Error("before the new sweep observes anything, the last sweep's members must count as tracked before it")
	}
	observe(1, 3)
	switch {
	case !tr.TrackedBefore(h(1), 7), !tr.TrackedBefore(h(2), 7):
		t.Error("members an earlier sweep saw first must count as tracked before this one, seen again or not")
	case tr.TrackedBefore(h(3), 7):
		t.Error("member 3, first seen by this sweep, counts as tracked before it")
	case !tr.Tracked(h(3), 7):
		t.Error("member 3 is not tracked")
	case tr.TrackedBefore(h(4), 7), tr.TrackedBefore(h(1), 8):
		t.Error("an untracked member counts as tracked before")
	}
}
