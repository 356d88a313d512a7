package kind

import (
	"math"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/track"
)

// The state rules as the trackers build them, for code that classifies a
// member outside a sweep (the on-call page, the release preview): a
// member's state is decided by track.Rules.Classify with these rules and
// bounds, and nowhere else.

// Rules returns the state rules of a slot-set or lock family.
func Rules(f *config.Family) track.Rules {
	if f.Kind == config.KindLock {
		return lockRules(f)
	}
	return slotRules(f)
}

// LockBounds returns a lock's expiry (ms; +Inf without a lease) and the
// state edges it is classified by, at Redis time now (ms), for a PTTL of
// pttl ms (-1: no lease). Nothing with a lease is expired (Redis deletes
// it) or stale (a lock has no heartbeat); a lock without a lease is
// neither future nor expired: only its age can make it a zombie.
func LockBounds(r *track.Rules, now, pttl int64) (expiry float64, b track.Bounds) {
	if pttl < 0 {
		return math.Inf(1), noLease
	}
	return float64(now + pttl), track.Bounds{
		Expired:     math.Inf(-1),
		StaleBelow:  math.Inf(-1),
		FutureAbove: float64(now) + r.TTL + r.Skew,
	}
}
