package kind

import "github.com/slotexporter/slot_exporter/internal/redisread"

// slabRef locates a key's members in a memberSlab: chunk << 16 | offset.
type slabRef uint32

// slabChunk is how many members a chunk holds; a key with more is not
// held (it is read every sweep).
const slabChunk = 1 << 16

// memberSlab stores the members of held keys back to back in chunks. One
// slice grown by append kept up to twice the members in capacity, and
// copied them all at each doubling; chunks are only ever appended.
type memberSlab struct {
	chunks  [][]redisread.Member
	used    int // members used of the last chunk
	live    int
	garbage int // members no key refers to any more
}

// add stores ms and returns where; false if there are too many to hold.
func (s *memberSlab) add(ms []redisread.Member) (slabRef, bool) {
	if len(ms) > slabChunk || len(s.chunks) >= 1<<16-1 && s.used+len(ms) > slabChunk {
		return 0, false
	}
	if len(s.chunks) == 0 || s.used+len(ms) > slabChunk {
		s.chunks = append(s.chunks, make([]redisread.Member, slabChunk))
		s.used = 0
	}
	c := len(s.chunks) - 1
	copy(s.chunks[c][s.used:], ms)
	ref := slabRef(c<<16 | s.used)
	s.used += len(ms)
	s.live += len(ms)
	return ref, true
}

// get returns the n members at ref, capped so that an append cannot
// overwrite the next key's.
func (s *memberSlab) get(ref slabRef, n uint32) []redisread.Member {
	if n == 0 {
		return nil
	}
	c, o := s.chunks[ref>>16], uint32(ref&0xffff)
	return c[o : o+n : o+n]
}

func (s *memberSlab) drop(n int) {
	s.live -= n
	s.garbage += n
}

// wasteful: most of the slab is garbage, and enough of it to be worth a
// rewrite.
func (s *memberSlab) wasteful() bool {
	return s.garbage >= slabChunk && s.garbage > s.live
}
