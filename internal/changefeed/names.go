package changefeed

import (
	"bytes"
	"math/bits"
	"unsafe"

	"github.com/cespare/xxhash/v2"
)

// nameSet gathers the key names that invalidations bring to one family,
// each once, in the order first named.
//
// When the reads fall behind the writes, a sweep takes nearly every key
// as changed, while the next sweep's names gather beside it: in `make
// bench`'s outside measurement (1M slot sets, 20k written a second) the
// two held 1.4M names, 73 MB of a 274 MB live heap, about 52 bytes a
// 29-byte name (a map of strings held about 60 before that). Here a name
// costs its bytes less the family's literal prefix, which every name of
// a family shares, 8 bytes of reference and 4 to 8 of index; a sweep
// takes the set itself (Names) and makes strings of a page at a time,
// rather than a list of strings (16 bytes a name) for all of them.
type nameSet struct {
	// prefix is left out of the stored bytes of every name that has it:
	// the family's literal prefix, whose invalidations tracking asks for.
	prefix string
	chunks [][]byte
	// cur is the chunk being filled (-1: none), used its bytes used.
	cur, used int
	refs      []nameRef
	// index holds ref number + 1 (0: free), linear probing from the
	// home of the high half of the name's hash, at most half full; its
	// length is a power of two.
	index []uint32
	shift uint8
	// limit is how many names the set lists before it gives up and
	// names everything (over): 0, no limit. See Feed.SetLimit.
	limit int
	over  bool
	// flushes: the FLUSHALLs and FLUSHDBs that came while the set
	// gathered.
	flushes int
}

// nameRef locates one stored name: chunk << 32 | offset << 16 | flags
// and length.
type nameRef uint64

const (
	// refWhole: the name was stored whole, prefix and all (a name
	// without the set's prefix, after a reload changed the family's
	// pattern).
	refWhole = 1 << 15
	// refLong: the name is its chunk, whole.
	refLong = 1 << 14
	refLen  = refLong - 1
)

const (
	nameChunk  = 64 << 10 // offsets fit in 16 bits
	firstChunk = 1 << 10
	// A name longer than this gets a chunk of its own, so that one huge
	// key name cannot waste most of a chunk.
	longKeyName = nameChunk / 8 // below refLen
	minIndex    = 64
)

func newNameSet(prefix string, limit int) *nameSet {
	return &nameSet{prefix: prefix, cur: -1, limit: limit}
}

// next is an empty set for the same family, with the same limit.
func (s *nameSet) next() *nameSet { return newNameSet(s.prefix, s.limit) }

// setLimit sets the limit, and gives up at once if the set lists more.
func (s *nameSet) setLimit(n int) {
	s.limit = n
	if n > 0 && len(s.refs) > n {
		s.overflow()
	}
}

// overflow gives up listing: the set names everything from now on, and
// frees what it listed.
func (s *nameSet) overflow() {
	*s = nameSet{prefix: s.prefix, cur: -1, limit: s.limit, over: true, flushes: s.flushes}
}

func (s *nameSet) home(h uint64) int {
	return int((uint64(uint32(h>>32)) * 0x9E3779B97F4A7C15) >> s.shift)
}

// stored is what of name the set keeps, and its flags.
func (s *nameSet) stored(name []byte) ([]byte, nameRef) {
	if s.prefix != "" && bytes.HasPrefix(name, unsafe.Slice(unsafe.StringData(s.prefix), len(s.prefix))) {
		return name[len(s.prefix):], 0
	}
	return name, refWhole
}

func (s *nameSet) bytesOf(r nameRef) []byte {
	c := s.chunks[r>>32]
	if r&refLong != 0 {
		return c
	}
	off := int(r>>16) & 0xffff
	return c[off : off+int(r&refLen)]
}

// find returns the index position of the name stored as part with
// flags whole (stored), whose hash is h, and whether it is there; if
// not, the position is the free one where it belongs.
func (s *nameSet) find(part []byte, whole nameRef, h uint64) (int, bool) {
	mask := len(s.index) - 1
	i := s.home(h)
	for ; s.index[i] != 0; i = (i + 1) & mask {
		r := s.refs[s.index[i]-1]
		if r&refWhole == whole && bytes.Equal(s.bytesOf(r), part) {
			return i, true
		}
	}
	return i, false
}

// add adds name, whose hash is h (of the whole name), unless it is
// there; name is copied.
func (s *nameSet) add(name []byte, h uint64) {
	if s.over {
		return
	}
	if 2*(len(s.refs)+1) > len(s.index) {
		s.grow()
	}
	part, whole := s.stored(name)
	i, ok := s.find(part, whole, h)
	if ok {
		return
	}
	if s.limit > 0 && len(s.refs) >= s.limit {
		s.overflow()
		return
	}
	s.refs = append(s.refs, s.store(part, whole))
	s.index[i] = uint32(len(s.refs))
}

// position is key's number in the set, or -1.
func (s *nameSet) position(key string) int {
	if len(s.refs) == 0 {
		return -1
	}
	part, whole := s.stored(unsafe.Slice(unsafe.StringData(key), len(key)))
	i, ok := s.find(part, whole, xxhash.Sum64String(key))
	if !ok {
		return -1
	}
	return int(s.index[i]) - 1
}

// store copies part into the chunks. Bytes once written are never
// written again: the strings At hands out stay valid.
func (s *nameSet) store(part []byte, flags nameRef) nameRef {
	if len(part) > longKeyName {
		s.chunks = append(s.chunks, bytes.Clone(part))
		return nameRef(len(s.chunks)-1)<<32 | flags | refLong
	}
	if s.cur < 0 || s.used+len(part) > len(s.chunks[s.cur]) {
		// The first chunks are small: most sets hold a few names (a
		// family that hardly changes, a sweep every few seconds).
		size := firstChunk
		if s.cur >= 0 {
			size = min(nameChunk, 2*len(s.chunks[s.cur]))
		}
		s.chunks = append(s.chunks, make([]byte, max(size, len(part))))
		s.cur, s.used = len(s.chunks)-1, 0
	}
	off := s.used
	s.used += copy(s.chunks[s.cur][off:], part)
	return nameRef(s.cur)<<32 | nameRef(off)<<16 | flags | nameRef(len(part))
}

// hashOf is the hash of the whole name that r stores.
func (s *nameSet) hashOf(d *xxhash.Digest, r nameRef) uint64 {
	d.Reset()
	if r&refWhole == 0 {
		_, _ = d.WriteString(s.prefix)
	}
	_, _ = d.Write(s.bytesOf(r))
	return d.Sum64()
}

// grow doubles the index. The hashes are not kept (8 bytes a name):
// they are taken again, a few times in the life of a set, each time
// from about as many names as have been added since the last.
func (s *nameSet) grow() {
	size := max(minIndex, 2*len(s.index))
	s.index = make([]uint32, size)
	s.shift = uint8(64 - bits.Len(uint(size-1)))
	mask := size - 1
	var d xxhash.Digest
	for n, r := range s.refs {
		i := s.home(s.hashOf(&d, r))
		for s.index[i] != 0 {
			i = (i + 1) & mask
		}
		s.index[i] = uint32(n + 1)
	}
}

// Names are the key names of a family written on a node since the sweep
// before, as the feed hands them to a sweep: in the order first named,
// each once. The set no longer changes once handed over.
type Names struct{ s *nameSet }

// All reports that too many names were written to list (Feed.SetLimit):
// every key may have changed. The set then lists none.
func (n Names) All() bool { return n.s != nil && n.s.over }

// Flushed reports that a FLUSHALL or FLUSHDB of some database came while
// the names gathered. Redis does not say which database: maybe not the
// family's. The names written after it are listed all the same (Feed).
func (n Names) Flushed() bool { return n.s != nil && n.s.flushes > 0 }

// Len is the number of names.
func (n Names) Len() int {
	if n.s == nil {
		return 0
	}
	return len(n.s.refs)
}

// At is name i, 0 <= i < Len(). A name stored whole points into the
// set's chunks, and keeps them all alive while it is kept; one stored
// without its prefix is a string of its own.
func (n Names) At(i int) string {
	r := n.s.refs[i]
	b := n.s.bytesOf(r)
	if r&refWhole != 0 || n.s.prefix == "" {
		return unsafe.String(unsafe.SliceData(b), len(b))
	}
	return n.s.prefix + string(b)
}

// Index is key's number among the names (At(Index(key)) == key), or -1.
// It panics after DropIndex.
func (n Names) Index(key string) int {
	if n.s == nil {
		return -1
	}
	if n.s.index == nil && len(n.s.refs) > 0 {
		panic("changefeed: Names.Index after DropIndex")
	}
	return n.s.position(key)
}

// DropIndex frees what Index needs, once the sweep has planned what to
// read: 4 to 8 bytes a name (8 MB at a million) that the rest of the
// sweep would hold for nothing.
func (n Names) DropIndex() {
	if n.s != nil {
		n.s.index = nil
	}
}

// NamesOf is names as the feed would hand them over for a family whose
// literal prefix is prefix: for tests of what takes Names.
func NamesOf(prefix string, names ...string) Names {
	s := newNameSet(prefix, 0)
	for _, n := range names {
		s.add([]byte(n), xxhash.Sum64String(n))
	}
	return Names{s}
}
