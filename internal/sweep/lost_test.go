package sweep

import (
	"log/slog"
	"testing"

	"github.com/slotexporter/slot_exporter/internal/kind"
)

// inPlace is a kind that read n holds an earlier sweep read too.
type inPlace struct {
	kind.Tracker
	n int
}

func (p inPlace) Survived() int { return p.n }

func (p inPlace) Known(kind.Key, bool) bool { return p.n > 0 }

func (inPlace) Unproven() {}

// TestLostWatchWeighsAFlushOfOneDatabase: a FLUSHDB or SWAPDB alone is a
// loss unless holds read again show it emptied another database; a sure
// sign (a restart, a FLUSHALL, a move) before or after it keeps the loss
// whatever survived, and the verdict is given once.
func TestLostWatchWeighsAFlushOfOneDatabase(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	cases := []struct {
		name    string
		signs   func(l *lostWatch)
		tracker kind.Tracker
		lost    bool
	}{
		{"no sign", func(*lostWatch) {}, inPlace{n: 3}, false},
		{"FLUSHDB, holds in place", func(l *lostWatch) { l.vanish(true) }, inPlace{n: 3}, false},
		{"FLUSHDB, none in place", func(l *lostWatch) { l.vanish(true) }, inPlace{n: 0}, true},
		{"FLUSHDB, a kind that cannot tell", func(l *lostWatch) { l.vanish(true) }, struct{ kind.Tracker }{}, true},
		{"two FLUSHDBs, holds in place", func(l *lostWatch) { l.vanish(true); l.vanish(true) }, inPlace{n: 3}, false},
		{"a restart, then a FLUSHDB", func(l *lostWatch) { l.vanish(false); l.vanish(true) }, inPlace{n: 3}, true},
		{"a FLUSHDB, then a restart", func(l *lostWatch) { l.vanish(true); l.vanish(false) }, inPlace{n: 3}, true},
		{"a move, then a FLUSHDB", func(l *lostWatch) { l.markMoved(false); l.vanish(true) }, inPlace{n: 3}, true},
		{"one server FLUSHDB'd in a cluster", func(l *lostWatch) { l.vanish(false) }, inPlace{n: 3}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := newLostWatch()
			c.signs(&l)
			if got := l.endsLost(c.tracker, log); got != c.lost {
				t.Errorf("lost = %v, want %v", got, c.lost)
			}
			if l.endsLost(c.tracker, log) {
				t.Error("the next sweep is judged lost too")
			}
		})
	}
}

// TestWholeOrGoneOnlyAfterFlushDB: a read of probes can weigh FLUSHDBs of
// one server alone; a SWAPDB or a sure sign reads everything, and the
// sweep that ends holds clears it.
func TestWholeOrGoneOnlyAfterFlushDB(t *testing.T) {
	cases := []struct {
		name  string
		signs func(l *lostWatch)
		want  bool
	}{
		{"no sign", func(*lostWatch) {}, false},
		{"FLUSHDB", func(l *lostWatch) { l.vanish(true) }, true},
		{"two FLUSHDBs", func(l *lostWatch) { l.vanish(true); l.vanish(true) }, true},
		{"SWAPDB", func(l *lostWatch) { l.vanish(true); l.swapped = true }, false},
		{"a restart, then a FLUSHDB", func(l *lostWatch) { l.vanish(false); l.vanish(true) }, false},
		{"FLUSHDB in a cluster", func(l *lostWatch) { l.vanish(false) }, false},
		{"a move", func(l *lostWatch) { l.markMoved(true) }, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := newLostWatch()
			c.signs(&l)
			if got := l.wholeOrGone(); got != c.want {
				t.Errorf("wholeOrGone = %v, want %v", got, c.want)
			}
			l.endsLost(inPlace{n: 1}, slog.New(slog.DiscardHandler))
			if l.wholeOrGone() || l.swapped {
				t.Error("still weighed after the sweep that ends holds")
			}
		})
	}
}

// TestDeferForAtMostOnceInARow: a sweep that read across a flush leaves
// its ends to the next, unless the sweep before did too.
func TestDeferForAtMostOnceInARow(t *testing.T) {
	l := newLostWatch()
	flushed := []bool{true, true, true, false, true, false, false}
	want := []bool{true, false, true, false, true, false, false}
	for i, f := range flushed {
		if got := l.deferFor(f); got != want[i] {
			t.Errorf("sweep %d (flushed %v): deferred %v, want %v", i, f, got, want[i])
		}
	}
}
