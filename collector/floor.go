package collector

import (
	"cmp"
	"container/heap"
	"slices"
)

// Anomaly bits for a user in one sweep.
const (
	anomalyOverLimit uint8 = 1 << iota
	anomalyExpired
	anomalyZombie
	anomalyFuture
	anomalyStale
	anomalyNegative
)

type usedSample struct {
	at   int64 // ms
	used int64
}

type userRec struct {
	name         string
	used         int64
	pending      int64
	pendingGen   uint32
	pendingFlags uint8
	flags        uint8
	nonzeroSince int64 // ms; meaningful while nonzero
	nonzero      bool
	// win is a monotonic deque: the used values of the window that can still
	// become its maximum, oldest first, values strictly decreasing.
	win []usedSample
}

func (u *userRec) windowMax() int64 {
	if len(u.win) == 0 {
		return 0
	}
	return u.win[0].used
}

// UserView is one user's state after a sweep, as the collector emits it.
type UserView struct {
	User         string
	Used         int64
	UsedMax      int64
	FloorSeconds float64
	Anomaly      bool
}

// FloorAggregates are the per-family user counts after a sweep.
type FloorAggregates struct {
	Active, AtLimit, OverLimit, FloorNonzero int
}

// FloorTracker keeps, per user of one family, the used value of the latest
// sweep, its maximum over the window, and when the current unbroken run of
// non-zero sweeps began. Users with nothing left to report are forgotten.
type FloorTracker struct {
	users map[uint64]*userRec
	gen   uint32
}

// NewFloorTracker returns an empty tracker.
func NewFloorTracker() *FloorTracker {
	return &FloorTracker{users: make(map[uint64]*userRec)}
}

// Len is the number of users remembered.
func (f *FloorTracker) Len() int { return len(f.users) }

// Begin starts a sweep. Values added before the matching Commit only take
// effect if the sweep completes: a failed sweep leaves no trace.
func (f *FloorTracker) Begin() { f.gen++ }

// Add records used and anomaly flags for a user in the current sweep. A
// user seen under several keys (it should not happen) adds up.
func (f *FloorTracker) Add(h uint64, name string, used int64, flags uint8) {
	u := f.users[h]
	if u == nil {
		u = &userRec{name: name}
		f.users[h] = u
	}
	if u.pendingGen != f.gen {
		u.pendingGen = f.gen
		u.pending = 0
		u.pendingFlags = 0
	}
	u.pending += used
	u.pendingFlags |= flags
}

// Commit applies the sweep at Redis time now (ms). Users not added in this
// sweep are at 0.
func (f *FloorTracker) Commit(now, window, floorWindow int64, limit int64) FloorAggregates {
	var a FloorAggregates
	for h, u := range f.users {
		used, flags := int64(0), uint8(0)
		if u.pendingGen == f.gen {
			used, flags = u.pending, u.pendingFlags
		}
		if used > limit {
			flags |= anomalyOverLimit
		}
		u.used, u.flags = used, flags
		if used > 0 {
			if !u.nonzero {
				u.nonzero, u.nonzeroSince = true, now
			}
		} else {
			u.nonzero = false
		}
		for len(u.win) > 0 && u.win[0].at <= now-window {
			u.win = u.win[1:]
		}
		for len(u.win) > 0 && u.win[len(u.win)-1].used <= used {
			u.win = u.win[:len(u.win)-1]
		}
		if used > 0 {
			u.win = append(u.win, usedSample{at: now, used: used})
		}
		if len(u.win) == 0 && flags == 0 {
			delete(f.users, h)
			continue
		}
		if used > 0 {
			a.Active++
		}
		if used >= limit {
			a.AtLimit++
		}
		if used > limit {
			a.OverLimit++
		}
		if u.nonzero && now-u.nonzeroSince >= floorWindow {
			a.FloorNonzero++
		}
	}
	return a
}

// Top returns at most n users to emit, picked in DESIGN.md's order: any
// anomaly first, then the largest floor age, then the largest window max.
// Users with nothing to report are never returned. It also returns how many
// reportable users were left out.
func (f *FloorTracker) Top(n int, now int64) ([]UserView, int) {
	h := &viewHeap{}
	total := 0
	for _, u := range f.users {
		v := UserView{User: u.name, Used: u.used, UsedMax: u.windowMax(), Anomaly: u.flags != 0}
		if u.nonzero {
			v.FloorSeconds = float64(now-u.nonzeroSince) / 1000
		}
		if v.UsedMax <= 0 && v.FloorSeconds == 0 && !v.Anomaly {
			continue
		}
		total++
		if n <= 0 {
			continue
		}
		if h.Len() < n {
			heap.Push(h, v)
		} else if viewLess(h.v[0], v) {
			h.v[0] = v
			heap.Fix(h, 0)
		}
	}
	out := h.v
	slices.SortFunc(out, func(a, b UserView) int {
		if viewLess(a, b) {
			return 1
		}
		if viewLess(b, a) {
			return -1
		}
		return 0
	})
	return out, total - len(out)
}

// viewLess orders by priority, lowest first.
func viewLess(a, b UserView) bool {
	if a.Anomaly != b.Anomaly {
		return !a.Anomaly
	}
	if c := cmp.Compare(a.FloorSeconds, b.FloorSeconds); c != 0 {
		return c < 0
	}
	if c := cmp.Compare(a.UsedMax, b.UsedMax); c != 0 {
		return c < 0
	}
	// A stable order keeps the same users chosen across scrapes.
	return a.User > b.User
}

// viewHeap is a min-heap by priority: the root is the first user to drop.
type viewHeap struct{ v []UserView }

func (h *viewHeap) Len() int           { return len(h.v) }
func (h *viewHeap) Less(i, j int) bool { return viewLess(h.v[i], h.v[j]) }
func (h *viewHeap) Swap(i, j int)      { h.v[i], h.v[j] = h.v[j], h.v[i] }
func (h *viewHeap) Push(x any)         { h.v = append(h.v, x.(UserView)) }
func (h *viewHeap) Pop() any {
	x := h.v[len(h.v)-1]
	h.v = h.v[:len(h.v)-1]
	return x
}
