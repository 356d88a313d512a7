package track

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"
)

// BenchmarkFloorMemory reports the live heap per tracked user: 1M users
// whose names are substrings of longer keys, as the sweeper passes them.
func BenchmarkFloorMemory(b *testing.B) {
	b.Run("steady", func(b *testing.B) { benchFloorMemory(b, 1) })
	// Two thirds of the users keep two samples in their window.
	b.Run("varying", func(b *testing.B) { benchFloorMemory(b, 3) })
}

func benchFloorMemory(b *testing.B, vary int) {
	const users = 1_000_000
	for range b.N {
		// Measured from before the keys exist: they are the sweep's garbage,
		// except what the tracker keeps of them.
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		keys := make([]string, users)
		for i := range keys {
			keys[i] = fmt.Sprintf("joishi:streams:{%012d}", i)
		}
		f := NewFloorTracker()
		for sweep := range 3 {
			f.Begin()
			for i, k := range keys {
				name := k[16 : len(k)-1]
				f.Add(xxhash.Sum64String(name), name, int64(1+(i+sweep)%vary), 0)
			}
			f.Commit(int64(1e12+sweep*5000), 600e3, 1800e3, Limits{Limit: 3, OverLimitIsAnomaly: true})
		}
		keys = nil
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/users, "B/user")
		runtime.KeepAlive(f)
	}
}

// TestFloorNamesSurviveCompaction churns users so that the name arena is
// compacted, and checks every remembered name is still right.
func TestFloorNamesSurviveCompaction(t *testing.T) {
	f := NewFloorTracker()
	now := int64(1e12)
	for round := range 20 {
		f.Begin()
		for i := range 5000 {
			name := fmt.Sprintf("user-%d-%d", round, i)
			f.Add(xxhash.Sum64String(name), name, 1, 0)
		}
		// Only the previous round's users survive (window max).
		now += 1000
		f.Commit(now, 1500, 1e9, Limits{Limit: 10, OverLimitIsAnomaly: true})
		if f.Len() > 10000 {
			t.Fatalf("round %d: %d users remembered", round, f.Len())
		}
		views, _ := f.Top(1<<20, now)
		for _, v := range views {
			if f.users.Find(xxhash.Sum64String(v.User)) < 0 {
				t.Fatalf("round %d: name %q does not hash to a remembered user", round, v.User)
			}
		}
		if len(views) != f.Len() {
			t.Fatalf("round %d: %d views, %d users", round, len(views), f.Len())
		}
	}
	// Once all are gone, their names and times go too (keytable's own
	// test shows its storage goes).
	f.Begin()
	f.Commit(now+1e6, 1500, 1e9, Limits{Limit: 10, OverLimitIsAnomaly: true})
	if f.Len() != 0 || f.names.live != 0 || len(f.genTime) > 64 {
		t.Errorf("after all users left: %d users, %d name bytes, %d commit times", f.Len(), f.names.live, len(f.genTime))
	}
	if f.names.total > 4*arenaChunk+2*f.names.live {
		t.Errorf("arena holds %d bytes for %d live", f.names.total, f.names.live)
	}
}

// TestFloorRename: a user keeps the name it was first added under, also
// when a later sweep names it differently, unless Rename came before that
// sweep; the rename lasts until the sweep commits. Long names (kept
// apart from the arena) are renamed both ways too.
func TestFloorRename(t *testing.T) {
	long := strings.Repeat("L", longName)
	f := NewFloorTracker()
	const h, g = 1, 2
	sweep := func(names ...string) map[uint64]string {
		f.Begin()
		f.Add(h, names[0], 1, 0)
		f.Add(g, names[1], 1, 0)
		f.Commit(1000, 60_000, 3_600_000, Limits{})
		views, _ := f.Top(10, 1000)
		got := map[uint64]string{}
		for _, v := range views {
			got[v.ID] = v.User
		}
		return got
	}
	if got := sweep("{u}", long); got[h] != "{u}" || got[g] != long {
		t.Fatalf("first names: %v", got)
	}
	if got := sweep("u", "v"); got[h] != "{u}" || got[g] != long {
		t.Errorf("renamed without Rename: %v", got)
	}
	f.Rename()
	if got := sweep("u", "v"); got[h] != "u" || got[g] != "v" {
		t.Errorf("not renamed after Rename: %v", got)
	}
	if got := sweep("x", long); got[h] != "u" || got[g] != "v" {
		t.Errorf("renamed after the renaming sweep committed: %v", got)
	}
	f.Rename()
	if got := sweep("u", long); got[h] != "u" || got[g] != long || len(f.long) != 1 {
		t.Errorf("back to a long name: %v (%d long names kept)", got, len(f.long))
	}
}
