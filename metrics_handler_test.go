package main

import (
	"testing"
	"time"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
)

// TestRefusalLogCountsTheBurst: of a burst of refused scrapes the first is
// logged at once, and the rest in one line at the end of the window, not
// with the next burst.
func TestRefusalLogCountsTheBurst(t *testing.T) {
	logs := exportertest.NewLogs()
	l := &refusalLog{logger: logs.Logger(), limit: 40, every: 50 * time.Millisecond}
	for range 51 {
		l.refused()
	}
	exportertest.WaitFor(t, time.Minute, "the rest of the burst to be logged", func() bool {
		return len(logs.Lines("scrapes refused")) == 2
	})
	if n := len(logs.Lines("scrapes refused", "refused=1")); n != 1 {
		t.Errorf("the first refusal: %d lines, want 1:\n%s", n, logs.String())
	}
	if n := len(logs.Lines("scrapes refused", "refused=50")); n != 1 {
		t.Errorf("the rest of the burst: %d lines, want 1:\n%s", n, logs.String())
	}
}
