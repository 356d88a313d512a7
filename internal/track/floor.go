package track

import (
	"cmp"
	"container/heap"
	"slices"
	"strings"
	"unsafe"
)

type usedSample struct {
	at   int64 // ms
	used int64
}

// userRec is one user's state. Records live in slabs (see recSlab): at a
// million users, one allocation each plus a window slice each doubled the
// tracker's heap.
type userRec struct {
	// name points into the tracker's name arena, never into the key it was
	// cut from: that would keep the whole key alive.
	name         string
	used         int64
	pending      int64
	nonzeroSince int64 // ms; meaningful while nonzero
	// The window is a monotonic deque: the used values of the window that
	// can still become its maximum, oldest first, values strictly
	// decreasing. Its head is w0 (empty when w0.used is 0, as only used > 0
	// is pushed); the rest, rarely any, is behind more.
	w0           usedSample
	more         *[]usedSample
	pendingGen   uint32
	pendingFlags uint8
	// pendingRestart: in this sweep used went back to its baseline
	// without reaching 0 (a rate counter that restarted).
	pendingRestart bool
	flags          uint8
	nonzero        bool
}

func (u *userRec) windowMax() int64 { return u.w0.used }

func (u *userRec) winEmpty() bool { return u.w0.used == 0 }

func (u *userRec) winBack() usedSample {
	if u.more != nil {
		m := *u.more
		return m[len(m)-1]
	}
	return u.w0
}

func (u *userRec) winPopFront() {
	if u.more == nil {
		u.w0 = usedSample{}
		return
	}
	m := *u.more
	u.w0 = m[0]
	if len(m) == 1 {
		u.more = nil
		return
	}
	*u.more = m[1:]
}

func (u *userRec) winPopBack() {
	if u.more == nil {
		u.w0 = usedSample{}
		return
	}
	m := *u.more
	if len(m) == 1 {
		u.more = nil
		return
	}
	*u.more = m[:len(m)-1]
}

func (u *userRec) winPush(s usedSample) {
	if u.w0.used == 0 {
		u.w0 = s
		return
	}
	if u.more == nil {
		u.more = &[]usedSample{s}
		return
	}
	*u.more = append(*u.more, s)
}

const slabSize = 1024

// recSlab hands out userRecs from arrays of slabSize, recycling freed ones.
type recSlab struct {
	cur  []userRec
	free []*userRec
}

func (s *recSlab) get() *userRec {
	if n := len(s.free); n > 0 {
		u := s.free[n-1]
		s.free = s.free[:n-1]
		return u
	}
	if len(s.cur) == 0 {
		s.cur = make([]userRec, slabSize)
	}
	u := &s.cur[0]
	s.cur = s.cur[1:]
	return u
}

func (s *recSlab) put(u *userRec) {
	*u = userRec{}
	s.free = append(s.free, u)
}

const arenaChunk = 64 << 10

// nameArena stores user names back to back in chunks. Chunks are only
// appended to, so names handed out (in UserViews of past snapshots) stay
// valid; when most bytes are dead, the live names are copied to fresh
// chunks and the old ones are left to the GC.
type nameArena struct {
	cur   []byte // free tail of the current chunk
	total int    // bytes handed out since the last compaction
	live  int
}

func (a *nameArena) add(name string) string {
	a.total += len(name)
	a.live += len(name)
	if len(name) == 0 {
		return ""
	}
	if len(name) > arenaChunk/8 {
		return strings.Clone(name)
	}
	if len(a.cur) < len(name) {
		a.cur = make([]byte, arenaChunk)
	}
	n := copy(a.cur, name)
	s := unsafe.String(&a.cur[0], n)
	a.cur = a.cur[n:]
	return s
}

func (a *nameArena) drop(name string) { a.live -= len(name) }

func (a *nameArena) wasteful() bool {
	return a.total > 4*arenaChunk && a.total > 2*a.live
}

// UserView is one user's state after a sweep, as the collector emits it.
type UserView struct {
	User         string
	Used         int64
	UsedMax      int64
	FloorSeconds float64
	Anomaly      bool
	// Flags are the user's anomaly bits in the last sweep (Anomaly*).
	Flags uint8
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
	slab  recSlab
	names nameArena
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
//
// A key replayed from what was held (kind.Replayer) passes no name: its
// user is known already, since a user is kept while it has something to
// report, and a replayed key reports what its last read did. An unknown
// user without a name reports nothing and is not added.
func (f *FloorTracker) Add(h uint64, name string, used int64, flags uint8) {
	u := f.users[h]
	if u == nil {
		if name == "" && used == 0 && flags == 0 {
			return
		}
		u = f.slab.get()
		u.name = f.names.add(name)
		f.users[h] = u
	}
	if u.pendingGen != f.gen {
		u.pendingGen = f.gen
		u.pending = 0
		u.pendingFlags = 0
		u.pendingRestart = false
	}
	u.pending += used
	u.pendingFlags |= flags
}

// Restarted records that a user's used went back to its baseline in this
// sweep without being seen at 0, as a fixed-window rate counter does when
// its window restarts between two sweeps: the floor run starts over.
func (f *FloorTracker) Restarted(h uint64, name string) {
	f.Add(h, name, 0, 0)
	f.users[h].pendingRestart = true
}

// Keep carries a user's used value and anomalies from the last sweep into
// this one when its key could not be read: reading it as 0 would restart
// the user's floor age.
func (f *FloorTracker) Keep(h uint64, name string) {
	u := f.users[h]
	if u == nil || u.pendingGen == f.gen {
		return
	}
	f.Add(h, name, u.used, u.flags&^AnomalyOverLimit)
}

// KeepUnseen carries into this sweep the last used value of every user
// not seen in it.
func (f *FloorTracker) KeepUnseen() {
	for h, u := range f.users {
		if u.pendingGen != f.gen {
			f.Add(h, u.name, u.used, u.flags&^AnomalyOverLimit)
		}
	}
}

// Limits say which users are at or over their limit.
type Limits struct {
	// Limit is the family's limit; 0 or less: none, and no user is at or
	// over it.
	Limit int64
	// OverLimitIsAnomaly is false for rate counters, which keep counting
	// refused hits: over the limit is routine there.
	OverLimitIsAnomaly bool
}

// Commit applies the sweep at Redis time now (ms). Users not added in this
// sweep are at 0.
//
// Redis time can step back (an NTP step, a VM restore, a failover to a
// node with another clock). No figure may go negative or freeze: a floor
// run that seems to start after now starts at now, and a window sample
// from after now is dropped, so an old maximum never outlives its window.
func (f *FloorTracker) Commit(now, window, floorWindow int64, lim Limits) FloorAggregates {
	var a FloorAggregates
	for h, u := range f.users {
		used, flags, restart := int64(0), uint8(0), false
		if u.pendingGen == f.gen {
			used, flags, restart = u.pending, u.pendingFlags, u.pendingRestart
		}
		if lim.Limit > 0 && used > lim.Limit && lim.OverLimitIsAnomaly {
			flags |= AnomalyOverLimit
		}
		u.used, u.flags = used, flags
		switch {
		case used > 0 && (!u.nonzero || restart):
			u.nonzero, u.nonzeroSince = true, now
		case used > 0 && u.nonzeroSince > now:
			u.nonzeroSince = now
		case used <= 0:
			u.nonzero = false
		}
		for !u.winEmpty() && (u.w0.at <= now-window || u.w0.at > now) {
			u.winPopFront()
		}
		for !u.winEmpty() && (u.winBack().used <= used || u.winBack().at > now) {
			u.winPopBack()
		}
		if used > 0 {
			u.winPush(usedSample{at: now, used: used})
		}
		if u.winEmpty() && flags == 0 {
			delete(f.users, h)
			f.names.drop(u.name)
			f.slab.put(u)
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
		if u.nonzero && now-u.nonzeroSince >= floorWindow {
			a.FloorNonzero++
		}
	}
	if n := len(f.slab.free); n > 4*slabSize && n > len(f.users) {
		f.compact()
	} else if f.names.wasteful() {
		f.names = nameArena{}
		for _, u := range f.users {
			u.name = f.names.add(u.name)
		}
	}
	return a
}

// compact moves the users to fresh slabs, arena and map after many left:
// none of the three shrinks by itself.
func (f *FloorTracker) compact() {
	users := make(map[uint64]*userRec, len(f.users))
	f.slab, f.names = recSlab{}, nameArena{}
	for h, u := range f.users {
		n := f.slab.get()
		*n = *u
		n.name = f.names.add(u.name)
		users[h] = n
	}
	f.users = users
}

// Top returns at most n users to emit, picked in docs/design.md's order: any
// anomaly first, then the largest floor age, then the largest window max.
// Users with nothing to report are never returned. It also returns how many
// reportable users were left out.
func (f *FloorTracker) Top(n int, now int64) ([]UserView, int) {
	h := &viewHeap{}
	total := 0
	for _, u := range f.users {
		v := UserView{User: u.name, Used: u.used, UsedMax: u.windowMax(), Anomaly: u.flags != 0, Flags: u.flags}
		if u.nonzero {
			v.FloorSeconds = float64(max(now-u.nonzeroSince, 0)) / 1000
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
