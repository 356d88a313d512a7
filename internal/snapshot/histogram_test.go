package snapshot

import "testing"

// TestHistogramNeverGoesDown: a negative observation (a hold measured
// across a backward step of Redis TIME, were it not clamped upstream)
// counts as 0: the sum of a Prometheus histogram must never decrease, or
// rate() reads a counter reset.
func TestHistogramNeverGoesDown(t *testing.T) {
	h := NewHoldHistogram()
	h.Observe(12)
	sum := h.Sum
	h.Observe(-3588)
	if h.Sum != sum {
		t.Errorf("sum %v -> %v after a negative observation", sum, h.Sum)
	}
	if h.Count != 2 {
		t.Errorf("count %d, want 2", h.Count)
	}
	// It is in every bucket, the lowest included, and buckets stay
	// cumulative.
	if h.Counts[0] != 1 || h.Counts[len(h.Counts)-1] != 2 {
		t.Errorf("counts %v", h.Counts)
	}
	for i := 1; i < len(h.Counts); i++ {
		if h.Counts[i] < h.Counts[i-1] {
			t.Fatalf("counts not cumulative: %v", h.Counts)
		}
	}
}
