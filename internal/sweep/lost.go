package sweep

import (
	"context"
	"log/slog"

	"github.com/slotexporter/slot_exporter/internal/redisread"
)

// lostWatch tells vanished data from holds that ended: a hold gone because
// Redis restarted empty, was flushed, or failed over to an empty replica
// is lost, not released or expired. A server's identity (INFO run_id)
// changes on a restart and a failover.
type lostWatch struct {
	runIDs map[string]string // by node address
	// suspect is set when a node's identity changed, and cleared by the
	// next sweep that ends holds: the sweep that notices may fail after
	// recording the new identity, and the vanished holds must still count
	// as lost when a later sweep ends them.
	suspect       bool
	noRunIDWarned bool
}

func newLostWatch() lostWatch { return lostWatch{runIDs: map[string]string{}} }

// check reads every node's identity.
func (l *lostWatch) check(ctx context.Context, nodes []redisread.Node, log *slog.Logger) {
	for _, n := range nodes {
		id, err := redisread.RunID(ctx, n.C)
		if prev, ok := l.runIDs[n.Addr]; ok && id != "" && prev != "" && prev != id {
			l.suspect = true
		}
		if id != "" {
			l.runIDs[n.Addr] = id
			continue
		}
		if !l.noRunIDWarned {
			// Without INFO the sweep still works, but an emptied keyspace
			// cannot be told from mass releases.
			l.noRunIDWarned = true
			log.Warn("no run_id from INFO server; restarts will read as releases", "node", n.Addr, "err", err)
		}
	}
}
