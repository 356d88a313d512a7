package keytable

// Set is a set of 64-bit hashes: the keys a sweep over a cluster has
// applied, looked up so that a key read on two nodes while its slot
// moves is applied once.
//
// A Go map[uint64]struct{} costs 24 to 38 bytes a hash (Go 1.26, 100k
// to 1M hashes): in `make bench`'s change-driven run on a cluster of
// 1M slot sets, the sweep's map of the keys it had read was 7.1 MB of
// the 152.9 MB live heap, and a first read would hold 38 MB. Here a hash
// is its own slot in an open-addressing array. The array is in setParts
// parts, each grown by an eighth once it is 85% full, as the member
// table's are (track.MemberTracker): about 10 bytes a hash, and a part's
// growth holds a sixty-fourth of the set twice for a moment, where one
// array 55-75% full was 10.7 to 14.5 bytes a hash and, growing at a
// million, held 25 MB at once. No deletes: a set lives for one sweep.
type Set struct {
	parts [setParts]setPart
	// zero: the hash 0 is in the set (0 marks a free slot).
	zero bool
}

const (
	setParts    = 64
	setMaxLoad  = 0.85
	setGrowth   = 1.125
	setMinSlots = 16
)

// setPart is one part: linear probing, at most setMaxLoad full.
type setPart struct {
	slots []uint64
	n     int
}

// Len is the number of hashes in the set.
func (s *Set) Len() int {
	n := 0
	for i := range s.parts {
		n += s.parts[i].n
	}
	if s.zero {
		n++
	}
	return n
}

// part is the part that holds h: its low bits, which its place in the
// part (the high bits of h times a constant) leaves.
func (s *Set) part(h uint64) *setPart { return &s.parts[h%setParts] }

// slot returns the position holding h, or the free one where it belongs;
// h is not 0 and the slots are not full.
func (p *setPart) slot(h uint64) int {
	for i := Home(h, len(p.slots)); ; {
		if v := p.slots[i]; v == h || v == 0 {
			return i
		}
		if i++; i == len(p.slots) {
			i = 0
		}
	}
}

// Has reports whether h is in the set; a nil set, like a nil map, is
// empty.
func (s *Set) Has(h uint64) bool {
	if s == nil {
		return false
	}
	if h == 0 {
		return s.zero
	}
	p := s.part(h)
	return p.n > 0 && p.slots[p.slot(h)] == h
}

// Add puts h in the set and reports whether it was not there before.
func (s *Set) Add(h uint64) bool {
	if h == 0 {
		added := !s.zero
		s.zero = true
		return added
	}
	p := s.part(h)
	if float64(p.n+1) > setMaxLoad*float64(len(p.slots)) {
		p.resize(max(int(float64(len(p.slots))*setGrowth), setMinSlots))
	}
	i := p.slot(h)
	if p.slots[i] == h {
		return false
	}
	p.slots[i] = h
	p.n++
	return true
}

// resize rehashes the part into n slots.
func (p *setPart) resize(n int) {
	old := p.slots
	p.slots = make([]uint64, n)
	for _, h := range old {
		if h != 0 {
			p.slots[p.slot(h)] = h
		}
	}
}
