package kind

import (
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/redisread"
	"github.com/slotexporter/slot_exporter/internal/snapshot"
	"github.com/slotexporter/slot_exporter/internal/track"
)

// slotSetRig drives a slot set through sweeps as a family's sweep does,
// holding keys for replay: begin, reads or a replay, end with the floor's
// commit. Sweeps are 5 s apart in Redis time.
type slotSetRig struct {
	tr    *slotSet
	floor *track.FloorTracker
	now   int64
	// byName: users are known by the hash of their name, as in a family
	// whose user regexp has no canonical key; otherwise by their key's.
	byName bool
}

func newSlotSetRig(limit int) *slotSetRig {
	fam := &config.Family{Kind: config.KindSlotSet, TTL: time.Minute, HeartbeatInterval: 10 * time.Second,
		StaleAfter: 30 * time.Second, MaxHold: time.Hour, Limit: limit}
	return &slotSetRig{tr: newSlotSet(fam, &config.Sampling{MaxMembersPerKey: 1000}).(*slotSet),
		floor: track.NewFloorTracker(), now: 1e12}
}

func (r *slotSetRig) begin() *Sweep {
	r.now += 5000
	sw := &Sweep{Now: r.now, ReadBy: r.now, Floor: r.floor, Carry: track.Carry{}, Hold: true}
	r.floor.Begin()
	r.tr.Begin(sw)
	return sw
}

// read applies a read of key (by its hash) that found members.
func (r *slotSetRig) read(sw *Sweep, key uint64, user string, members []redisread.Member) {
	kr := redisread.KeyRead{Status: redisread.OK, PTTL: 3_600_000, At: r.now, Members: members}
	id := key
	if r.byName {
		id = xxhash.Sum64String(user)
	}
	r.tr.Apply(sw, Key{Read: &kr, Hash: key, User: user, UserHash: id})
}

// end ends the sweep and returns what the family publishes and its users.
func (r *slotSetRig) end(sw *Sweep) (snapshot.Family, []track.UserView) {
	r.tr.End(sw, false, false)
	r.floor.Commit(r.now, 60_000, 3_600_000, r.tr.Limits())
	var f snapshot.Family
	r.tr.Publish(&f)
	views, _ := r.floor.Top(1<<20, r.now)
	return f, views
}
