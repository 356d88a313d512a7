package kind

import (
	"fmt"
	"math"
	"reflect"
	"testing"
	"unsafe"

	"github.com/cespare/xxhash/v2"

	"github.com/slotexporter/slot_exporter/internal/redisread"
	"github.com/slotexporter/slot_exporter/internal/snapshot"
	"github.com/slotexporter/slot_exporter/internal/track"
)

// TestSlotSetReplayEqualsRead rewrites every held key twice (held entries
// move in their table as keys are dropped, and every third key loses a
// member), then replays them all from the member table: the members,
// states and users replayed must be the ones a read at the same time finds.
// The first keys hold 254 to 301 members, about the 255 that Replay
// counts in a byte a key. Users are known by their key's hash, or by
// their name's (kept beside the held keys); a last sweep that reads half
// the keys forgets the rest, and their users.
func TestSlotSetReplayEqualsRead(t *testing.T) {
	for _, byName := range []bool{false, true} {
		t.Run(fmt.Sprintf("byName=%v", byName), func(t *testing.T) { testSlotSetReplayEqualsRead(t, byName) })
	}
}

func testSlotSetReplayEqualsRead(t *testing.T, byName bool) {
	const keys = 50_000
	r := newSlotSetRig(2)
	r.byName = byName
	tr := r.tr
	// size is how many members key i holds in round 0.
	size := func(i int) int {
		if i < 6 {
			return []int{254, 255, 256, 257, 300, 301}[i]
		}
		return 1 + i%3
	}
	sweep := func(read bool, round int) (snapshot.Family, []track.UserView) {
		sw := r.begin()
		if read {
			for i := range keys {
				if round == 2 && i%2 == 1 {
					continue
				}
				key, user := fmt.Sprintf("s:{u%d}", i), fmt.Sprintf("u%d", i)
				// Key i holds 1 + i%3 members; every third key drops one
				// member in round 1, and some scores put members stale.
				n := size(i)
				if round == 1 && i%3 == 2 {
					n--
				}
				ms := make([]redisread.Member, n)
				for j := range ms {
					score := float64(r.now + 50_000)
					if (i+j)%7 == 0 {
						score = float64(r.now + 20_000) // stale
					}
					ms[j] = redisread.Member{Hash: xxhash.Sum64String(fmt.Sprint(key, j)), Score: score}
				}
				r.read(sw, xxhash.Sum64String(key), user, ms)
			}
		} else if got := tr.Replay(sw); got != keys {
			t.Fatalf("replayed %d keys, want %d", got, keys)
		}
		return r.end(sw)
	}
	sweep(true, 0)
	sweep(true, 1)
	// Time moves 5 s per sweep: a read of the same data at the replay's
	// time is what the replay must equal, so read once more at it after.
	replayed, replayedUsers := sweep(false, 1)
	r.now -= 5000
	read, readUsers := sweep(true, 1)
	if !reflect.DeepEqual(replayed.Gauges, read.Gauges) {
		t.Errorf("replayed gauges %v\nread gauges %v", replayed.Gauges, read.Gauges)
	}
	if !reflect.DeepEqual(replayedUsers, readUsers) {
		t.Errorf("replayed %d users, read %d; first %+v vs %+v", len(replayedUsers), len(readUsers), replayedUsers[0], readUsers[0])
	}
	members := 0
	for i := range keys {
		members += size(i)
		if i%3 == 2 {
			members--
		}
	}
	if tr.held.Len() != keys || tr.members.Len() != members {
		t.Errorf("%d keys held with %d members, want %d with %d", tr.held.Len(), tr.members.Len(), keys, members)
	}
	if want := map[bool]int{false: 0, true: keys}[byName]; tr.users.Len() != want {
		t.Errorf("%d users kept beside the held keys, want %d", tr.users.Len(), want)
	}
	sweep(true, 2)
	if want := map[bool]int{false: 0, true: keys / 2}[byName]; tr.held.Len() != keys/2 || tr.users.Len() != want {
		t.Errorf("after reading half the keys: %d held, %d users beside them, want %d and %d", tr.held.Len(), tr.users.Len(), keys/2, want)
	}
	for i := 0; i < keys; i += 2 {
		h := xxhash.Sum64String(fmt.Sprintf("s:{u%d}", i))
		want := h
		if byName {
			want = xxhash.Sum64String(fmt.Sprintf("u%d", i))
		}
		if got := tr.userOf(h); got != want {
			t.Fatalf("key %d: user %x, want %x", i, got, want)
		}
	}
}

// TestSlotSetSharedLowHalf: the member table knows a key by the low half of
// its hash, and so does the held table. Of two keys that share it, the
// second is not held (read every sweep); a member it loses must end, not
// be replayed as the first key's, and once the first key is gone the
// second is held and replayed with its own members.
func TestSlotSetSharedLowHalf(t *testing.T) {
	r := newSlotSetRig(5)
	tr := r.tr
	const a, b = uint64(1)<<32 | 0xabcd, uint64(2)<<32 | 0xabcd
	users := map[uint64]string{a: "ua", b: "ub"}
	type read struct {
		key     uint64
		members []string
	}
	// sweep reads the given keys, replays the rest, forgets gone ones
	// (as the sweep does for a key read as gone or not held) and returns
	// the members counted and the used of each user.
	sweep := func(reads []read, gone ...uint64) (int, map[string]int64) {
		sw := r.begin()
		for _, rd := range reads {
			ms := make([]redisread.Member, len(rd.members))
			for i, m := range rd.members {
				ms[i] = redisread.Member{Hash: xxhash.Sum64String(m), Score: float64(r.now + 50_000)}
			}
			r.read(sw, rd.key, users[rd.key], ms)
			if !tr.Held(rd.key) {
				tr.Forget(rd.key)
			}
		}
		for _, g := range gone {
			tr.Forget(g)
		}
		tr.Replay(sw)
		_, views := r.end(sw)
		used := map[string]int64{}
		for _, v := range views {
			used[v.User] = v.Used
		}
		n := 0
		for _, c := range tr.last.members {
			n += c
		}
		return n, used
	}
	check := func(step string, n int, used map[string]int64, wantN int, want map[string]int64) {
		t.Helper()
		if n != wantN || !reflect.DeepEqual(used, want) {
			t.Errorf("%s: %d members, used %v; want %d, %v", step, n, used, wantN, want)
		}
		if tr.members.Len() != wantN {
			t.Errorf("%s: the member table holds %d members, want %d", step, tr.members.Len(), wantN)
		}
	}
	n, used := sweep([]read{{a, []string{"a1", "a2"}}, {b, []string{"b1", "b2"}}})
	check("both read", n, used, 4, map[string]int64{"ua": 2, "ub": 2})
	if !tr.Held(a) || tr.Held(b) {
		t.Fatalf("held: a %v, b %v; want the first key only", tr.Held(a), tr.Held(b))
	}
	n, used = sweep([]read{{b, []string{"b1"}}})
	check("b lost b2, a replayed", n, used, 3, map[string]int64{"ua": 2, "ub": 1})
	n, used = sweep(nil, b)
	check("b gone, a replayed", n, used, 2, map[string]int64{"ua": 2, "ub": 0})
	n, used = sweep([]read{{b, []string{"b3"}}}, a)
	check("a gone, b back", n, used, 1, map[string]int64{"ua": 0, "ub": 1})
	// Read before a was forgotten, b was not held: it is read again.
	n, used = sweep([]read{{b, []string{"b3"}}})
	check("b read again", n, used, 1, map[string]int64{"ua": 0, "ub": 1})
	if !tr.Held(b) {
		t.Fatal("with the first key gone, the second is not held")
	}
	n, used = sweep(nil)
	check("b replayed", n, used, 1, map[string]int64{"ua": 0, "ub": 1})
	if len(tr.unreplayable) != 0 {
		t.Errorf("%d members left unreplayable", len(tr.unreplayable))
	}
}

// TestSlotHeldExpiry: a held key's expiry, in 48 bits, comes back as it
// went in, none (-1) included; one past the year 10889 comes back as
// the latest it can keep, still far ahead of any sweep.
func TestSlotHeldExpiry(t *testing.T) {
	for _, c := range []struct{ in, want int64 }{
		{-1, -1}, {0, 0}, {1, 1}, {1<<16 - 1, 1<<16 - 1}, {1 << 16, 1 << 16},
		{1_796_322_837_123, 1_796_322_837_123}, {maxHeldExpiry, maxHeldExpiry},
		{maxHeldExpiry + 1, maxHeldExpiry}, {math.MaxInt64, maxHeldExpiry},
	} {
		var e slotHeld
		e.bits, e.flags = 0xff, 0xff
		e.setExpiry(c.in)
		if got := e.expiry(); got != c.want || e.bits != 0xff || e.flags != 0xff {
			t.Errorf("expiry %d came back %d (bits %x, flags %x)", c.in, got, e.bits, e.flags)
		}
	}
	if n := unsafe.Sizeof(slotHeld{}); n != 8 {
		t.Errorf("slotHeld is %d bytes, want 8", n)
	}
}
