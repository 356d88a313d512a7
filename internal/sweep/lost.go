package sweep

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/slotexporter/slot_exporter/internal/kind"
	"github.com/slotexporter/slot_exporter/internal/topology"
)

// lostWatch tells vanished data from holds that ended: a hold gone because
// its data vanished is lost, not released or expired. It notices:
//   - a server restart or a failover to another server: INFO run_id
//     changes (a Sentinel failover promotes a server with its own run_id);
//   - FLUSHALL, FLUSHDB and SWAPDB: their call counts in INFO commandstats
//     grow (or, after a CONFIG RESETSTAT, are above 0 again); a FLUSHDB
//     or SWAPDB that left holds in place emptied another database
//     (endsLost);
//   - a reload that points the family at a different Redis (markMoved).
//
// What it cannot tell apart: a failover inside a cluster shard keeps the
// data and is not a loss; keys deleted one by one (DEL, UNLINK) by a
// cleanup job are releases, as far as Redis can say. So are keys that
// maxmemory evicted: INFO counts evictions but does not name the keys,
// and a Redis that also caches evicts its cache's keys all day, while the
// keys of a slot set vanish by the thousand when their last slot is
// released. Counting a sweep's ends as lost whenever Redis evicted would
// count those releases lost; the check warns instead (evictions).
type lostWatch struct {
	nodes map[string]topology.Identity // by node address
	// groups is the address last read of each group of servers that
	// hold the same data (topology.Node.Group).
	groups map[string]string
	// suspect is set when data may have vanished, and cleared by the next
	// sweep that ends holds: the sweep that notices may fail after
	// recording the new identity, and the vanished holds must still count
	// as lost when a later sweep ends them.
	suspect bool
	// unlessSurvived is set when the only sign was a FLUSHDB or SWAPDB
	// on a family read from one server. Redis does not say which
	// database it emptied, and a server with several is often flushed
	// one database at a time (a cache, a test database beside the
	// holds). A flush empties its database whole: a hold read before it
	// and read again after it shows that the family's database was not
	// the one, and what ended in between ended as usual (endsLost).
	unlessSurvived bool
	// swapped: a sign was a SWAPDB, which puts another database's keys
	// in place of the family's, without a word to change tracking.
	swapped bool
	// deferred: the last sweep to finish left its ends to the next, a
	// FLUSHDB having landed while it read (deferEnds).
	deferred bool
	// blind: the last check could not read some node's INFO.
	blind  bool
	warned bool
	// evictionsWarned is when the last warning of evictions was logged.
	evictionsWarned time.Time
	// movedFrom are the identities of the servers read before a reload
	// that changed the address (not the database): if the first sweep
	// after it finds the same servers (a host-name alias, another Sentinel
	// list), nothing was lost.
	movedFrom map[string]topology.Identity // by run_id
}

func newLostWatch() lostWatch {
	return lostWatch{nodes: map[string]topology.Identity{}, groups: map[string]string{}}
}

// markMoved records that the family now reads another Redis: what was
// tracked from the old one and is not seen again is lost. sameDB is false
// when the database changed: another dataset, even on the same server.
func (l *lostWatch) markMoved(sameDB bool) {
	l.suspect, l.unlessSurvived, l.swapped = true, false, false
	l.movedFrom = nil
	if sameDB {
		l.movedFrom = map[string]topology.Identity{}
		for _, id := range l.nodes {
			l.movedFrom[id.RunID] = id
		}
	}
	l.nodes = map[string]topology.Identity{}
	l.groups = map[string]string{}
}

// check reads every node's identity and flush count, and reports whether
// it found data vanished since the last check. It fails when a node is a
// replica that holds none of its master's data yet (unsynced), and
// records nothing of that node.
func (l *lostWatch) check(ctx context.Context, nodes []topology.Node, log *slog.Logger) (vanished bool, err error) {
	moved := l.movedFrom
	l.movedFrom = nil
	sameServers := moved != nil
	l.blind = false
	var evicted int64
	var errs []error
	for _, n := range nodes {
		id, err := topology.Identify(ctx, n.C)
		if err == nil && id.Unsynced {
			errs = append(errs, unsynced(n, id))
			continue
		}
		if err != nil || id.RunID == "" {
			sameServers, l.blind = false, true
			if !l.warned {
				// Without INFO the sweep still works, but an emptied
				// keyspace cannot be told from mass releases.
				l.warned = true
				log.Warn("cannot read INFO; restarts and flushes will read as releases", "node", n.Addr, "err", err)
			}
			continue
		}
		if l.switched(n, id) {
			l.vanish(false)
			vanished = true
		}
		if prev, ok := l.nodes[n.Addr]; ok {
			// CONFIG RESETSTAT zeroes the counts: a flush after it may
			// leave the count where it was, but not at 0.
			reset := id.Commands < prev.Commands
			if prev.RunID == id.RunID && !reset && id.Evictions > prev.Evictions {
				evicted += id.Evictions - prev.Evictions
			}
			switch {
			case goneSince(prev, id):
				l.vanish(false)
				vanished = true
			case dbFlushedSince(prev, id):
				// A cluster's nodes have database 0 alone, and a hold
				// read again on one node says nothing of another's.
				l.vanish(len(nodes) == 1)
				l.swapped = l.swapped || id.Swaps > prev.Swaps || reset && id.Swaps > 0
				vanished = true
			}
		}
		if old, ok := moved[id.RunID]; !ok || id.Flushes() > old.Flushes() || id.Commands < old.Commands {
			sameServers = false
		}
		l.nodes[n.Addr] = id
	}
	if len(errs) > 0 {
		// The servers a reload pointed the family at are weighed again
		// by the check of the sweep that reads them all.
		l.movedFrom = moved
		return vanished, errors.Join(errs...)
	}
	if sameServers {
		l.suspect = false
	}
	l.evictions(evicted, log)
	return vanished, nil
}

// switched reports whether node n, read in place of another server of its
// group (through Sentinel, another replica, or the master), holds other
// data than that server did, and forgets that server. Only the data is
// compared: flush and command counts are each server's own.
func (l *lostWatch) switched(n topology.Node, id topology.Identity) bool {
	if n.Group == "" {
		return false
	}
	before, ok := l.groups[n.Group]
	l.groups[n.Group] = n.Addr
	if !ok || before == n.Addr {
		return false
	}
	prev, ok := l.nodes[before]
	delete(l.nodes, before)
	return ok && !topology.SameData(prev, id)
}

// unsynced is the error of a sweep that met node n as an unsynced replica
// (topology.Identity.Unsynced). Read, it has none of the family's keys:
// every hold would end, as lost since its master_replid is new. The
// sweep fails instead, and the figures of the last one stay until it has
// synced. Its port and run_id name it where its address does not (a
// go-redis failover client's address is "FailoverClient").
func unsynced(n topology.Node, id topology.Identity) error {
	return fmt.Errorf("node %s (port %s, run_id %s): %w; not read, the figures of the last sweep stay",
		n.Addr, id.Port, id.RunID, topology.ErrUnsynced)
}

// evictionsWarnEvery spaces the warnings of a Redis that keeps evicting.
const evictionsWarnEvery = 10 * time.Minute

// evictions warns that Redis evicted keys since the last check: the
// family's own may be among them, and their holds then end as released
// (see lostWatch). A hold that vanished with its data is the incident
// this exporter exists to show, and nothing else would say it.
func (l *lostWatch) evictions(n int64, log *slog.Logger) {
	if n == 0 || time.Since(l.evictionsWarned) < evictionsWarnEvery {
		return
	}
	l.evictionsWarned = time.Now()
	log.Warn("Redis evicted keys since the last sweep (maxmemory): any of this family's keys among them ended their holds as released, since Redis does not say which keys it evicted; keep these structures where maxmemory-policy is noeviction",
		"evicted_keys", n)
}

// recheck reads the servers' identities again once a sweep has read its
// keys, before it ends holds. A restart or a FLUSHALL after the sweep's
// check emptied what it read after it: unasked, the sweep ended what it
// found gone as released, and the next sweep's check came too late for
// those holds. A sure loss counts here; nothing is recorded, and the next
// check weighs the sign again, for the holds this sweep read before it
// (they are gone too). A FLUSHDB or SWAPDB on a family read from one
// server is reported (flushed) and left to that check, which alone can
// tell which database it emptied: holds this sweep read before it would
// show it emptied another when it emptied this one (deferFor). On a
// cluster's nodes, which have database 0 alone, it is a sure loss. An
// unreadable INFO changes nothing; the next check says so. A replica
// that restarted without its data since the check, which the sweep read
// empty, fails the sweep (unsynced): it ends nothing.
func (l *lostWatch) recheck(ctx context.Context, nodes []topology.Node) (flushed bool, err error) {
	gone := false
	for _, n := range nodes {
		prev, id, ok := l.sinceCheck(ctx, n)
		switch {
		case !ok:
		case id.Unsynced:
			return false, unsynced(n, id)
		case goneSince(prev, id), len(nodes) > 1 && dbFlushedSince(prev, id):
			gone = true
		case dbFlushedSince(prev, id):
			flushed = true
		}
	}
	if gone {
		l.vanish(false)
		return false, nil
	}
	return flushed, nil
}

// flushedSinceCheck reports whether node n was flushed, swapped or
// restarted since the last check, without recording anything (the next
// check weighs it); ok is false when that cannot be told (no check of n
// yet, INFO unreadable). Not after a check that could not read INFO: an
// ACL without it would log each refusal.
func (l *lostWatch) flushedSinceCheck(ctx context.Context, n topology.Node) (flushed, ok bool) {
	if l.blind {
		return false, false
	}
	prev, id, ok := l.sinceCheck(ctx, n)
	return ok && (goneSince(prev, id) || dbFlushedSince(prev, id)), ok
}

// sinceCheck reads node n's identity now, beside the one the last check
// recorded; ok is false when there is none, or INFO cannot be read.
func (l *lostWatch) sinceCheck(ctx context.Context, n topology.Node) (prev, id topology.Identity, ok bool) {
	prev, ok = l.nodes[n.Addr]
	if !ok {
		return prev, id, false
	}
	id, err := topology.Identify(ctx, n.C)
	if err != nil || id.RunID == "" {
		return prev, id, false
	}
	return prev, id, true
}

// deferFor decides whether a sweep that read its keys across a FLUSHDB or
// SWAPDB (flushed) leaves its ends to the next sweep. What it found gone
// may have been emptied by a flush of its own database, or ended before
// a flush of another: the next sweep's check weighs the flush with holds
// read before it alone (kind.Survivals.Unproven) and ends both as that
// says. Before, such a sweep ended them as released. At most once in a
// row: on a server flushed as often as a sweep lasts (a staging server,
// a first read of a million keys), every sweep would defer, and no hold
// would ever end.
func (l *lostWatch) deferFor(flushed bool) bool {
	l.deferred = flushed && !l.deferred
	return l.deferred
}

// goneSince reports whether a server last seen as prev has since lost
// everything: other data (a restart, another server: topology.SameData)
// or a FLUSHALL.
// CONFIG RESETSTAT zeroes the counts: a flush after it may leave the count
// where it was, but not at 0.
func goneSince(prev, id topology.Identity) bool {
	reset := id.Commands < prev.Commands
	return !topology.SameData(prev, id) || id.FlushAlls > prev.FlushAlls || reset && id.FlushAlls > 0
}

// dbFlushedSince reports whether a server last seen as prev has since run
// a FLUSHDB or SWAPDB, which emptied or replaced one database.
func dbFlushedSince(prev, id topology.Identity) bool {
	reset := id.Commands < prev.Commands
	return id.DBFlushes > prev.DBFlushes || id.Swaps > prev.Swaps || reset && id.DBFlushes+id.Swaps > 0
}

// vanish records a sign that data vanished; oneDB: a FLUSHDB or SWAPDB on
// a family read from one server, which may have emptied another database.
// A sure sign is not weakened by a later unsure one.
func (l *lostWatch) vanish(oneDB bool) {
	l.unlessSurvived = oneDB && (!l.suspect || l.unlessSurvived)
	l.suspect = true
}

// wholeOrGone: the only signs since holds last ended are FLUSHDBs on a
// family read from one server. A flush empties its database whole, so
// the family's keys are all where they were or all gone, and a sweep of
// what changed that reads one of its holds again knows which (probe.go).
// A SWAPDB puts another database's keys in place, which may share some.
func (l *lostWatch) wholeOrGone() bool { return l.suspect && l.unlessSurvived && !l.swapped }

// endsLost decides, for a sweep that ends holds, whether what it ends is
// lost, and clears the suspicion. After a FLUSHDB or SWAPDB alone, holds
// of the kind that this sweep read and an earlier one read too
// (kind.Survivals) show the flush emptied another database. An
// application that writes a hold back under the same identity within a
// sweep of a flush of its own database would read as one; the recipes and
// libraries this watches name each hold afresh (a request id, a random
// token). A kind that cannot tell keeps what ends as lost.
func (l *lostWatch) endsLost(tracker kind.Tracker, log *slog.Logger) bool {
	if !l.suspect {
		return false
	}
	l.suspect, l.swapped = false, false
	if s, ok := tracker.(kind.Survivals); ok && l.unlessSurvived {
		if n := s.Survived(); n > 0 {
			log.Info("a FLUSHDB or SWAPDB on the server left holds of this family in place: it emptied another database, and what ended counts as released or expired",
				"holds_in_place", n)
			return false
		}
	}
	return true
}
