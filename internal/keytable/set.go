package keytable

import "math/bits"

// Set is a set of 64-bit hashes: the keys a sweep has applied, which a
// cluster's sweep (a key can be read on two nodes while its slot moves)
// and a sweep over several attempts look up to apply each key once.
//
// A Go map[uint64]struct{} costs 24 to 38 bytes a hash (Go 1.26, 100k
// to 1M hashes): in `make bench`'s change-driven run on a cluster of
// 1M slot sets, the sweep's map of the keys it had read was 7.1 MB of
// the 152.8 MB live heap, and a first read would hold 38 MB. Here a hash
// is its own slot in an open-addressing array, 55-75% full (the Table's
// rule): 10.7 to 14.5 bytes a hash. No deletes: a set lives for one
// sweep.
type Set struct {
	// slots hold the hashes, 0 where free; the hash 0 is zero instead.
	slots []uint64
	n     int
	zero  bool
}

// Len is the number of hashes in the set.
func (s *Set) Len() int {
	if s.zero {
		return s.n + 1
	}
	return s.n
}

// home maps h onto the slots, as Table.home does onto its index.
func (s *Set) home(h uint64) int {
	hi, _ := bits.Mul64(h*0x9E3779B97F4A7C15, uint64(len(s.slots)))
	return int(hi)
}

// slot returns the position holding h, or the free one where it belongs;
// h is not 0 and the slots are not full.
func (s *Set) slot(h uint64) int {
	for i := s.home(h); ; {
		if v := s.slots[i]; v == h || v == 0 {
			return i
		}
		if i++; i == len(s.slots) {
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
	return s.n > 0 && s.slots[s.slot(h)] == h
}

// Add puts h in the set and reports whether it was not there before.
func (s *Set) Add(h uint64) bool {
	if h == 0 {
		added := !s.zero
		s.zero = true
		return added
	}
	if float64(s.n+1) > maxLoad*float64(len(s.slots)) {
		s.resize(s.n + 1)
	}
	i := s.slot(h)
	if s.slots[i] == h {
		return false
	}
	s.slots[i] = h
	s.n++
	return true
}

// resize makes room for n hashes, loadAfter full.
func (s *Set) resize(n int) {
	old := s.slots
	s.slots = make([]uint64, max(minIndex, int(float64(n)/loadAfter)))
	for _, h := range old {
		if h != 0 {
			s.slots[s.slot(h)] = h
		}
	}
}
