package sweep

import (
	"fmt"
	"slices"
	"testing"

	"github.com/slotexporter/slot_exporter/internal/changefeed"
)

// TestChangedKeys: the feed's names less the skipped ones (keys read
// every sweep), then the reconciliation's, in order, whichever names
// are skipped: none, the first, the last, runs of them, all.
func TestChangedKeys(t *testing.T) {
	var names []string
	for i := range 10 {
		names = append(names, fmt.Sprintf("slots:%d", i))
	}
	more := []string{"slots:x", "slots:y"}
	for _, skip := range [][]int{nil, {0}, {9}, {0, 1, 2}, {3, 5, 7}, {4, 5, 8, 9}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}} {
		c := &changedKeys{named: changefeed.NamesOf("slots:", names...), skip: skip, more: more}
		var want []string
		for i, n := range names {
			if !slices.Contains(skip, i) {
				want = append(want, n)
			}
		}
		want = append(want, more...)
		got := make([]string, c.Len())
		for i := range got {
			got[i] = c.At(i)
		}
		if !slices.Equal(got, want) {
			t.Errorf("skipping %v: %q, want %q", skip, got, want)
		}
	}
}
