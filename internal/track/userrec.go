package track

import (
	"strings"
	"unsafe"
)

// userRec is one user's state: 24 bytes without pointers (32 with its
// hash in the table), so that a million users cost the garbage collector
// nothing to scan. Times are the generations of the commits that set
// them (FloorTracker.genTime maps them back): every time a user keeps is
// some sweep's Redis time. What a sweep adds up for the user is not here
// but in FloorTracker.pendCode and pendFlags, which only the sweep in
// flight holds: at a million users the record went from 56 to 40 bytes
// in the table (16 MB), and those cost 3 bytes a user while a sweep
// runs. The used values are
// 32 bits here, with the rare user whose values do not fit (a counter in
// the billions) in FloorTracker.wide: 8 MB less at a million users.
type userRec struct {
	// used and w0used, unless recWide is set: FloorTracker.values.
	used int32
	// w0used is the head of the window's monotonic deque (the window's
	// maximum); 0 when the window is empty, as only used > 0 is pushed.
	// The rest of the deque, rarely any, is in FloorTracker.more.
	w0used int32
	w0gen  uint32
	// since is the commit that began the current unbroken run of non-zero
	// sweeps; meaningful while recNonzero is set.
	since   uint32
	name    nameRef
	nameLen uint16
	flags   uint8
	bits    uint8
}

const (
	recNonzero  uint8 = 1 << iota
	recMore           // the window has samples in FloorTracker.more
	recLongName       // the name is in FloorTracker.long, not in the arena
	recWide           // used and w0used are in FloorTracker.wide
)

// wideValues are a user's used and window maximum when either does not
// fit in 32 bits.
type wideValues struct{ used, w0used int64 }

// The bits of a record's values in the sweep in flight (pending) above
// the anomaly flags.
const (
	pendAdded uint16 = 1 << (8 + iota) // the user was added in this sweep
	// pendRestart: in this sweep used went back to its baseline without
	// reaching 0 (a rate counter that restarted).
	pendRestart
)

// nameRef locates a name in a nameArena: chunk number << 16 | offset.
type nameRef uint32

const (
	arenaChunk = 1 << 16
	// longName: longer names are kept as strings of their own, so that
	// one huge key cannot waste most of a chunk.
	longName = arenaChunk / 16
)

// nameArena stores user names back to back in chunks. Chunks are only
// appended to, so names handed out (in UserViews of past snapshots) stay
// valid; when most bytes are dead, the live names are copied to a fresh
// arena and the old chunks are left to the GC.
type nameArena struct {
	chunks [][]byte
	used   int // bytes used of the last chunk
	total  int // bytes stored since the arena was made
	live   int
}

func (a *nameArena) add(name string) nameRef {
	a.total += len(name)
	a.live += len(name)
	if len(a.chunks) == 0 || a.used+len(name) > arenaChunk {
		a.chunks = append(a.chunks, make([]byte, arenaChunk))
		a.used = 0
	}
	c := len(a.chunks) - 1
	copy(a.chunks[c][a.used:], name)
	ref := nameRef(c<<16 | a.used)
	a.used += len(name)
	return ref
}

func (a *nameArena) get(ref nameRef, n int) string {
	if n == 0 {
		return ""
	}
	return unsafe.String(&a.chunks[ref>>16][ref&0xffff], n)
}

func (a *nameArena) drop(n int) { a.live -= n }

func (a *nameArena) wasteful() bool {
	return a.total > 4*arenaChunk && a.total > 2*a.live
}

func (f *FloorTracker) name(h uint64, u *userRec) string {
	if u.bits&recLongName != 0 {
		return f.long[h]
	}
	return f.names.get(u.name, int(u.nameLen))
}

// values are the user's used value of the last commit and its window's
// maximum.
func (f *FloorTracker) values(h uint64, u *userRec) (used, w0used int64) {
	if u.bits&recWide != 0 {
		w := f.wide[h]
		return w.used, w.w0used
	}
	return int64(u.used), int64(u.w0used)
}

func (f *FloorTracker) setValues(h uint64, u *userRec, used, w0used int64) {
	if used == int64(int32(used)) && w0used == int64(int32(w0used)) {
		u.used, u.w0used = int32(used), int32(w0used)
		if u.bits&recWide != 0 {
			u.bits &^= recWide
			delete(f.wide, h)
		}
		return
	}
	u.used, u.w0used = 0, 0
	u.bits |= recWide
	f.wide[h] = wideValues{used, w0used}
}

// dropName lets go of the user's name, before it is forgotten or renamed.
func (f *FloorTracker) dropName(h uint64, u *userRec) {
	if u.bits&recLongName != 0 {
		delete(f.long, h)
		u.bits &^= recLongName
		return
	}
	f.names.drop(int(u.nameLen))
}

func (f *FloorTracker) setName(h uint64, u *userRec, name string) {
	if len(name) >= longName {
		u.bits |= recLongName
		// A copy: the name may be part of a larger buffer (a key name
		// from the change feed points into a chunk of many), which
		// keeping it would keep whole.
		f.long[h] = strings.Clone(name)
		return
	}
	u.name, u.nameLen = f.names.add(name), uint16(len(name))
}

// compactNames moves the live names to a fresh arena once most of the
// old one is dead: an arena never shrinks by itself.
func (f *FloorTracker) compactNames() {
	old := f.names
	f.names = nameArena{}
	for i := range f.users.Len() {
		_, u := f.users.At(i)
		if u.bits&recLongName == 0 {
			u.name = f.names.add(old.get(u.name, int(u.nameLen)))
		}
	}
}
