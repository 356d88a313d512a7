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
