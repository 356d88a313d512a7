package track

import "testing"

func TestHeadTracker(t *testing.T) {
	h := NewHeadTracker()
	var q1, q2 uint64 = 0x1111_0000_0001, 0x2222_0000_0002
	step := func(now int64, carry Carry, obs ...[2]uint64) []int64 {
		t.Helper()
		h.Begin()
		var waits []int64
		for _, o := range obs {
			waits = append(waits, h.Observe(o[0], o[1], now))
		}
		h.Sweep(carry)
		return waits
	}
	eq := func(got []int64, want ...int64) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("waits %v, want %v", got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("waits %v, want %v", got, want)
			}
		}
	}

	eq(step(10_000, nil, [2]uint64{q1, 7}, [2]uint64{q2, 9}), 0, 0)
	eq(step(15_000, nil, [2]uint64{q1, 7}, [2]uint64{q2, 10}), 5000, 0)
	eq(step(20_000, nil, [2]uint64{q1, 7}, [2]uint64{q2, 10}), 10_000, 5000)

	// q2 not read (carried): it keeps its head and age.
	eq(step(25_000, Carry{uint32(q2): {}}, [2]uint64{q1, 7}), 15_000)
	if h.Len() != 2 {
		t.Fatalf("len %d after a carried sweep, want 2", h.Len())
	}
	eq(step(30_000, nil, [2]uint64{q1, 7}, [2]uint64{q2, 10}), 20_000, 15_000)

	// q2 emptied (not seen, not carried): forgotten; refilled with the same
	// value, its wait starts over.
	eq(step(35_000, nil, [2]uint64{q1, 7}), 25_000)
	if h.Len() != 1 {
		t.Fatalf("len %d after q2 vanished, want 1", h.Len())
	}
	eq(step(40_000, nil, [2]uint64{q1, 7}, [2]uint64{q2, 10}), 30_000, 0)

	// Time steps back 60 s: no negative wait, and the wait runs again
	// from the new clock instead of freezing at 0.
	eq(step(-20_000, nil, [2]uint64{q1, 7}, [2]uint64{q2, 10}), 0, 0)
	eq(step(-15_000, nil, [2]uint64{q1, 7}, [2]uint64{q2, 10}), 5000, 5000)

	// A new head restarts the wait.
	eq(step(-10_000, nil, [2]uint64{q1, 8}, [2]uint64{q2, 10}), 0, 10_000)
}
