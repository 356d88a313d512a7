package keytable

import (
	"math/rand"
	"testing"
)

// TestTableMatchesMap drives a Table and a Go map through the same random
// adds, deletes (by hash, by number, while walking) and lookups, with
// hashes from a small space so that probes collide and wrap around.
func TestTableMatchesMap(t *testing.T) {
	for seed := int64(0); seed < 20; seed++ {
		r := rand.New(rand.NewSource(seed))
		var tab Table[int64]
		ref := map[uint64]int64{}
		space := uint64(1 + r.Intn(5000))
		for step := range 20000 {
			h := uint64(r.Int63n(int64(space))) * 0x100000001 // many share low bits
			switch op := r.Intn(10); {
			case op < 5:
				*tab.Put(h) += int64(step)
				ref[h] += int64(step)
			case op < 8:
				tab.Delete(h)
				delete(ref, h)
			case op == 8 && r.Intn(50) == 0:
				odd := r.Intn(2) == 0
				tab.DeleteFunc(func(h uint64, v *int64) bool { return (*v%2 != 0) == odd })
				for k, v := range ref {
					if (v%2 != 0) == odd {
						delete(ref, k)
					}
				}
			default:
				v, ok := ref[h]
				if got := tab.Get(h); ok != (got != nil) || ok && *got != v {
					t.Fatalf("seed %d step %d: Get(%x) = %v, map has %v %v", seed, step, h, got, v, ok)
				}
			}
			if tab.Len() != len(ref) {
				t.Fatalf("seed %d step %d: %d entries, map %d", seed, step, tab.Len(), len(ref))
			}
		}
		seen := map[uint64]bool{}
		for i := range tab.Len() {
			h, v := tab.At(i)
			if seen[h] || ref[h] != *v {
				t.Fatalf("seed %d: entry %d (%x) = %d, map %d, seen before %v", seed, i, h, *v, ref[h], seen[h])
			}
			seen[h] = true
			if tab.Find(h) != i {
				t.Fatalf("seed %d: Find(%x) = %d, want %d", seed, h, tab.Find(h), i)
			}
		}
	}
}

// TestLowHalfMatchesMap drives a LowHalf table and a map keyed by low
// halves through the same random puts, deletes and lookups, with hashes
// that share low halves and differ in the high: an entry keeps the hash
// it was added with, and is found by any hash with its low half. Clear
// leaves a LowHalf table one.
func TestLowHalfMatchesMap(t *testing.T) {
	type held struct {
		h uint64
		v int64
	}
	for seed := int64(0); seed < 20; seed++ {
		r := rand.New(rand.NewSource(seed))
		tab := LowHalf[int64]()
		ref := map[uint32]held{}
		space := 1 + r.Int63n(3000)
		for step := range 20000 {
			h := uint64(r.Int63n(space)) | uint64(r.Intn(3))<<32
			lo := uint32(h)
			switch op := r.Intn(10); {
			case op < 5:
				*tab.Put(h) += int64(step)
				e, ok := ref[lo]
				if !ok {
					e.h = h
				}
				e.v += int64(step)
				ref[lo] = e
			case op < 8:
				tab.Delete(h)
				delete(ref, lo)
			case op == 8 && r.Intn(200) == 0:
				tab.Clear()
				clear(ref)
			default:
				e, ok := ref[lo]
				i := tab.Find(h)
				if ok != (i >= 0) {
					t.Fatalf("seed %d step %d: Find(%x) = %d, map has %v", seed, step, h, i, ok)
				}
				if ok {
					if gh, v := tab.At(i); gh != e.h || *v != e.v {
						t.Fatalf("seed %d step %d: Find(%x) is %x = %d, map %x = %d", seed, step, h, gh, *v, e.h, e.v)
					}
				}
			}
			if tab.Len() != len(ref) {
				t.Fatalf("seed %d step %d: %d entries, map %d", seed, step, tab.Len(), len(ref))
			}
		}
		hs := make([]uint64, 0, len(ref))
		for i := range tab.Len() {
			h, v := tab.At(i)
			if e := ref[uint32(h)]; e.h != h || e.v != *v {
				t.Fatalf("seed %d: entry %d is %x = %d, map %x = %d", seed, i, h, *v, e.h, e.v)
			}
			hs = append(hs, h^uint64(r.Intn(3)+1)<<32) // another high half
		}
		out := make([]int, len(hs))
		tab.FindMany(hs, out)
		for i := range hs {
			if out[i] != i {
				t.Fatalf("seed %d: FindMany(%x) = %d, want %d", seed, hs[i], out[i], i)
			}
		}
	}
}

// TestTableShrinks checks that the storage goes once the entries do.
func TestTableShrinks(t *testing.T) {
	var tab Table[[4]uint64]
	for h := range uint64(100_000) {
		tab.Put(h + 1)
	}
	// An index of 100000 entries is 55 to 75% full: not the 2^18 slots
	// (38%) of an index whose length is a power of two.
	if len(tab.chunks) < 97 || len(tab.index) < 133_334 || len(tab.index) > 181_819 {
		t.Fatalf("100000 entries in %d chunks and %d index slots", len(tab.chunks), len(tab.index))
	}
	tab.DeleteFunc(func(h uint64, _ *[4]uint64) bool { return h > 10 })
	if tab.Len() != 10 || len(tab.chunks) > 2 || len(tab.index) > 4*minIndex {
		t.Errorf("10 entries left in %d chunks and %d index slots", len(tab.chunks), len(tab.index))
	}
	for h := range uint64(10) {
		if tab.Get(h+1) == nil {
			t.Errorf("lost %d", h+1)
		}
	}
}

// TestFindManyMatchesFind looks up hashes that are there, that are not,
// and that collide, at once and one by one.
func TestFindManyMatchesFind(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	var tab Table[int]
	var hs []uint64
	empty := make([]int, 3)
	tab.FindMany([]uint64{1, 2, 3}, empty)
	for _, e := range empty {
		if e != -1 {
			t.Fatalf("an empty table found %v", empty)
		}
	}
	for i := range 5000 {
		h := uint64(r.Int63n(20000)) * 0x100000001 // many share low bits
		if i%3 != 0 {
			tab.Put(h)
		}
		hs = append(hs, h)
	}
	out := make([]int, len(hs))
	tab.FindMany(hs, out)
	found := 0
	for i, h := range hs {
		if want := tab.Find(h); out[i] != want {
			t.Fatalf("FindMany(%x) = %d, Find = %d", h, out[i], want)
		}
		if out[i] >= 0 {
			found++
		}
	}
	if found == 0 || found == len(hs) {
		t.Fatalf("found %d of %d: the test does not mix hits and misses", found, len(hs))
	}
}

// BenchmarkFindMany looks up a million keys of a million-entry table,
// one by one and 256 at a time.
func BenchmarkFindMany(b *testing.B) {
	const n = 1 << 20
	var tab Table[[32]byte]
	r := rand.New(rand.NewSource(1))
	hs := make([]uint64, n)
	for i := range hs {
		hs[i] = r.Uint64()
		tab.Put(hs[i])
	}
	r.Shuffle(n, func(i, j int) { hs[i], hs[j] = hs[j], hs[i] })
	b.Run("Find", func(b *testing.B) {
		for range b.N {
			for _, h := range hs {
				if tab.Find(h) < 0 {
					b.Fatal("missing")
				}
			}
		}
	})
	b.Run("FindMany", func(b *testing.B) {
		out := make([]int, 256)
		for range b.N {
			for i := 0; i < n; i += 256 {
				tab.FindMany(hs[i:i+256], out)
				if out[0] < 0 {
					b.Fatal("missing")
				}
			}
		}
	})
}

func TestSetMatchesMap(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	var s Set
	want := map[uint64]bool{}
	for i := range 200000 {
		// Few distinct hashes at first (repeats), wide ones later; the
		// hash 0, which marks a free slot, now and then.
		h := uint64(r.Int63n(int64(1000 + i)))
		if i%5 == 0 {
			h = r.Uint64()
		}
		if s.Has(h) != want[h] {
			t.Fatalf("op %d: Has(%d) = %v, want %v", i, h, s.Has(h), want[h])
		}
		if added := s.Add(h); added == want[h] {
			t.Fatalf("op %d: Add(%d) = %v with the hash there: %v", i, h, added, want[h])
		}
		want[h] = true
		if s.Len() != len(want) {
			t.Fatalf("op %d: Len %d, want %d", i, s.Len(), len(want))
		}
	}
	if !want[0] {
		t.Fatal("the hash 0 was never added: the test misses its case")
	}
	for h := range want {
		if !s.Has(h) {
			t.Fatalf("lost %d", h)
		}
	}
	for range 10000 {
		if h := r.Uint64(); !want[h] && s.Has(h) {
			t.Fatalf("Has(%d) of a hash never added", h)
		}
	}
	for i := range s.parts {
		p := &s.parts[i]
		// A part grows by an eighth past setMaxLoad: it is then
		// setMaxLoad/setGrowth full, 75.6%.
		if load := float64(p.n) / float64(len(p.slots)); load > setMaxLoad || load < setMaxLoad/setGrowth*0.99 {
			t.Fatalf("part %d: %d hashes in %d slots: %.2f full, want %.2f to %.2f", i, p.n, len(p.slots), load, setMaxLoad/setGrowth, setMaxLoad)
		}
	}
}
