package kind

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/redisread"
	"github.com/slotexporter/slot_exporter/internal/snapshot"
	"github.com/slotexporter/slot_exporter/internal/track"
)

// TestSlotSetReplayAfterCompaction rewrites every held key twice, so that
// the member slab is compacted (and held entries move in their table as
// keys are dropped), then replays them all: the members, states and users
// replayed must be the ones last read.
func TestSlotSetReplayAfterCompaction(t *testing.T) {
	const keys = 50_000
	fam := &config.Family{Kind: config.KindSlotSet, TTL: time.Minute, HeartbeatInterval: 10 * time.Second,
		StaleAfter: 30 * time.Second, MaxHold: time.Hour, Limit: 2}
	tr := newSlotSet(fam, &config.Sampling{MaxMembersPerKey: 1000}).(*slotSet)
	now := int64(1e12)
	floor := track.NewFloorTracker()
	sweep := func(read bool, round int) (snapshot.Family, []track.UserView) {
		now += 5000
		sw := &Sweep{Now: now, ReadBy: now, Floor: floor, Carry: track.Carry{}, Hold: true}
		floor.Begin()
		tr.Begin(sw)
		if read {
			for i := range keys {
				key, user := fmt.Sprintf("s:{u%d}", i), fmt.Sprintf("u%d", i)
				// Key i holds 1 + i%3 members; every third key drops one
				// member in round 1, and some scores put members stale.
				n := 1 + i%3
				if round == 1 && i%3 == 2 {
					n--
				}
				ms := make([]redisread.Member, n)
				for j := range ms {
					score := float64(now + 50_000)
					if (i+j)%7 == 0 {
						score = float64(now + 20_000) // stale
					}
					ms[j] = redisread.Member{Hash: xxhash.Sum64String(fmt.Sprint(key, j)), Score: score}
				}
				kr := redisread.KeyRead{Status: redisread.OK, PTTL: 120_000, At: now, Members: ms}
				tr.Apply(sw, Key{Read: &kr, Hash: xxhash.Sum64String(key), User: user, UserHash: xxhash.Sum64String(user)})
			}
		} else if got := tr.Replay(sw); got != keys {
			t.Fatalf("replayed %d keys, want %d", got, keys)
		}
		tr.End(sw, false, false)
		floor.Commit(now, 60_000, 3_600_000, tr.Limits())
		var f snapshot.Family
		tr.Publish(&f)
		views, _ := floor.Top(1<<20, now)
		return f, views
	}
	sweep(true, 0)
	sweep(true, 1)
	if tr.slab.garbage != 0 || len(tr.slab.chunks) > 2 {
		t.Fatalf("after a rewrite of every key: %d members of garbage in %d chunks, %d live", tr.slab.garbage, len(tr.slab.chunks), tr.slab.live)
	}
	// Time moves 5 s per sweep: a read of the same data at the replay's
	// time is what the replay must equal, so read once more at it after.
	replayed, replayedUsers := sweep(false, 1)
	now -= 5000
	read, readUsers := sweep(true, 1)
	if !reflect.DeepEqual(replayed.Gauges, read.Gauges) {
		t.Errorf("replayed gauges %v\nread gauges %v", replayed.Gauges, read.Gauges)
	}
	if !reflect.DeepEqual(replayedUsers, readUsers) {
		t.Errorf("replayed %d users, read %d; first %+v vs %+v", len(replayedUsers), len(readUsers), replayedUsers[0], readUsers[0])
	}
	members := 0
	for i := range keys {
		members += 1 + i%3
		if i%3 == 2 {
			members--
		}
	}
	if tr.held.Len() != keys || tr.slab.live != members {
		t.Errorf("%d keys held with %d members, want %d with %d", tr.held.Len(), tr.slab.live, keys, members)
	}
}
