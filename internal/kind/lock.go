package kind

import (
	"context"
	"math"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/redisread"
	"github.com/slotexporter/slot_exporter/internal/snapshot"
	"github.com/slotexporter/slot_exporter/internal/track"
)

// A lock is an owner lock: SET key token NX PX ttl, extended and released
// only by its holder (a token-checked PEXPIRE and DEL). It is a slot set
// of one: the token is the member, remembered by track.MemberTracker by
// the hash of key and token, with the lease's expiry (Redis time, ms) as
// its score. So a token seen for the first time is an acquire, and a token
// gone is a hold ended: released if it went while the lease it had when
// last seen still ran, expired once that lease had run out (the holder
// died, or overran its lease), lost when the data vanished. A lock taken
// over by another token between two sweeps ends the old hold and starts a
// new one. Hold durations run from the first sweep that saw a token to the
// last.
//
// It reads the token (GETRANGE 0 redisread.MaxValueBytes: a token longer
// than MaxValueBytes is skipped as value_too_large, never read whole) and
// PTTL;
// the reader counts PTTL from the sweep's Redis TIME plus the exporter's
// own clock since (redisread.Plan.Now): each lease's expiry is then exact
// to the batch's round trip, not late by however long the sweep took to
// reach the key. A value of another type is skipped as wrong_type.
//
// States in slot_members{state}:
//   - future: PTTL > ttl + clock_skew_tolerance, a lease no holder asked
//     for (PX given seconds, or EX given milliseconds);
//   - zombie: the same token has held the lock for longer than max_hold
//     (renewed forever by a stuck holder);
//   - live: anything else. stale and expired do not apply (a lock has no
//     heartbeat of its own, and Redis deletes it when its lease ends):
//     they are always 0.
//
// A lock without a TTL (SET NX without PX) counts in slot_sets_without_ttl
// and is live or zombie by its age, not future: it is its own signal. Its
// user carries AnomalyKind so that the series cap shows it first: a
// crashed holder keeps everyone out forever. If it is then deleted, the
// hold ended released (its lease never ran out).
//
// Heartbeats: a lease whose expiry moved forward by more than
// min(ttl/10, 1s) since the last sweep was extended: one heartbeat. The
// margin absorbs the ms rounding of PTTL and TIME. It is exact while sweeps
// are more frequent than extensions (ttl 30s, extended every 10s, swept
// every 5s); when a holder extends several times between two sweeps, it
// counts once, a lower bound.
//
// used is 1 per held lock. The limit is optional; over it (a user holding
// more locks than allowed) is an anomaly.
func init() { register(config.KindLock, newLock) }

type lock struct {
	rules   track.Rules
	limit   int64
	members *track.MemberTracker
	holds   holds
	digest  *xxhash.Digest
	// leases is the last expiry seen per key, for heartbeats.
	leases map[uint64]lease
	gen    uint32
	cur    lockGauges
	last   lockGauges
}

type lease struct {
	user   uint64
	token  uint64
	expiry float64 // ms; +Inf without a TTL
	gen    uint32
}

type lockGauges struct {
	members    [track.NumStates]int
	withoutTTL int
}

// noLease are the bounds of a lock without a TTL: never expired, never
// future; only its age can make it a zombie.
var noLease = track.Bounds{Expired: math.Inf(-1), StaleBelow: math.Inf(-1), FutureAbove: math.Inf(1)}

func newLock(f *config.Family, _ *config.Sampling) Tracker {
	return &lock{
		rules:   lockRules(f),
		limit:   int64(f.Limit),
		members: track.NewMemberTracker(),
		holds:   newHolds(),
		digest:  xxhash.New(),
		leases:  map[uint64]lease{},
	}
}

func lockRules(f *config.Family) track.Rules {
	// Heartbeat only scales the member tracker's heartbeat count, which
	// locks do not use; it must not be 0.
	return track.Rules{TTL: ms(f.TTL), MaxHold: ms(f.MaxHold), Skew: ms(f.ClockSkewTolerance), Unit: 1, Heartbeat: 1}
}

func (t *lock) Reconfigure(f *config.Family, _ *config.Sampling) {
	t.rules, t.limit = lockRules(f), int64(f.Limit)
}

func (t *lock) Limits() track.Limits {
	return track.Limits{Limit: t.limit, OverLimitIsAnomaly: true}
}

func (t *lock) Begin(sw *Sweep) redisread.Reads {
	t.gen++
	t.cur = lockGauges{}
	t.members.Begin()
	return &lockReads{}
}

// renewMargin is how far a lease's expiry must move forward to count as
// extended.
func (t *lock) renewMargin() float64 { return min(t.rules.TTL/10, 1000) }

func (t *lock) Apply(sw *Sweep, k Key) {
	t.apply(sw, k, track.MemberHash(t.digest, k.Read.Key, k.Read.Text))
}

func (t *lock) Held(h uint64) bool { _, ok := t.leases[h]; return ok }

func (t *lock) Forget(h uint64) { delete(t.leases, h) }

// Replay: a lock's token changes only by writes, and its lease runs out
// on Redis's clock: the lease held, counted down to sw.Now, or gone.
func (t *lock) Replay(sw *Sweep) int {
	n := 0
	for h, l := range t.leases {
		if l.gen == t.gen {
			continue
		}
		if _, ok := sw.Carry[uint32(h)]; ok {
			continue
		}
		pttl := int64(-1)
		if !math.IsInf(l.expiry, 1) {
			if int64(l.expiry) <= sw.Now {
				delete(t.leases, h)
				continue
			}
			pttl = int64(l.expiry) - sw.Now
		}
		kr := redisread.KeyRead{Status: redisread.OK, PTTL: pttl, At: sw.Now}
		t.apply(sw, Key{Read: &kr, Hash: h, UserHash: l.user}, l.token)
		n++
	}
	return n
}

func (t *lock) apply(sw *Sweep, k Key, token uint64) {
	kr := k.Read
	expiry, b := LockBounds(&t.rules, sw.Now, kr.PTTL)
	o := t.members.Observe(token, k.Hash, expiry, sw.Now, &b, &t.rules)
	if o.Duplicate {
		return
	}
	if o.New {
		t.holds.acquires++
	}
	if prev, ok := t.leases[k.Hash]; ok && prev.token == token && prev.gen != t.gen &&
		!math.IsInf(expiry, 0) && !math.IsInf(prev.expiry, 0) && expiry-prev.expiry > t.renewMargin() {
		t.holds.heartbeats++
	}
	t.leases[k.Hash] = lease{user: k.UserHash, token: token, expiry: expiry, gen: t.gen}
	t.cur.members[o.State]++
	flags := o.State.Anomaly()
	if kr.PTTL == -1 {
		t.cur.withoutTTL++
		flags |= track.AnomalyKind
	}
	sw.Floor.Add(k.UserHash, k.User, 1, flags)
}

func (t *lock) Survived() int { return t.members.SeenAgain() }

func (t *lock) Unproven() { t.members.Unproven() }

func (t *lock) Known(k Key, thisSweep bool) bool {
	known := t.members.TrackedBefore
	if thisSweep {
		known = t.members.Tracked
	}
	return known(track.MemberHash(t.digest, k.Read.Key, k.Read.Text), k.Hash)
}

func (t *lock) End(sw *Sweep, lost, deferEnds bool) Ended {
	t.last = t.cur
	if deferEnds {
		return Ended{}
	}
	e := t.holds.end(sw, t.members.SweepJudgedAt(sw.Now, sw.ReadBy, sw.Carry, lost, &t.rules))
	for h, l := range t.leases {
		if l.gen == t.gen {
			continue
		}
		if _, ok := sw.Carry[uint32(h)]; !ok {
			delete(t.leases, h)
		}
	}
	return Ended{Lost: e.Count[track.OutcomeLost]}
}

func (t *lock) Publish(f *snapshot.Family) {
	memberGauges(f, &t.last.members)
	f.Gauges = append(f.Gauges, gauge(snapshot.WithoutTTL, float64(t.last.withoutTTL)))
	t.holds.publish(f, true)
}

func (t *lock) UserExtra(track.UserView) []snapshot.Value { return nil }

// lockReads reads a lock's token and PTTL as redisread.TokenReads does.
// The reader turns PTTL into the lease's remaining time at the sweep's
// Redis time (redisread.Plan.Now): a key read seconds into a long sweep
// has the PTTL it had when the sweep started.
type lockReads struct{}

func (l *lockReads) Read(ctx context.Context, c redis.Cmdable, keys []string, reads []redisread.KeyRead) error {
	pipe := c.Pipeline()
	gets := make([]*redis.StringCmd, len(keys))
	ttls := make([]*redis.DurationCmd, len(keys))
	for i, k := range keys {
		gets[i] = redisread.BoundedGet(ctx, pipe, k)
		ttls[i] = pipe.PTTL(ctx, k)
	}
	_, _ = pipe.Exec(ctx)
	for i, k := range keys {
		r := &reads[i]
		r.Key = k
		v, err := gets[i].Result()
		if err == nil {
			var d time.Duration
			if d, err = ttls[i].Result(); err == nil {
				r.PTTL = redisread.PTTLMillis(d)
			}
		}
		if err != nil {
			if err := r.Judge(err); err != nil {
				return err
			}
			continue
		}
		// GETRANGE answers "" for a missing key: PTTL tells.
		if r.PTTL == -2 {
			r.Status = redisread.Gone
			continue
		}
		r.SetToken(v)
	}
	return nil
}
