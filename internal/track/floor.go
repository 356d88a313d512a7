package track

import "github.com/slotexporter/slot_exporter/internal/keytable"

// usedSample is one sweep's used value in a user's window, by the
// generation of the commit that took it.
type usedSample struct {
	gen  uint32
	used int64
}

// UserView is one user's state after a sweep, as the collector emits it.
type UserView struct {
	User string
	// ID is the hash the user was added under (FloorTracker.Add): what a
	// kind keys its own per-user values by (kind.Tracker.UserExtra).
	ID           uint64
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
	users keytable.Table[userRec]
	// pendCode and pendFlags are what the sweep in flight added up for
	// each record, by record number (records are only appended between
	// Begin and Commit): whether it was added, its used value and
	// whether it restarted (pendCode, see pending), and its anomaly
	// flags. Begin makes them anew and Commit drops them, so that a
	// failed sweep leaves no trace and none are held between sweeps. A
	// used value outside -16383 to 16382 is in pendWide: 3 bytes a user
	// while a sweep runs, 3 MB less at a million users than a 32-bit
	// value with 16 bits of flags.
	pendCode  []uint16
	pendFlags []uint8
	pendWide  map[int]int64
	names     nameArena
	// long holds the names of longName bytes or more, by user hash.
	long map[uint64]string
	// wide holds the used values that do not fit in a record, by user
	// hash.
	wide map[uint64]wideValues
	// more holds the window samples after the head, by user hash: a
	// window whose maximum fell and rose again.
	more map[uint64][]usedSample
	gen  uint32
	// genTime maps the commits that records still refer to (window heads,
	// starts of non-zero runs) to their Redis time (ms).
	genTime map[uint32]int64
	// lastGen/lastAt cache genTime's most recent lookup: nearly every
	// record refers to the same few commits.
	lastGen uint32
	lastAt  int64
	// renaming: a name given to Add replaces the one kept, until the
	// next Commit (Rename).
	renaming bool
}

// NewFloorTracker returns an empty tracker.
func NewFloorTracker() *FloorTracker {
	return &FloorTracker{long: map[uint64]string{}, wide: map[uint64]wideValues{}, more: map[uint64][]usedSample{}, genTime: map[uint32]int64{}}
}

// Len is the number of users remembered.
func (f *FloorTracker) Len() int { return f.users.Len() }

// Begin starts a sweep. Values added before the matching Commit only take
// effect if the sweep completes: a failed sweep leaves no trace.
func (f *FloorTracker) Begin() {
	f.gen = (f.gen + 1) & genMask
	if f.gen == 0 {
		f.gen = 1
	}
	// Nearly every user is added in every sweep.
	n := f.users.Len()
	f.pendCode, f.pendFlags, f.pendWide = make([]uint16, n, n+n/16), make([]uint8, n, n+n/16), nil
}

// A record's pendCode: 0, not added in this sweep; pendWideCode or
// pendWideRestart, added with its used value in pendWide; otherwise one
// more than its used value zigzagged (0, -1, 1, -2 ... as 0, 1, 2, 3
// ...) over the restart bit.
const (
	pendWideRestart uint16 = 0xfffe
	pendWideCode    uint16 = 0xffff
	maxPendZigzag          = (pendWideRestart - 3) >> 1 // used -16383 to 16382
)

// pending returns record i's values in this sweep: its used value, and
// its anomaly flags with pendAdded and pendRestart.
func (f *FloorTracker) pending(i int) (int64, uint16) {
	if i >= len(f.pendCode) || f.pendCode[i] == 0 {
		return 0, 0
	}
	c, fl := f.pendCode[i], uint16(f.pendFlags[i])|pendAdded
	if c >= pendWideRestart {
		if c == pendWideRestart {
			fl |= pendRestart
		}
		return f.pendWide[i], fl
	}
	c--
	if c&1 != 0 {
		fl |= pendRestart
	}
	z := int64(c >> 1)
	return z>>1 ^ -(z & 1), fl
}

// setPending sets record i's values in this sweep, i < len(pendCode):
// nothing unless fl has pendAdded.
func (f *FloorTracker) setPending(i int, used int64, fl uint16) {
	if f.pendCode[i] >= pendWideRestart {
		delete(f.pendWide, i)
	}
	if fl&pendAdded == 0 {
		f.pendCode[i], f.pendFlags[i] = 0, 0
		return
	}
	f.pendFlags[i] = uint8(fl)
	var restart uint16
	if fl&pendRestart != 0 {
		restart = 1
	}
	if z := uint64(used<<1) ^ uint64(used>>63); z <= uint64(maxPendZigzag) {
		f.pendCode[i] = (uint16(z)<<1 | restart) + 1
		return
	}
	if f.pendWide == nil {
		f.pendWide = map[int]int64{}
	}
	f.pendWide[i] = used
	f.pendCode[i] = pendWideCode - restart
}

// added reports whether record i was added in this sweep.
func (f *FloorTracker) added(i int) bool {
	_, fl := f.pending(i)
	return fl&pendAdded != 0
}

func (f *FloorTracker) timeOf(g uint32) int64 {
	if g != f.lastGen {
		f.lastGen, f.lastAt = g, f.genTime[g]
	}
	return f.lastAt
}

// Add records used and anomaly flags for a user in the current sweep. A
// user seen under several keys (it should not happen) adds up.
//
// A key replayed from what was held (kind.Replayer) passes no name: its
// user is known already, since a user is kept while it has something to
// report, and a replayed key reports what its last read did. An unknown
// user without a name reports nothing and is not added.
func (f *FloorTracker) Add(h uint64, name string, used int64, flags uint8) {
	f.add(h, name, used, flags)
}

// add returns the user's record number, or -1 for an unknown user
// without a name.
func (f *FloorTracker) add(h uint64, name string, used int64, flags uint8) int {
	i := f.users.Find(h)
	if i < 0 {
		if name == "" && used == 0 && flags == 0 {
			return -1
		}
		i = f.users.Add(h)
		_, u := f.users.At(i)
		f.setName(h, u, name)
	} else if f.renaming && name != "" {
		if _, u := f.users.At(i); f.name(h, u) != name {
			f.dropName(h, u)
			f.setName(h, u, name)
		}
	}
	if n := i + 1; n > len(f.pendCode) {
		f.pendCode = append(f.pendCode, make([]uint16, n-len(f.pendCode))...)
		f.pendFlags = append(f.pendFlags, make([]uint8, n-len(f.pendFlags))...)
	}
	p, fl := f.pending(i)
	f.setPending(i, p+used, fl|uint16(flags)|pendAdded)
	return i
}

// Restarted records that a user's used went back to its baseline in this
// sweep without being seen at 0, as a fixed-window rate counter does when
// its window restarts between two sweeps: the floor run starts over.
func (f *FloorTracker) Restarted(h uint64, name string) {
	if i := f.add(h, name, 0, 0); i >= 0 {
		p, fl := f.pending(i)
		f.setPending(i, p, fl|pendRestart)
	}
}

// Rename makes the names that the sweeps give Add replace those kept,
// until a sweep commits. A user is known by the hash of its canonical key
// (sweep's userID), and a reload that changes a family's user regexp can
// name the user of the same key differently (`prefix*` names the key
// `prefix{u}`'s user "{u}", the braces regexp "u"); the full read such a
// reload starts gives every user's new name.
func (f *FloorTracker) Rename() { f.renaming = true }

// Keep carries a user's used value and anomalies from the last sweep into
// this one when its key could not be read: reading it as 0 would restart
// the user's floor age.
func (f *FloorTracker) Keep(h uint64, name string) {
	i := f.users.Find(h)
	if i < 0 {
		return
	}
	if _, u := f.users.At(i); !f.added(i) {
		used, _ := f.values(h, u)
		f.add(h, name, used, u.flags&^AnomalyOverLimit)
	}
}

// KeepUnseen carries into this sweep the last used value of every user
// not seen in it.
func (f *FloorTracker) KeepUnseen() {
	for i := range f.users.Len() {
		if h, u := f.users.At(i); !f.added(i) {
			used, _ := f.values(h, u)
			f.add(h, "", used, u.flags&^AnomalyOverLimit)
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
	f.renaming = false
	f.genTime[f.gen] = now
	f.lastGen = 0
	for i := 0; i < f.users.Len(); i++ {
		h, u := f.users.At(i)
		used, flags, restart := int64(0), uint8(0), false
		if p, fl := f.pending(i); fl&pendAdded != 0 {
			used, flags, restart = p, uint8(fl), fl&pendRestart != 0
		}
		if lim.Limit > 0 && used > lim.Limit && lim.OverLimitIsAnomaly {
			flags |= AnomalyOverLimit
		}
		u.flags = flags
		nonzero := u.bits&recNonzero != 0
		switch {
		case used > 0 && (!nonzero || restart):
			u.bits |= recNonzero
			u.since = f.gen
		case used > 0 && f.timeOf(u.since) > now:
			u.since = f.gen
		case used <= 0:
			u.bits &^= recNonzero
		}
		_, w0used := f.values(h, u)
		w0used = f.slide(h, u, w0used, used, now, window)
		f.setValues(h, u, used, w0used)
		if w0used == 0 && flags == 0 {
			f.forget(i)
			i--
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
		if u.bits&recNonzero != 0 && now-f.timeOf(u.since) >= floorWindow {
			a.FloorNonzero++
		}
	}
	f.pendCode, f.pendFlags, f.pendWide = nil, nil, nil
	f.pruneTimes()
	if f.names.wasteful() {
		f.compactNames()
	}
	return a
}

// slide moves the window's monotonic deque, whose head's used value is
// w0used, to now and pushes used: samples that left the window or lie
// after now go from the front, and samples no larger than used from the
// back. It returns the new head's used value.
func (f *FloorTracker) slide(h uint64, u *userRec, w0used, used, now, window int64) int64 {
	var rest []usedSample
	if u.bits&recMore != 0 {
		rest = f.more[h]
	}
	head := usedSample{gen: u.w0gen, used: w0used}
	for head.used != 0 {
		if at := f.timeOf(head.gen); at > now-window && at <= now {
			break
		}
		head = usedSample{}
		if len(rest) > 0 {
			head, rest = rest[0], rest[1:]
		}
	}
	for head.used != 0 {
		back := head
		if len(rest) > 0 {
			back = rest[len(rest)-1]
		}
		if back.used > used && f.timeOf(back.gen) <= now {
			break
		}
		if len(rest) > 0 {
			rest = rest[:len(rest)-1]
		} else {
			head = usedSample{}
		}
	}
	if used > 0 {
		s := usedSample{gen: f.gen, used: used}
		if head.used == 0 {
			head = s
		} else {
			rest = append(rest, s)
		}
	}
	u.w0gen = head.gen
	if len(rest) > 0 {
		u.bits |= recMore
		f.more[h] = rest
	} else if u.bits&recMore != 0 {
		u.bits &^= recMore
		delete(f.more, h)
	}
	return head.used
}

// forget drops record i; the last record takes its place, with its
// values of the sweep in flight.
func (f *FloorTracker) forget(i int) {
	if last := f.users.Len() - 1; i < len(f.pendCode) {
		p, fl := f.pending(last)
		if last < len(f.pendCode) {
			f.setPending(last, 0, 0) // its value leaves pendWide with it
		}
		if i != last {
			f.setPending(i, p, fl)
		}
		n := min(last, len(f.pendCode))
		f.pendCode, f.pendFlags = f.pendCode[:n], f.pendFlags[:n]
	}
	h, u := f.users.At(i)
	f.dropName(h, u)
	if u.bits&recMore != 0 {
		delete(f.more, h)
	}
	if u.bits&recWide != 0 {
		delete(f.wide, h)
	}
	f.users.DeleteAt(i)
}

// pruneTimes forgets the commit times no record refers to any more.
func (f *FloorTracker) pruneTimes() {
	if len(f.genTime) < 64 {
		return
	}
	refs := make(map[uint32]struct{}, 64)
	last := uint32(0)
	ref := func(g uint32) {
		if g != last {
			refs[g], last = struct{}{}, g
		}
	}
	for i := range f.users.Len() {
		h, u := f.users.At(i)
		if _, w0used := f.values(h, u); w0used != 0 {
			ref(u.w0gen)
		}
		if u.bits&recNonzero != 0 {
			ref(u.since)
		}
	}
	for _, rest := range f.more {
		for _, s := range rest {
			ref(s.gen)
		}
	}
	ref(f.gen)
	for g := range f.genTime {
		if _, ok := refs[g]; !ok {
			delete(f.genTime, g)
		}
	}
}
