package sweep

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/slotexporter/slot_exporter/internal/changefeed"
	"github.com/slotexporter/slot_exporter/internal/keytable"
	"github.com/slotexporter/slot_exporter/internal/kind"
	"github.com/slotexporter/slot_exporter/internal/redisread"
	"github.com/slotexporter/slot_exporter/internal/topology"
)

// Which keys a sweep reads when it reads only what changed.

// planChanges decides whether this sweep reads every key or only what
// changed, and which keys those are. It reads every key when change
// tracking is off or unavailable, when the kind cannot replay (streams),
// and when a node's feed epoch is not the one of the family's last
// complete read (the first sweep, a lost connection, a node new to the
// sweep: added, or promoted by a failover), and after a flush, unless
// it can tell whether its family's database was the one (probe.go).
//
// On a cluster the feed tracks each node. A key that changes nodes is
// named on both (MIGRATE invalidates it on the source and the target), so
// the node that lost it reads it as redirected and the one that gained it
// reads it. A sweep that overlaps a reshard needs nothing more: its
// settling reads again every unseen key of a slot that moved, and the
// keys a node redirected, through the cluster client (settle.go); one
// whose settling cannot account for every key leaves the next sweep to
// read everything.
func (f *family) planChanges(ctx context.Context, run *sweepRun, nodes []topology.Node) {
	st := f.state
	rp, ok := st.tracker.(kind.Replayer)
	feed := f.s.changes
	st.pendingSync = nil
	if feed == nil || !ok {
		return
	}
	probe := f.probing(nodes)
	if st.lastSuccess.IsZero() {
		// How many keys there are is known once a read completes: until
		// then the limit grows with the keys read. Names that outgrow
		// a quarter of the keys read so far are written faster than a
		// quarter of the read's rate, and would most likely name more
		// than a quarter of the keys by its end.
		run.limitAsRead = true
	}
	feed.SetLimit(f.cfg.Name, feedLimit(st.known, len(nodes)))
	epochs := make(map[string]int, len(nodes))
	changed := make(map[string]*changedKeys, len(nodes))
	full := len(st.synced) != len(nodes)
	flushed := false
	for _, n := range nodes {
		keys, epoch, err := feed.Changes(ctx, n, f.cfg.Name)
		if err != nil {
			// Without tracking on a node, every key is read.
			st.synced = nil
			return
		}
		epochs[n.Addr], changed[n.Addr] = epoch, &changedKeys{named: keys}
		if e, ok := st.synced[n.Addr]; !ok || e != epoch || keys.All() {
			full = true
		}
		flushed = flushed || keys.Flushed()
	}
	if flushed && !st.lost.suspect {
		// The feed names a flush that this sweep's lostWatch.check did
		// not see: it came after that check (and before the feed's
		// barrier), or an earlier check saw it and the sweep after that
		// weighed it. INFO again tells which. Unasked, a FLUSHDB of the
		// family's own database in between ended its holds as released.
		// A replica found unsynced here has restarted since the sweep's
		// own check, and the recheck fails the sweep before it ends
		// anything.
		_, _ = st.lost.check(ctx, nodes, f.log())
		probe = f.probing(nodes)
		if st.lost.blind {
			full = true
		}
	}
	if st.lost.suspect && !probe {
		// The data may have vanished in a way that tracking does not
		// report (SWAPDB, a restart or failover seen before the feed
		// noticed), or that a read of probes cannot weigh (a FLUSHALL,
		// a cluster): read everything.
		full = true
	}
	// The feed has handed these keys over and names them no more: until
	// this sweep has read them all, the family is in sync with nothing.
	// A sweep that fails or is cut off, by a timeout or a reload that
	// keeps the feed, leaves the next one to read everything.
	st.pendingSync, st.synced = epochs, nil
	// Only now that every node tracks: without tracking the next sweep
	// reads everything again, and the kinds need not hold (nor read the
	// more that holding takes, a PTTL the ACL may not grant).
	run.replayer = rp
	run.Hold = true
	if full {
		clear(st.volatile)
		return
	}
	run.changed = changed
	for k := range st.volatile {
		run.volatile = append(run.volatile, k)
	}
	if len(st.volatile) > 0 {
		// A key read every sweep is not read again as changed (nor by
		// the reconciliation, readChanged): on one server the reads of
		// a sweep overlap in nothing, and the sweep needs no set of
		// every key it applies to find the keys it read twice.
		for _, keys := range changed {
			for k := range st.volatile {
				if i := keys.named.Index(k); i >= 0 {
					keys.skip = append(keys.skip, i)
				}
			}
			slices.Sort(keys.skip)
		}
	}
	if probe {
		// After a FLUSHDB alone: what changed, and the probes (probe.go).
		// The reconciliation waits for the next sweep.
		run.probed, run.readFirst = true, &keytable.Set{}
		st.addProbes(changed[nodes[0].Addr])
		return
	}
	if fs := f.sampling.FullScanInterval; fs > 0 {
		// The slow reconciliation: a share of every key per sweep, so
		// that each is read again about every full_scan_interval.
		// The fraction left over is kept, so that a small keyspace still
		// gets one key now and then rather than a whole SCAN page.
		st.reconcileCredit += float64(st.known) * f.sampling.Interval.Seconds() / fs.Seconds() / float64(len(nodes))
		run.quota = int(math.Floor(st.reconcileCredit))
		st.reconcileCredit -= float64(run.quota)
	}
}

// changedShare is the share of a family's keys on a node past which the
// feed stops listing the names written there and the next sweep reads
// every key (changefeed.Feed.SetLimit); minChangedLimit is the fewest
// names listed, so that a small family is not read whole for a few
// writes. When the reads fall behind the writes, a change-driven sweep
// reads nearly every key while the next sweep's names gather beside it:
// in `make bench`'s outside measurement (1M slot sets, 20,000 written a
// second) the two sets held up to 1.4M names. Reading every key costs
// Redis a SCAN beside the reads, about a tenth more a key, and a sweep
// that reads a quarter of the keys or more as changed saves at most
// three quarters. A quarter, not half: at the default pace the reads
// keep up with writes to about 15,000 keys a second (the outside
// measurement read 13,000 to 18,000), and a sweep that keeps up takes
// about an interval's writes as changed, under a tenth of a million
// keys; in a large keyspace a sweep that takes a quarter or more has
// fallen behind, and then every sweep reads every key, so that the
// names gathered only fill a set that gives up. In the outside
// measurement, which reads every key after its first read, the set
// filling to half the keys was 17 MB of the 169 MB largest live heap.
const (
	changedShare    = 0.25
	minChangedLimit = 1024
)

// feedLimit is the feed's limit on the names of a family of keys keys
// spread over nodes nodes.
func feedLimit(keys, nodes int) int {
	return max(int(changedShare*float64(keys)/float64(nodes)), minChangedLimit)
}

// readChanged reads one node's changed keys, and the next slice of the
// reconciliation's SCAN, which goes on from where the last sweep left it.
// An attempt after a cut-off reads the rest of the same list.
func (f *family) readChanged(ctx context.Context, run *sweepRun, n topology.Node, out chan<- []redisread.KeyRead) error {
	st := f.state
	run.cursorMu.Lock()
	keys, listed := run.changed[n.Addr], run.reconciled[n.Addr]
	run.cursorMu.Unlock()
	if run.quota > 0 && !listed {
		run.cursorMu.Lock()
		cursor := st.cursor[n.Addr]
		run.cursorMu.Unlock()
		// The reconciliation's keys are a few thousand, the changed keys
		// up to every key: a set of the former, not of the latter (a
		// million names were 20 MB of it).
		var scanned []string
		unnamed := map[string]struct{}{}
		got := 0
		for got < run.quota {
			// A page no larger than the reads' chunk (Plan.ScanPage):
			// the reconciliation SCANs without waiting for the pace, and
			// its pages of 1000 held Redis 1.0-1.3 ms each, a few times a
			// second, where the probe's p99 saw them.
			count := min(run.plan.ScanPage(), int64(max(run.quota-got, 10)))
			page, next, err := n.C.Scan(ctx, cursor, f.cfg.Match, count).Result()
			if err != nil {
				return fmt.Errorf("SCAN: %w", err)
			}
			for _, k := range page {
				if _, dup := unnamed[k]; !dup {
					unnamed[k] = struct{}{}
					scanned = append(scanned, k)
				}
			}
			got += len(page)
			cursor = next
			if next == 0 {
				break
			}
		}
		for _, k := range run.volatile {
			delete(unnamed, k) // read every sweep
		}
		var more []string
		for _, k := range scanned {
			if _, ok := unnamed[k]; ok && keys.named.Index(k) < 0 { // not named by the feed already
				more = append(more, k)
			}
		}
		run.cursorMu.Lock()
		st.cursor[n.Addr] = cursor
		keys.more, run.reconciled[n.Addr] = append(keys.more, more...), true
		run.cursorMu.Unlock()
	}
	// Planned: the names are only read from here on, in this attempt
	// and any after a cut-off (which find the node listed).
	keys.named.DropIndex()
	if keys.Len() == 0 {
		return nil
	}
	return f.s.reader.ReadListFrom(ctx, n.C, run.plan, keys, run.progress[n.Addr], out)
}

// changedKeys are the keys a sweep reads of a node as changed: the names
// the feed handed over, less the keys read every sweep (which it reads
// apart), and the reconciliation's keys the feed did not name. The
// names stay the feed's: a list of them all as strings was 16 bytes a
// name, and up to every key when the reads fall behind the writes.
type changedKeys struct {
	named changefeed.Names
	skip  []int // numbers of named keys read every sweep, ascending
	more  []string
}

func (c *changedKeys) Len() int { return c.named.Len() - len(c.skip) + len(c.more) }

// At is key i: named key i + k, where k is the number of keys skipped
// up to there (skip[j] - j grows with j, so a search finds it).
func (c *changedKeys) At(i int) string {
	if named := c.named.Len() - len(c.skip); i >= named {
		return c.more[i-named]
	}
	k := sort.Search(len(c.skip), func(j int) bool { return c.skip[j]-j > i })
	return c.named.At(i + k)
}
