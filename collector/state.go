package collector

import "math"

// MemberState is what a slot-set member looks like at one instant. The
// order of the constants is the order DESIGN.md checks them in.
type MemberState uint8

const (
	StateLive MemberState = iota
	StateExpired
	StateFuture
	StateStale
	StateZombie
	numStates
)

var stateNames = [numStates]string{"live", "expired", "future", "stale", "zombie"}

func (s MemberState) String() string {
	if s < numStates {
		return stateNames[s]
	}
	return "unknown"
}

// Holding reports whether acquire would count the member: it is not yet
// past its expiry.
func (s MemberState) Holding() bool { return s != StateExpired }

// SlotRules are a family's timings, in the score's time base (milliseconds).
type SlotRules struct {
	TTL        float64
	Heartbeat  float64
	StaleAfter float64
	MaxHold    float64
	Skew       float64
}

// Classify returns the state of a member with the given expiry score, at
// Redis time now, first seen at firstSeen. All values are milliseconds.
//
// Scores that are not finite still get a state rather than being skipped:
// +inf is a slot acquire never prunes (the leak itself), -inf one it always
// prunes.
func (r *SlotRules) Classify(score, now, firstSeen float64) MemberState {
	switch {
	case score <= now || math.IsNaN(score):
		return StateExpired
	case score > now+r.TTL+r.Skew:
		return StateFuture
	case now-(score-r.TTL) > r.StaleAfter:
		return StateStale
	case now-firstSeen > r.MaxHold:
		return StateZombie
	}
	return StateLive
}
