package track

import (
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"testing"

	"github.com/cespare/xxhash/v2"
)

// modelFloor is FloorTracker written the plain way: a map of users, each
// window every sample taken. The tracker packs the same facts into a
// table of records without pointers and a window of maxima only;
// TestFloorMatchesModel holds it to this.
type modelFloor struct {
	users map[uint64]*modelUser
	gen   int
}

type modelUser struct {
	name             string
	used, pending    int64
	pgen             int
	flags, pflags    uint8
	restart, nonzero bool
	since            int64
	window           []modelSample
}

type modelSample struct{ at, used int64 }

func (m *modelFloor) begin() { m.gen++ }

func (m *modelFloor) add(h uint64, name string, used int64, flags uint8) *modelUser {
	u := m.users[h]
	if u == nil {
		if name == "" && used == 0 && flags == 0 {
			return nil
		}
		u = &modelUser{name: name}
		m.users[h] = u
	}
	if u.pgen != m.gen {
		u.pgen, u.pending, u.pflags, u.restart = m.gen, 0, 0, false
	}
	u.pending += used
	u.pflags |= flags
	return u
}

func (m *modelFloor) commit(now, window, floorWindow int64, lim Limits) FloorAggregates {
	var a FloorAggregates
	for h, u := range m.users {
		used, flags, restart := int64(0), uint8(0), false
		if u.pgen == m.gen {
			used, flags, restart = u.pending, u.pflags, u.restart
		}
		if lim.Limit > 0 && used > lim.Limit && lim.OverLimitIsAnomaly {
			flags |= AnomalyOverLimit
		}
		u.used, u.flags = used, flags
		switch {
		case used > 0 && (!u.nonzero || restart):
			u.nonzero, u.since = true, now
		case used > 0 && u.since > now:
			u.since = now
		case used <= 0:
			u.nonzero = false
		}
		// A sample no larger than a later one never counts again, even
		// if time steps back past the later one: only maxima are kept.
		u.window = slices.DeleteFunc(u.window, func(s modelSample) bool {
			return s.at <= now-window || s.at > now || s.used <= used
		})
		if used > 0 {
			u.window = append(u.window, modelSample{now, used})
		}
		if len(u.window) == 0 && flags == 0 {
			delete(m.users, h)
			continue
		}
		if used > 0 {
			a.Active++
		}
		if lim.Limit > 0 && used >= lim.Limit {
			a.AtLimit++
		}
		if lim.Limit > 0 && used > lim.Limit {
			a.OverLimit++
		}
		if u.nonzero && now-u.since >= floorWindow {
			a.FloorNonzero++
		}
	}
	return a
}

func (m *modelFloor) top(n int, now int64) ([]UserView, int) {
	var all []UserView
	for h, u := range m.users {
		v := UserView{User: u.name, ID: h, Used: u.used, Anomaly: u.flags != 0, Flags: u.flags}
		for _, s := range u.window {
			v.UsedMax = max(v.UsedMax, s.used)
		}
		if u.nonzero {
			v.FloorSeconds = float64(max(now-u.since, 0)) / 1000
		}
		if v.UsedMax > 0 || v.FloorSeconds != 0 || v.Anomaly {
			all = append(all, v)
		}
	}
	slices.SortFunc(all, func(a, b UserView) int {
		if viewLess(b, a) {
			return -1
		}
		return 1
	})
	k := min(max(n, 0), len(all))
	return all[:k], len(all) - k
}

// TestFloorMatchesModel drives the tracker and the model through the same
// random sweeps (users coming and going, failed sweeps, restarts, keys
// kept, long names, used values beyond 32 bits, Redis time that stalls
// and steps back) and compares every aggregate and every view.
func TestFloorMatchesModel(t *testing.T) {
	// Used values at and past the edges of a record's 32 bits, and of
	// -16383 to 16382 that a sweep's sums hold without pendWide.
	wide := []int64{1<<31 - 1, 1 << 31, 1 << 40, -1 << 31, -1<<31 - 1, -1 << 40,
		16383, 16384, -16383, -16384, 32767, 32768, -32768}
	sawWide := false
	for seed := int64(0); seed < 16; seed++ {
		r := rand.New(rand.NewSource(seed))
		f, m := NewFloorTracker(), &modelFloor{users: map[uint64]*modelUser{}}
		now := int64(1e12)
		users := 1 + r.Intn(800)
		window := int64(1000 + r.Intn(30000))
		for step := range 150 {
			f.Begin()
			m.begin()
			for range r.Intn(2 * users) {
				i := r.Intn(users)
				name := fmt.Sprint("u", i)
				if i%97 == 0 {
					name = fmt.Sprintf("%05000d", i) // kept out of the arena
				}
				h := xxhash.Sum64String(name)
				if r.Intn(5) == 0 && m.users[h] != nil {
					name = "" // a replayed key's user, known already
				}
				switch r.Intn(10) {
				case 0:
					f.Keep(h, name)
					if u := m.users[h]; u != nil && u.pgen != m.gen {
						m.add(h, name, u.used, u.flags&^AnomalyOverLimit)
					}
				case 1:
					if name != "" {
						f.Restarted(h, name)
						m.add(h, name, 0, 0).restart = true
					}
				default:
					used, flags := int64(r.Intn(6)*r.Intn(2)), uint8(0)
					if r.Intn(40) == 0 {
						used = wide[r.Intn(len(wide))]
					}
					if r.Intn(50) == 0 {
						flags = 1 << r.Intn(7) // every anomaly bit (Listed is no anomaly)
					}
					f.Add(h, name, used, flags)
					m.add(h, name, used, flags)
				}
			}
			if r.Intn(10) == 0 {
				continue // a failed sweep: no commit
			}
			if r.Intn(8) == 0 {
				f.KeepUnseen()
				for h, u := range m.users {
					if u.pgen != m.gen {
						m.add(h, "", u.used, u.flags&^AnomalyOverLimit)
					}
				}
			}
			switch r.Intn(20) {
			case 0:
				now -= int64(r.Intn(20000))
			case 1:
			default:
				now += int64(r.Intn(5000))
			}
			lim := Limits{Limit: int64(r.Intn(4)), OverLimitIsAnomaly: r.Intn(2) == 0}
			if got, want := f.Commit(now, window, 10000, lim), m.commit(now, window, 10000, lim); got != want {
				t.Fatalf("seed %d sweep %d: aggregates %+v, model %+v", seed, step, got, want)
			}
			if f.Len() != len(m.users) {
				t.Fatalf("seed %d sweep %d: %d users, model %d", seed, step, f.Len(), len(m.users))
			}
			nWide := 0
			for i := range f.users.Len() {
				if _, u := f.users.At(i); u.bits&recWide != 0 {
					nWide++
				}
			}
			if nWide != len(f.wide) {
				t.Fatalf("seed %d sweep %d: %d records marked wide, %d wide values", seed, step, nWide, len(f.wide))
			}
			sawWide = sawWide || nWide > 0
			n := r.Intn(50)
			got, gotDropped := f.Top(n, now)
			want, wantDropped := m.top(n, now)
			if gotDropped != wantDropped || len(got) != len(want) {
				t.Fatalf("seed %d sweep %d: %d views (%d dropped), model %d (%d)", seed, step, len(got), gotDropped, len(want), wantDropped)
			}
			for i := range got {
				if !reflect.DeepEqual(got[i], want[i]) {
					t.Fatalf("seed %d sweep %d: view %d is %.20q %+v, model %.20q %+v", seed, step, i, got[i].User, got[i], want[i].User, want[i])
				}
			}
		}
	}
	if !sawWide {
		t.Error("no user ever held a value beyond 32 bits")
	}
}
