package sweep

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/slotexporter/slot_exporter/internal/topology"
)

// A sweep that cannot read every key within sampling.timeout (a million
// keys at a tenth of a Redis core, an eviction burst at a short timeout)
// is not thrown away at the cut-off: the next attempt goes on with it,
// from where each node's read got to, until every key has been read. Only
// then does it end what vanished and publish. Starting over instead, every
// attempt would read the same first part of the keyspace and none would
// ever finish. docs/design.md ("A sweep over several attempts") says
// which picture such a sweep gives.

// cutOff is a sweep cut off at sampling.timeout and kept for the next
// attempt.
type cutOff struct {
	run     *sweepRun
	applied int  // keys this attempt applied
	moved   bool // it applied keys or walked SCAN pages
	err     error
}

func (c *cutOff) Error() string {
	if !c.moved {
		return fmt.Sprintf("cut off in attempt %d having read nothing (%d keys in all)", c.run.attempts, c.run.keys)
	}
	return fmt.Sprintf("cut off after %d keys in attempt %d (%d in all)", c.applied, c.run.attempts, c.run.keys)
}

func (c *cutOff) Unwrap() error { return c.err }

// resume returns the sweep a cut-off left to go on with, and the nodes,
// or nil when there is none or it cannot go on: the nodes are not the
// same ones (a failover, a node added or removed: its cursors mean
// nothing elsewhere), or data vanished in between (a restart, a flush:
// what it read is of another dataset; not a FLUSHDB that left it in
// place, survivedFlush). The next sweep then starts anew,
// and the kind's sweep with it, as a failed sweep's next one does.
func (f *family) resume(ctx context.Context) (*sweepRun, []topology.Node, error) {
	st := f.state
	run := st.partial
	st.partial = nil
	if run == nil {
		return nil, nil, nil
	}
	nodes, err := f.s.topo.Nodes(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("listing nodes: %w", err)
	}
	vanished, err := st.lost.check(ctx, nodes, f.log())
	if err != nil {
		// What the sweep read came from a replica that has since
		// restarted: it starts over once the replica has synced.
		return nil, nil, err
	}
	same := sameNodes(run, nodes)
	if vanished && same && f.survivedFlush(ctx, run, nodes) {
		f.log().Info("a FLUSHDB on the server left keys this sweep read in place: it emptied another database, and the sweep cut off at sampling.timeout goes on",
			"attempts", run.attempts, "keys_read", run.keys)
		vanished = false
	}
	if vanished {
		// What the sweep read first may have been written after the
		// flush: read again by the sweep that starts over, it must not
		// show that the flush emptied another database (endsLost).
		if s := st.survivals(); s != nil {
			s.Unproven()
		}
	}
	if vanished || !same {
		f.log().Info("the sweep cut off at sampling.timeout starts over", "nodes_changed", !same, "data_vanished", vanished,
			"attempts", run.attempts, "keys_read", run.keys)
		return nil, nil, nil
	}
	return run, nodes, nil
}

// sameNodes reports whether nodes are the ones run began with.
func sameNodes(run *sweepRun, nodes []topology.Node) bool {
	if len(nodes) != len(run.progress) {
		return false
	}
	return !slices.ContainsFunc(nodes, func(n topology.Node) bool { return run.progress[n.Addr] == nil })
}

// logCutOff says, on the first attempt cut off and then each time their
// count doubles, that the sweep goes on and how old the published figures
// are.
func (f *family) logCutOff(c *cutOff, dur time.Duration) {
	n := c.run.attempts
	if n&(n-1) != 0 {
		return
	}
	st := f.state
	age := "none published yet"
	if !st.lastStart.IsZero() {
		age = time.Since(st.lastStart).Round(time.Second).String()
	}
	f.log().Warn("sweep cut off at sampling.timeout; the next attempt goes on from where it stopped",
		"timeout", f.sampling.Timeout, "duration", dur, "attempt", n, "keys_read", c.run.keys,
		"keys_this_attempt", c.applied, "figures_age", age,
		"hint", "the read budget (sampling.redis_cpu_share, max_keys_per_second) cannot read every key within sampling.timeout; the figures are as old as the sweep's first attempt")
}
