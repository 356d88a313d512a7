// Package track is the exporter's model of what it watches, with no Redis
// and no Prometheus in it: the state of a slot-set member, the member table
// that remembers members across sweeps, and the per-user floor and window.
//
// docs/design.md ("The state of a slot-set member") is the specification;
// this file is its only encoding. Both ways of classifying members, one
// member at a time and by score ranges (ZCOUNT, for sets too large to read),
// use the same Bounds, so they cannot disagree at an edge.
package track

import "math"

// MemberState is what a slot-set member (or a lock's token) looks like at
// one instant. The order of the constants is not the order of the checks:
// see Bounds.State.
type MemberState uint8

const (
	StateLive MemberState = iota
	StateExpired
	StateFuture
	StateStale
	StateZombie
	NumStates
)

var stateNames = [NumStates]string{"live", "expired", "future", "stale", "zombie"}

// StateNames are the label values of slot_members{state}, indexed by state.
func StateNames() [NumStates]string { return stateNames }

func (s MemberState) String() string {
	if s < NumStates {
		return stateNames[s]
	}
	return "unknown"
}

// Holding reports whether acquire would count the member: it is not yet
// past its expiry.
func (s MemberState) Holding() bool { return s != StateExpired }

// Anomaly bits for a user in one sweep. A user with any of them set is
// picked first by the per-user series cap.
const (
	AnomalyOverLimit uint8 = 1 << iota
	AnomalyExpired
	AnomalyZombie
	AnomalyFuture
	AnomalyStale
	AnomalyNegative
	// AnomalyKind is a kind's own anomaly (a rate counter that cannot
	// restart, a stalled queue, a dead stream consumer).
	AnomalyKind
	// Listed is no anomaly: it keeps a user with nothing in used (a
	// framework's queue with jobs waiting but none orphaned) among the
	// users the series cap may show, after every anomaly.
	Listed
)

// Anomaly is the user anomaly bit a member in this state raises.
func (s MemberState) Anomaly() uint8 {
	switch s {
	case StateExpired:
		return AnomalyExpired
	case StateFuture:
		return AnomalyFuture
	case StateStale:
		return AnomalyStale
	case StateZombie:
		return AnomalyZombie
	}
	return 0
}

// Rules are a slot-set family's timings in milliseconds, and how its scores
// are written.
type Rules struct {
	TTL        float64
	Heartbeat  float64
	StaleAfter float64
	MaxHold    float64
	Skew       float64
	// Unit is milliseconds per score unit: 1 for ms, 1000 for s.
	Unit float64
	// HeartbeatScore is set for `score: heartbeat`: the score is the time
	// of the last acquire or refresh, and the expiry is score + TTL.
	HeartbeatScore bool
}

// Expiry returns a score's expiry in milliseconds.
func (r *Rules) Expiry(score float64) float64 {
	e := score * r.Unit
	if r.HeartbeatScore {
		e += r.TTL
	}
	return e
}

// score is the inverse of Expiry.
func (r *Rules) score(expiry float64) float64 {
	if r.HeartbeatScore {
		expiry -= r.TTL
	}
	return expiry / r.Unit
}

// Bounds are the edges between states at one Redis time, in the key's own
// score space, so that the same numbers serve a member read one at a time
// and a ZCOUNT over a range.
type Bounds struct {
	// Expired: score <= Expired (expiry at or before now).
	Expired float64
	// StaleBelow: Expired < score < StaleBelow is stale: the last
	// heartbeat is more than stale_after ago.
	StaleBelow float64
	// FutureAbove: score > FutureAbove is future: no heartbeat could
	// have written an expiry that far ahead.
	FutureAbove float64
}

// Bounds returns the state edges at Redis time now (ms).
func (r *Rules) Bounds(now int64) Bounds {
	n := float64(now)
	return Bounds{
		Expired:     r.score(n),
		StaleBelow:  r.score(n + r.TTL - r.StaleAfter),
		FutureAbove: r.score(n + r.TTL + r.Skew),
	}
}

// State classifies a score without its history: every state but zombie,
// which needs the first-seen time. The checks run in docs/design.md's
// order: expired, future, stale. A NaN is expired (acquire would prune
// it); +inf is future (acquire never prunes it: the leak itself).
func (b *Bounds) State(score float64) MemberState {
	switch {
	case score <= b.Expired || math.IsNaN(score):
		return StateExpired
	case score > b.FutureAbove:
		return StateFuture
	case score < b.StaleBelow:
		return StateStale
	}
	return StateLive
}

// Classify returns the state of a member with the given score at Redis
// time now (ms), first seen at firstSeen (ms).
func (r *Rules) Classify(b *Bounds, score float64, now, firstSeen int64) MemberState {
	s := b.State(score)
	if s == StateLive && float64(now-firstSeen) > r.MaxHold {
		return StateZombie
	}
	return s
}

// Outcome is how a hold ended.
type Outcome uint8

const (
	OutcomeReleased Outcome = iota
	OutcomeExpired
	OutcomeLost
	NumOutcomes
)

var outcomeNames = [NumOutcomes]string{"released", "expired", "lost"}

// OutcomeNames are the label values of slot_holds_ended_total{outcome}.
func OutcomeNames() [NumOutcomes]string { return outcomeNames }

// EndedOutcome judges a hold that vanished between the sweep that last
// saw it and the sweep at now (ms), by its own last expiry (ms): gone
// while the expiry was still ahead is a release; gone once it had passed,
// the holder died and the TTL (or the next acquire's pruning) cleaned up.
//
// A hold whose expiry fell between the two sweeps is ambiguous: it may
// have been released just before its expiry or pruned just after. It
// counts as expired, because only a vanish with the expiry still ahead
// proves a release; with heartbeats well inside the ttl, a live holder's
// expiry is always at least ttl - heartbeat_interval ahead, so a release
// is misjudged only when it comes within one sweep interval of an expiry
// that stopped being renewed.
func EndedOutcome(expiry float64, now int64, lost bool) Outcome {
	switch {
	case lost:
		return OutcomeLost
	case expiry <= float64(now):
		return OutcomeExpired
	}
	return OutcomeReleased
}
