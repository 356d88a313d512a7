// Package keytable is a hash table from 64-bit hashes to values, for the
// millions of keys and users the exporter remembers between sweeps.
//
// A Go map of a million entries costs about twice its entries' size once
// it has doubled, and a map of pointers costs an object per entry on top.
// A Table keeps the entries densely, in chunks (growing never copies them
// and leaves no doubled capacity behind), with an open-addressing index of
// entry numbers beside them: 5 to 7 bytes an entry over the entry itself.
// A value type without pointers keeps the garbage collector from scanning
// any of it.
package keytable

import "math/bits"

const chunkSize = 1024

// minIndex is the smallest index; it shrinks no further.
const minIndex = 64

// The index is resized to be loadAfter full once it is more than
// maxLoad full, and shrunk once it is under minLoad. Its length is any
// number (a hash is mapped onto it by multiplication, not by masking),
// so that it does not double at a power of two: at most half full at a
// power of two, a million entries had an index of 2^21 numbers, 8.4
// bytes an entry; 55-75% full, 5.3 to 7.3. The tables of users and of
// held keys are 1M entries each at `make bench`'s million slot sets.
// Linear probing at 75% takes 2.5 probes to find an entry and 8.5 to
// miss (1.5 and 2.5 at half full), nearly all in the cache line of the
// first.
const (
	maxLoad   = 0.75
	loadAfter = 0.55
	minLoad   = 0.125
)

type entry[V any] struct {
	h uint64
	v V
}

// Table maps hashes to values of type V. Entries are numbered 0 to Len()-1;
// deleting one moves the last entry into its number. The zero Table is
// empty and ready to use. It is not safe for concurrent use.
type Table[V any] struct {
	chunks [][]entry[V]
	n      int
	// index holds entry number + 1 (0: free), linear probing, at most
	// maxLoad full.
	index []uint32
	// ignored are the bits of a hash that do not tell entries apart:
	// none, or the high half (LowHalf).
	ignored uint64
}

// LowHalf returns an empty table that tells entries apart by the low 32
// bits of their hash, and keeps each entry's whole hash: Find(h) finds
// the entry whose low half is h's, whatever its high half. A caller
// that can only name a key by its low half (the member table's keys)
// finds its entry, and the entry's hash has the rest, in no more room.
func LowHalf[V any]() Table[V] { return Table[V]{ignored: 0xffffffff << 32} }

// key is what of h tells entries apart.
func (t *Table[V]) key(h uint64) uint64 { return h &^ t.ignored }

// Len is the number of entries.
func (t *Table[V]) Len() int { return t.n }

// At returns entry i's hash and value, 0 <= i < Len().
func (t *Table[V]) At(i int) (uint64, *V) {
	e := &t.chunks[i/chunkSize][i%chunkSize]
	return e.h, &e.v
}

func (t *Table[V]) hashAt(i int) uint64 { return t.chunks[i/chunkSize][i%chunkSize].h }

// Home is where the probe for hash h starts among n positions: the
// high word of h mixed by a multiply, times n, so that n need not be a
// power of two. A Table's index, a Set's parts and the member table's
// parts (track.MemberTracker) all start there.
func Home(h uint64, n int) int {
	hi, _ := bits.Mul64(h*0x9E3779B97F4A7C15, uint64(n))
	return int(hi)
}

// home maps h onto the index.
func (t *Table[V]) home(h uint64) int { return Home(t.key(h), len(t.index)) }

// next is the index position after i, wrapping around.
func (t *Table[V]) next(i int) int {
	if i++; i == len(t.index) {
		return 0
	}
	return i
}

// slot returns the index position holding h, or the free one where it
// belongs.
func (t *Table[V]) slot(h uint64) int {
	k := t.key(h)
	for i := t.home(h); ; i = t.next(i) {
		v := t.index[i]
		if v == 0 || t.key(t.hashAt(int(v-1))) == k {
			return i
		}
	}
}

// Find returns h's entry number, or -1.
func (t *Table[V]) Find(h uint64) int {
	if t.n == 0 {
		return -1
	}
	return int(t.index[t.slot(h)]) - 1
}

// FindMany sets out[i] to hs[i]'s entry number, or -1; out is at least
// as long as hs. A lookup is two reads that miss the cache at a million
// entries (the index, then the entry); looked up one at a time among
// other work they run one after another, and here the processor overlaps
// those of many hashes. BenchmarkFindMany: 0.65x the time of Find in a
// tight loop; replaying a million slot sets, whose lookups sit among
// other work, 0.61x (BenchmarkSlotSetReplay).
func (t *Table[V]) FindMany(hs []uint64, out []int) {
	out = out[:len(hs)]
	if t.n == 0 {
		for i := range out {
			out[i] = -1
		}
		return
	}
	for i, h := range hs {
		out[i] = int(t.index[t.home(h)]) - 1
	}
	for i, h := range hs {
		if e := out[i]; e >= 0 && t.key(t.hashAt(e)) == t.key(h) {
			continue
		}
		out[i] = t.Find(h) // a collision, or not there
	}
}

// Get returns h's value, or nil.
func (t *Table[V]) Get(h uint64) *V {
	i := t.Find(h)
	if i < 0 {
		return nil
	}
	_, v := t.At(i)
	return v
}

// Put returns h's value, adding a zero value first if h has none.
func (t *Table[V]) Put(h uint64) *V {
	i := t.Find(h)
	if i < 0 {
		i = t.Add(h)
	}
	_, v := t.At(i)
	return v
}

// Add appends a zero value for h, which must not be in the table, and
// returns its entry number.
func (t *Table[V]) Add(h uint64) int {
	if float64(t.n+1) > maxLoad*float64(len(t.index)) {
		t.reindex(t.n + 1)
	}
	i := t.n
	if i == len(t.chunks)*chunkSize {
		t.chunks = append(t.chunks, make([]entry[V], chunkSize))
	}
	t.n++
	t.chunks[i/chunkSize][i%chunkSize] = entry[V]{h: h}
	t.index[t.slot(h)] = uint32(i + 1)
	return i
}

// Delete removes h, if it is there.
func (t *Table[V]) Delete(h uint64) {
	if i := t.Find(h); i >= 0 {
		t.DeleteAt(i)
	}
}

// DeleteAt removes entry i and moves the last entry into its number: a
// caller walking the entries in order looks at i again.
func (t *Table[V]) DeleteAt(i int) {
	t.unindex(t.slot(t.hashAt(i)))
	last := t.n - 1
	if i != last {
		t.chunks[i/chunkSize][i%chunkSize] = t.chunks[last/chunkSize][last%chunkSize]
		t.index[t.slot(t.hashAt(i))] = uint32(i + 1)
	}
	t.chunks[last/chunkSize][last%chunkSize] = entry[V]{}
	t.n--
	if len(t.chunks) > 1 && t.n <= (len(t.chunks)-2)*chunkSize {
		t.chunks[len(t.chunks)-1] = nil
		t.chunks = t.chunks[:len(t.chunks)-1]
	}
	if len(t.index) > minIndex && float64(t.n) < minLoad*float64(len(t.index)) {
		t.reindex(t.n)
	}
}

// DeleteFunc removes every entry for which drop returns true.
func (t *Table[V]) DeleteFunc(drop func(h uint64, v *V) bool) {
	for i := 0; i < t.n; i++ {
		if h, v := t.At(i); drop(h, v) {
			t.DeleteAt(i)
			i--
		}
	}
}

// Clear removes every entry and frees the storage.
func (t *Table[V]) Clear() { *t = Table[V]{ignored: t.ignored} }

// unindex frees index position i, shifting back the entries after it
// that probed past it (no tombstones, so probes stay short).
func (t *Table[V]) unindex(i int) {
	for j := t.next(i); t.index[j] != 0; j = t.next(j) {
		k := t.home(t.hashAt(int(t.index[j] - 1)))
		// The entry at j may move to i unless its home lies cyclically
		// in (i, j].
		if (j > i && (k <= i || k > j)) || (j < i && k <= i && k > j) {
			t.index[i] = t.index[j]
			i = j
		}
	}
	t.index[i] = 0
}

// reindex makes an index for n entries, loadAfter full.
func (t *Table[V]) reindex(n int) {
	t.index = make([]uint32, max(minIndex, int(float64(n)/loadAfter)))
	for i := range t.n {
		t.index[t.slot(t.hashAt(i))] = uint32(i + 1)
	}
}
