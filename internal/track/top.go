package track

import (
	"cmp"
	"container/heap"
	"slices"
)

// Top returns at most n users to emit, picked in docs/design.md's order: any
// anomaly first, then the largest floor age, then the largest window max.
// Users with nothing to report are never returned. It also returns how many
// reportable users were left out.
func (f *FloorTracker) Top(n int, now int64) ([]UserView, int) {
	h := &viewHeap{}
	total := 0
	f.lastGen = 0
	for i := range f.users.Len() {
		uh, u := f.users.At(i)
		used, w0used := f.values(uh, u)
		v := UserView{User: f.name(uh, u), ID: uh, Used: used, UsedMax: w0used, Anomaly: u.flags&^Listed != 0, Flags: u.flags}
		if u.bits&recNonzero != 0 {
			v.FloorSeconds = float64(max(now-f.timeOf(u.since), 0)) / 1000
		}
		if v.UsedMax <= 0 && v.FloorSeconds == 0 && u.flags == 0 {
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
