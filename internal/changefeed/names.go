package changefeed

import (
	"bytes"
	"math/bits"
	"unsafe"
)

// nameSet gathers the key names that invalidations bring, each once, in
// the order first named. At 25% of a million slot sets written between
// two sweeps, a map of strings held about 60 bytes a name, and the sweep
// in flight holds a list as well as the set gathering the next one: 83 MB
// of the exporter's live heap were changed key names (63 MB now). Here
// the names' bytes lie back to back in chunks, and an index of their
// numbers finds them; the list a sweep takes points into the same chunks.
type nameSet struct {
	chunks [][]byte
	// cur is the chunk being filled (-1: none), used its bytes used.
	cur, used int
	refs      []nameRef
	// index holds ref number + 1 (0: free), linear probing from the
	// tag's home, at most half full; its length is a power of two.
	index []uint32
	shift uint8
}

// nameRef locates one name. tag is the high half of its hash: it picks
// the name's place in the index (growing needs no rehash) and spares
// comparing the bytes of most names that share a probe run.
type nameRef struct {
	tag        uint32
	chunk, off uint32
	n          uint32
}

const (
	nameChunk  = 64 << 10
	firstChunk = 1 << 10
	// A name longer than this gets a chunk of its own, so that one huge
	// key name cannot waste most of a chunk.
	longKeyName = nameChunk / 8
	minIndex    = 64
)

func newNameSet() *nameSet { return &nameSet{cur: -1} }

func (s *nameSet) home(tag uint32) int {
	return int((uint64(tag) * 0x9E3779B97F4A7C15) >> s.shift)
}

func (s *nameSet) bytesOf(r *nameRef) []byte {
	return s.chunks[r.chunk][r.off : r.off+r.n]
}

// add adds name, whose hash is h, unless it is there; name is copied.
func (s *nameSet) add(name []byte, h uint64) {
	if 2*(len(s.refs)+1) > len(s.index) {
		s.grow()
	}
	tag := uint32(h >> 32)
	mask := len(s.index) - 1
	i := s.home(tag)
	for ; s.index[i] != 0; i = (i + 1) & mask {
		r := &s.refs[s.index[i]-1]
		if r.tag == tag && int(r.n) == len(name) && bytes.Equal(s.bytesOf(r), name) {
			return
		}
	}
	s.refs = append(s.refs, s.store(name, tag))
	s.index[i] = uint32(len(s.refs))
}

// store copies name into the chunks. Bytes once written are never
// written again: the strings names hands out stay valid.
func (s *nameSet) store(name []byte, tag uint32) nameRef {
	if len(name) > longKeyName {
		s.chunks = append(s.chunks, bytes.Clone(name))
		return nameRef{tag: tag, chunk: uint32(len(s.chunks) - 1), n: uint32(len(name))}
	}
	if s.cur < 0 || s.used+len(name) > len(s.chunks[s.cur]) {
		// The first chunks are small: most sets hold a few names (a
		// family that hardly changes, a sweep every few seconds).
		size := firstChunk
		if s.cur >= 0 {
			size = min(nameChunk, 2*len(s.chunks[s.cur]))
		}
		s.chunks = append(s.chunks, make([]byte, max(size, len(name))))
		s.cur, s.used = len(s.chunks)-1, 0
	}
	off := s.used
	s.used += copy(s.chunks[s.cur][off:], name)
	return nameRef{tag: tag, chunk: uint32(s.cur), off: uint32(off), n: uint32(len(name))}
}

func (s *nameSet) grow() {
	size := max(minIndex, 2*len(s.index))
	s.index = make([]uint32, size)
	s.shift = uint8(64 - bits.Len(uint(size-1)))
	mask := size - 1
	for n, r := range s.refs {
		i := s.home(r.tag)
		for s.index[i] != 0 {
			i = (i + 1) & mask
		}
		s.index[i] = uint32(n + 1)
	}
}

// names returns the names in the order first added. The strings point
// into the set's chunks.
func (s *nameSet) names() []string {
	out := make([]string, len(s.refs))
	for i := range s.refs {
		r := &s.refs[i]
		if r.n > 0 {
			out[i] = unsafe.String(&s.chunks[r.chunk][r.off], r.n)
		}
	}
	return out
}
