package sweep

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/slotexporter/slot_exporter/internal/kind"
	"github.com/slotexporter/slot_exporter/internal/redisread"
	"github.com/slotexporter/slot_exporter/internal/topology"
)

// A FLUSHDB of another database, with change tracking on.
//
// Redis tells tracking of a FLUSHALL or FLUSHDB with one invalidation
// that names no key and no database. Reading every key after each one, a
// server whose cache database is flushed by every deploy (or a staging
// server flushed by every test run) had the exporter read its million
// slot sets again each time: about 45 s at the default share, with
// figures as old as that read.
//
// A flush empties its database whole: the family's keys are all where
// they were, or all gone. A key that was not written since the sweep
// before holds what it held, if its database was not the one. So after
// a FLUSHDB alone (lostWatch.wholeOrGone) the sweep reads what changed,
// as usual, and a few keys it read before besides (probes). If it
// reads one hold again that an earlier sweep read (kind.Survivals; a
// slot's member, a lock's token: named afresh by every recipe and
// library), the flush emptied another database: nothing was lost, and
// the rest is replayed from what the sweep holds. For the other kinds
// (counters, rate windows, queues), a probe that exists and that the
// feed has not named since shows the same (keysInPlace). If not, the
// same sweep goes on to read every key (readAllAfterFlush), and what
// vanished is judged lost as after any flush (endsLost). Tracking lost
// nothing meanwhile: a broadcast prefix outlives a flush, and the writes
// after it are named.
//
// A FLUSHALL, a SWAPDB, a restart and a cluster's flushes read every key.
// The same probes let a sweep cut off at sampling.timeout go on through
// a FLUSHDB of another database (survivedFlush).

// maxProbes is how many keys a family keeps by name to read after a
// flush. One that still holds what it held is enough, and keys that
// changed are read anyway.
const maxProbes = 32

// survivals is the family's kind as one that can tell a hold read again,
// or nil.
func (st *state) survivals() kind.Survivals {
	s, _ := st.tracker.(kind.Survivals)
	return s
}

// probe is a key kept to read again after a flush. attempt is the
// attempt (state.attempt) that last applied it. confirmed: an INFO after
// that read found no FLUSHDB or SWAPDB since the attempt's check, so what
// it read was there before any flush a later check finds.
type probe struct {
	key       string
	hash      uint64 // xxhash of key, as apply names it
	attempt   uint64
	confirmed bool
}

// probeAt is the index of the probe of key hash kh, or -1. It runs for
// every key applied: a hash compared, not a name.
func (st *state) probeAt(kh uint64) int {
	for i := range st.probes {
		if st.probes[i].hash == kh {
			return i
		}
	}
	return -1
}

// keepProbe keeps key (hash kh) as a probe, while there is room, if the
// kind applied it (applied), and forgets it if not (gone, skipped). A
// probe applied again is stamped with this attempt.
func (st *state) keepProbe(key string, kh uint64, applied bool) {
	i := st.probeAt(kh)
	switch {
	case !applied:
		if i >= 0 {
			st.probes = slices.Delete(st.probes, i, i+1)
		}
	case i >= 0:
		st.probes[i].attempt, st.probes[i].confirmed = st.attempt, false
	case len(st.probes) < maxProbes:
		// A copy, as for readEverySweep: a name from the feed keeps
		// its chunk of names alive.
		st.probes = append(st.probes, probe{key: strings.Clone(key), hash: kh, attempt: st.attempt})
	}
}

// probeKeys are the probes' names.
func (st *state) probeKeys() []string {
	keys := make([]string, len(st.probes))
	for i, p := range st.probes {
		keys[i] = p.key
	}
	return keys
}

// A sweep cut off at sampling.timeout that goes on through a FLUSHDB
// (survivedFlush) reads its probes again. A hold the kind read proves
// that the flush emptied another database only if it was read before the
// flush: a hold read after a flush of the family's own database, written
// again at once, would prove it as well. What the attempt that was cut
// off read came after its check, which found no flush, and may have come
// after the one the next check finds. So an INFO after its reads
// (confirmProbes) tells: if it finds no flush either, they came before.
// Else the probes count only with holds an earlier sweep read; the
// attempts of one sweep share a generation of the kind's tracker, and it
// cannot tell them apart.
//
// An INFO follows the first batch that reads probes, then at most one a
// second, and one at the cut-off. The first comes within milliseconds of
// the attempt's check: a first read cut off again and again still goes on
// through a server whose other databases are flushed every few seconds,
// as it did before probes needed confirming. A sweep reads its probes
// among its first keys, or among what changed: about one INFO a sweep.

// confirmEvery is how often an attempt asks INFO to confirm the probes it
// read since the last time.
const confirmEvery = time.Second

// confirmTimeout bounds the INFO at a cut-off, whose attempt's time is up.
const confirmTimeout = time.Second

// confirmProbes confirms the probes this attempt read (above), unless an
// INFO did less than confirmEvery ago (at the cut-off: now).
func (f *family) confirmProbes(ctx context.Context, run *sweepRun, nodes []topology.Node, now bool) {
	st := f.state
	if len(nodes) != 1 || st.survivals() == nil || run.flushSeen ||
		!slices.ContainsFunc(st.probes, func(p probe) bool { return p.attempt == st.attempt && !p.confirmed }) {
		return
	}
	if !now && !run.confirmedAt.IsZero() && time.Since(run.confirmedAt) < confirmEvery {
		return
	}
	run.confirmedAt = time.Now()
	flushed, ok := st.lost.flushedSinceCheck(ctx, nodes[0])
	switch {
	case !ok: // unknown: they stay unconfirmed, the safe side
	case flushed:
		run.flushSeen = true
	default:
		for i := range st.probes {
			if st.probes[i].attempt == st.attempt {
				st.probes[i].confirmed = true
			}
		}
	}
}

// readBeforeFlush reports whether the probe of key hash kh was read
// before a flush that the check after the attempt in st.attempt found.
func (st *state) readBeforeFlush(kh uint64) bool {
	i := st.probeAt(kh)
	return i >= 0 && (st.probes[i].attempt < st.attempt || st.probes[i].confirmed)
}

// probing reports whether a sweep after a flush can read what changed
// and probes, rather than every key.
func (f *family) probing(nodes []topology.Node) bool {
	st := f.state
	return len(nodes) == 1 && len(st.probes) > 0 && st.lost.wholeOrGone()
}

// addProbes adds the probes to the keys the sweep reads of the node, but
// for those it reads anyway (named by the feed, or read every sweep).
func (st *state) addProbes(keys *changedKeys) {
	for _, p := range st.probes {
		k := p.key
		if _, every := st.volatile[k]; !every && keys.named.Index(k) < 0 {
			keys.more = append(keys.more, k)
		}
	}
}

// readAllAfterFlush: a sweep that read probes after a flush and read no
// hold again goes on to read every key. The keys it read already are
// not applied twice (readFirst: a set of those alone, which the feed's
// limit keeps to a quarter of the keys, where a set of every key would
// be about 10 MB at a million, keytable.Set).
func (f *family) readAllAfterFlush(ctx context.Context, run *sweepRun, nodes []topology.Node) (int, error) {
	if !run.probed || run.changed == nil {
		return 0, nil
	}
	if f.keysInPlace(ctx, run, nodes[0]) {
		return 0, nil
	}
	f.log().Info("a FLUSHDB on the server: no key of this family read since shows that it survived, so every key is read again")
	run.changed = nil
	for _, n := range nodes {
		run.progress[n.Addr] = &redisread.Progress{}
	}
	return f.read(ctx, run, nodes)
}

// keysInPlace reports, for a sweep that read what changed and the probes
// after a FLUSHDB, whether the flush left the family's keys in place.
func (f *family) keysInPlace(ctx context.Context, run *sweepRun, n topology.Node) bool {
	st := f.state
	if s := st.survivals(); s != nil {
		return s.Survived() > 0
	}
	// A kind whose values are not named afresh: a counter written back
	// after a flush may hold the same number. A probe that exists, and
	// that nothing has written since the flush, was there before it. It
	// was not written between the sweep before and this one's barrier
	// (the feed would have named it, and it would not have been read
	// as a probe), and NamedSince covers the rest, to after its read.
	var read []string
	for _, k := range run.changed[n.Addr].more {
		if st.probeAt(xxhash.Sum64String(k)) >= 0 { // read and applied: keepProbe dropped the rest
			read = append(read, k)
		}
	}
	if len(read) == 0 {
		return false
	}
	if named, err := f.s.changes.NamedSince(ctx, n, f.cfg.Name, st.pendingSync[n.Addr], 0, read); err != nil || named {
		return false
	}
	f.log().Info("a FLUSHDB on the server left keys of this family in place, unwritten since: it emptied another database",
		"keys_in_place", len(read))
	return true
}

// survivedFlush reports, for a sweep cut off at sampling.timeout, whether
// a FLUSHDB since (lostWatch.wholeOrGone) left the family's keys where
// they were. The sweep then goes on (resume), where it started over
// after every flush: a server whose other databases are flushed more
// often than a paced first read of its keys lasts (45 s at a million
// slot sets) never got a first picture. The probes are read again:
//   - a slot set's or a lock's: one holds a hold the kind has read, in
//     an earlier sweep, or in this one before the flush (kind.Survivals,
//     confirmProbes);
//   - another kind's, with change tracking on: one exists and the feed
//     has not named it since the sweep began. It was not written since,
//     and the flush came after that: had it emptied the family's
//     database, the key would exist only if written after it. A flush
//     the feed counts after Flushes leaves it unknown: it may have come
//     after the read. Without tracking nothing tells, and the sweep
//     starts over.
func (f *family) survivedFlush(ctx context.Context, run *sweepRun, nodes []topology.Node) bool {
	st := f.state
	if len(st.probes) == 0 || len(nodes) != 1 || !st.lost.wholeOrGone() {
		return false
	}
	n, s := nodes[0], st.survivals()
	epoch, tracked := st.pendingSync[n.Addr]
	flushes := 0
	if s == nil {
		if f.s.changes == nil || !tracked {
			return false
		}
		var ok bool
		var err error
		if flushes, ok, err = f.s.changes.Flushes(ctx, n, f.cfg.Name, epoch); err != nil || !ok {
			return false
		}
	}
	out := make(chan []redisread.KeyRead, 1)
	errc := make(chan error, 1)
	go func() {
		errc <- f.s.reader.ReadKeysFrom(ctx, f.s.topo.RouterFor(nodes), run.plan, st.probeKeys(), nil, out)
		close(out)
	}()
	found := false
	var present []string
	for batch := range out {
		for i := range batch {
			kr := &batch[i]
			switch {
			case kr.Status != redisread.OK:
			case s != nil:
				kh := xxhash.Sum64String(kr.Key)
				found = found || s.Known(kind.Key{Read: kr, Hash: kh}, st.readBeforeFlush(kh))
			default:
				present = append(present, strings.Clone(kr.Key))
			}
		}
	}
	if err := <-errc; err != nil {
		return false
	}
	if s != nil || len(present) == 0 {
		return found
	}
	named, err := f.s.changes.NamedSince(ctx, n, f.cfg.Name, epoch, flushes, present)
	return err == nil && !named
}
