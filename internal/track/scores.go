// Scores in the member table: a 32-bit distance from the tracker's base,
// with the scores it cannot hold exactly in a map beside the table.

package track

import "math"

// scoreWide marks a slot whose score is in the tracker's wide map.
const scoreWide = math.MinInt32

// rebaseAbove is how many wide scores the tracker keeps before it
// considers moving its base.
const rebaseAbove = 1024

// score is s's last score.
func (t *MemberTracker) score(s *memberSlot) float64 {
	if s.score == scoreWide {
		return t.wide[s.id()]
	}
	return t.base + float64(s.score)
}

// narrow is score as a distance from base, if it is one that gives the
// score back bit for bit: an integer within 31 bits of the base (the
// expiry of an hour-long lease in ms, 24 days either side; 68 years in
// seconds). A fractional score, -0, or one further away is wide.
func narrow(base, score float64) (int32, bool) {
	d := score - base
	if !(d > scoreWide && d <= math.MaxInt32) || d != math.Trunc(d) {
		return 0, false
	}
	v := int32(d)
	return v, math.Float64bits(base+float64(v)) == math.Float64bits(score)
}

// setScore makes score s's last score. The first finite score sets the
// base.
func (t *MemberTracker) setScore(s *memberSlot, score float64) {
	if !math.IsInf(score, 0) && !math.IsNaN(score) {
		if !t.haveBase {
			t.base, t.haveBase = math.Trunc(score), true
		}
		t.lastScore = score
	}
	if v, ok := narrow(t.base, score); ok {
		if s.score == scoreWide {
			delete(t.wide, s.id())
		}
		s.score = v
		return
	}
	if t.wide == nil {
		t.wide = map[uint64]float64{}
	}
	t.wide[s.id()] = score
	s.score = scoreWide
}

// rebase moves the base to near a recent score, when more than a quarter
// of the scores drifted out of its reach: scores that are expiries move
// on with the clock, and in ms they leave a base behind after 24 days.
// Each slot's score is the same after as before. It passes over the whole
// table, so it runs only once the wide scores have doubled since the last
// time: scores spread wider than 31 bits stay wide without a pass every
// sweep.
func (t *MemberTracker) rebase(near float64) {
	base := math.Trunc(near)
	for pi := range t.parts {
		slots := t.parts[pi].slots
		for i := range slots {
			s := &slots[i]
			if s.free() {
				continue
			}
			score := t.score(s)
			v, ok := narrow(base, score)
			switch {
			case ok && s.score == scoreWide:
				delete(t.wide, s.id())
				s.score = v
			case ok:
				s.score = v
			default:
				t.wide[s.id()] = score
				s.score = scoreWide
			}
		}
	}
	t.base = base
	t.wideAtRebase = len(t.wide)
}
