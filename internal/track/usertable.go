package track

import (
	"math/bits"
	"unsafe"
)

// userRec is one user's state: 56 bytes without pointers, so that a
// million users cost the garbage collector nothing to scan. Times are
// the generations of the commits that set them (FloorTracker.genTime
// maps them back): every time a user keeps is some sweep's Redis time.
type userRec struct {
	h       uint64 // the user's hash; never 0 in the table
	used    int64
	pending int64
	// w0used is the head of the window's monotonic deque (the window's
	// maximum); 0 when the window is empty, as only used > 0 is pushed.
	// The rest of the deque, rarely any, is in FloorTracker.more.
	w0used int64
	w0gen  uint32
	// since is the commit that began the current unbroken run of non-zero
	// sweeps; meaningful while recNonzero is set.
	since   uint32
	name    nameRef
	pgen    uint32 // generation of pending, pflags and recRestart
	nameLen uint16
	pflags  uint8
	flags   uint8
	bits    uint8
}

const (
	recNonzero uint8 = 1 << iota
	// recRestart: in this sweep used went back to its baseline without
	// reaching 0 (a rate counter that restarted).
	recRestart
	recMore     // the window has samples in FloorTracker.more
	recLongName // the name is in FloorTracker.long, not in the arena
)

const recChunk = 1024

// userTable holds the records densely, in chunks (growing never copies
// them and leaves no doubled capacity behind), with an open-addressing
// index of record numbers beside them. At a million users the Go map of
// pointers it replaced cost about as much as the records themselves.
type userTable struct {
	chunks [][]userRec
	n      int
	// index holds record number + 1 (0: free), linear probing, at most
	// half full; its length is a power of two.
	index []uint32
	shift uint8
}

func (t *userTable) at(i int) *userRec { return &t.chunks[i/recChunk][i%recChunk] }

func (t *userTable) home(h uint64) int {
	return int((h * 0x9E3779B97F4A7C15) >> t.shift)
}

// slot returns the index position holding h's record, or the free one
// where it belongs.
func (t *userTable) slot(h uint64) int {
	mask := len(t.index) - 1
	for i := t.home(h); ; i = (i + 1) & mask {
		v := t.index[i]
		if v == 0 || t.at(int(v-1)).h == h {
			return i
		}
	}
}

// find returns h's record number, or -1.
func (t *userTable) find(h uint64) int {
	if t.n == 0 {
		return -1
	}
	v := t.index[t.slot(h)]
	return int(v) - 1
}

// add appends a zeroed record for h, which must not be in the table.
func (t *userTable) add(h uint64) int {
	if 2*(t.n+1) > len(t.index) {
		t.reindex(max(64, 2*len(t.index)))
	}
	i := t.n
	if i == len(t.chunks)*recChunk {
		t.chunks = append(t.chunks, make([]userRec, recChunk))
	}
	t.n++
	*t.at(i) = userRec{h: h}
	t.index[t.slot(h)] = uint32(i + 1)
	return i
}

// remove deletes record i, moving the last record into its place: a
// caller walking the records in order must look at i again.
func (t *userTable) remove(i int) {
	t.unindex(t.slot(t.at(i).h))
	last := t.n - 1
	if i != last {
		*t.at(i) = *t.at(last)
		t.index[t.slot(t.at(i).h)] = uint32(i + 1)
	}
	*t.at(last) = userRec{}
	t.n--
	if len(t.chunks) > 1 && t.n <= (len(t.chunks)-2)*recChunk {
		t.chunks[len(t.chunks)-1] = nil
		t.chunks = t.chunks[:len(t.chunks)-1]
	}
	if len(t.index) > 64 && 8*t.n < len(t.index) {
		t.reindex(len(t.index) / 4)
	}
}

// unindex frees index position i, shifting back the entries after it
// that probed past it (no tombstones, so probes stay short).
func (t *userTable) unindex(i int) {
	mask := len(t.index) - 1
	for j := (i + 1) & mask; t.index[j] != 0; j = (j + 1) & mask {
		k := t.home(t.at(int(t.index[j] - 1)).h)
		// The entry at j may move to i unless its home lies cyclically
		// in (i, j].
		if (j > i && (k <= i || k > j)) || (j < i && k <= i && k > j) {
			t.index[i] = t.index[j]
			i = j
		}
	}
	t.index[i] = 0
}

func (t *userTable) reindex(size int) {
	t.index = make([]uint32, size)
	t.shift = uint8(64 - bits.TrailingZeros(uint(size)))
	for i := range t.n {
		t.index[t.slot(t.at(i).h)] = uint32(i + 1)
	}
}

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
