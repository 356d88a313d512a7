package sweep

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slotexporter/slot_exporter/internal/keytable"
	"github.com/slotexporter/slot_exporter/internal/kind"
	"github.com/slotexporter/slot_exporter/internal/redisread"
	"github.com/slotexporter/slot_exporter/internal/snapshot"
	"github.com/slotexporter/slot_exporter/internal/topology"
	"github.com/slotexporter/slot_exporter/internal/track"
)

// One sweep of a family: the nodes, Redis TIME, the reads, the end
// (apply.go folds each key read into it).

// sweepRun accumulates one sweep. A sweep cut off at sampling.timeout
// is kept, and the next attempt goes on with it (resume.go): everything
// here holds across its attempts.
type sweepRun struct {
	kind.Sweep
	reads redisread.Reads
	plan  *redisread.Plan
	// waited is how long this attempt's reads waited for the budget and
	// the pace (ns; Plan.Waited).
	waited   atomic.Int64
	sets     int
	seenKeys *keytable.Set // only with several nodes, or a cluster
	// moved are keys a node redirected: they changed nodes mid-sweep and
	// are read again through the cluster (rereadMoved).
	moved     []string
	rereading bool
	missed    int // moved keys that could not be read even then
	// replayer is the kind's replay, when the kind has one and change
	// tracking is on; changed are the keys to read per node when this
	// sweep reads only what changed (nil: every key).
	replayer kind.Replayer
	changed  map[string]*changedKeys
	// probed: after a FLUSHDB, this sweep reads probes beside what
	// changed, and every key if no hold survived (probe.go); readFirst
	// are the keys it read before it read every key.
	probed    bool
	readFirst *keytable.Set
	// limitAsRead: the feed's limit follows the keys read so far (a
	// first read, before which no count of the keys is known).
	limitAsRead bool
	volatile    []string
	quota       int
	cursorMu    sync.Mutex

	// start is the view of slot ownership the sweep started from (nil:
	// a single server); after is the exporter's clock when Redis TIME
	// (Now) was read, and began when the first attempt started.
	start *topology.SlotView
	after time.Time
	began time.Time
	// progress is how far each node's read has got (by address), and
	// volatilePos the keys read every sweep; reconciled[node] is set
	// once the node's list of changed keys has its slice of the
	// reconciliation. attempts counts the attempts so far, keys the keys
	// applied in all of them.
	progress    map[string]*redisread.Progress
	volatilePos redisread.Progress
	reconciled  map[string]bool
	attempts    int
	keys        int
	// confirmedAt is when this attempt last asked INFO to confirm its
	// probes, flushSeen whether one found a flush (confirmProbes).
	confirmedAt time.Time
	flushSeen   bool
	// resumable is false with discovery: notify, whose full scans keep
	// books of their own per attempt.
	resumable bool
}

func (f *family) sweep(ctx context.Context) (gauges, error) {
	st := f.state
	st.waited = 0
	run, nodes, err := f.resume(ctx)
	if err != nil {
		return gauges{}, err
	}
	if run == nil {
		if run, nodes, err = f.begin(ctx); err != nil {
			return gauges{}, err
		}
	}
	run.attempts++
	st.attempt++
	run.confirmedAt, run.flushSeen = time.Time{}, false
	if p := f.s.pacer; p != nil {
		p.setNodes(nodes)
		run.plan.Pace = p.limiter
		run.plan.Spent = func(n int) { p.keys.Add(uint64(n)) }
		p.active.Add(1)
		defer p.active.Add(-1)
	}
	pages := run.pages()
	applied, err := f.read(ctx, run, nodes)
	if err == nil {
		var more int
		more, err = f.readAllAfterFlush(ctx, run, nodes)
		applied += more
	}
	run.keys += applied
	// Keys applied, or SCAN pages walked through: a family with a few
	// keys, or none yet, in a large keyspace walks for long without
	// applying any, and is no less moving on. Judged by its keys alone,
	// each of its cut-off attempts counted as a failed sweep, and
	// SlotExporterSweepErrors fired for a family that worked.
	moved := applied > 0 || run.pages() > pages
	st.waited = time.Duration(run.waited.Swap(0))
	if err != nil {
		if ctx.Err() != nil {
			if run.resumable && errors.Is(ctx.Err(), context.DeadlineExceeded) {
				// The attempt's time is up, not the INFO's.
				cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), confirmTimeout)
				f.confirmProbes(cctx, run, nodes, true)
				cancel()
				st.partial = run
				return gauges{}, &cutOff{run: run, applied: applied, moved: moved, err: ctx.Err()}
			}
			return gauges{}, ctx.Err()
		}
		if run.resumable && moved {
			// A read that failed (its connection killed, Redis gone
			// for a moment) keeps what it read, as a cut-off does:
			// the next attempt goes on from there, unless the data
			// vanished or the nodes changed (resume). Starting over,
			// one CLIENT KILL threw away up to the whole paced first
			// read of a million slot sets. An attempt that read
			// nothing keeps nothing: a Redis down for an hour is
			// read afresh, at its own time, when it is back.
			f.confirmProbes(ctx, run, nodes, true)
			st.partial = run
			return gauges{}, fmt.Errorf("%w (%d keys read so far; the next attempt goes on from there)", err, run.keys)
		}
		return gauges{}, err
	}
	return f.finish(ctx, run, nodes)
}

// begin starts a sweep: the nodes, Redis TIME, what to read, and the
// kind's and the floor's sweep.
func (f *family) begin(ctx context.Context) (*sweepRun, []topology.Node, error) {
	st := f.state
	topo := f.s.topo
	began := time.Now()
	// Taken before the nodes are listed, so that a slot that changes
	// hands in between is caught by settle.
	start := f.slotView(ctx)
	nodes, err := topo.Nodes(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("listing nodes: %w", err)
	}
	if len(nodes) == 0 {
		return nil, nil, errors.New("no Redis node to sweep")
	}
	before := time.Now()
	t, err := nodes[0].C.Time(ctx).Result()
	if err != nil {
		return nil, nil, fmt.Errorf("TIME: %w", err)
	}
	after := time.Now()
	// The exporter's clock at the moment Redis answered, halfway through
	// the round trip.
	mid := before.Add(after.Sub(before) / 2)
	f.clock.Store(&clockReading{skew: mid.Sub(t), at: after.UnixNano()})
	if _, err := st.lost.check(ctx, nodes, f.log()); err != nil {
		return nil, nil, err
	}
	if h := f.s.afterLostCheck; h != nil {
		h()
	}

	run := &sweepRun{Sweep: kind.Sweep{Now: t.UnixMilli(), Floor: st.floor, Carry: track.Carry{}, Skipped: &st.skipped, Log: f.log()},
		start: start, after: after, began: began, resumable: f.s.watcher == nil,
		progress: make(map[string]*redisread.Progress, len(nodes)), reconciled: map[string]bool{}}
	for _, n := range nodes {
		run.progress[n.Addr] = &redisread.Progress{}
	}
	if len(nodes) > 1 || start != nil {
		run.seenKeys = &keytable.Set{}
	}
	// Before Begin: a kind that holds keys to replay them reads what it
	// needs of each (their expiry) only then.
	f.planChanges(ctx, run, nodes)
	if key, ok := f.cfg.LiteralKey(); ok && run.changed == nil {
		// One key, named: read it where it lives, and SCAN nothing.
		for _, pos := range run.progress {
			pos.Done = true
		}
		run.volatile = []string{key}
	}
	run.reads = st.tracker.Begin(&run.Sweep)
	run.plan = &redisread.Plan{Match: f.cfg.Match, ScanCount: int64(f.sampling.ScanCount), Budget: st.budget,
		Reads: run.reads, Shard: f.s.shard, First: st.lastSuccess.IsZero(), Waited: &run.waited}
	// PTTLs counted from the sweep's Redis time, which replaying a key
	// needs, and which makes every kind's expiries exact however long a
	// paced sweep takes to reach a key.
	run.plan.Now, run.plan.Start = run.Now, mid
	st.floor.Begin()
	// A sweep of what changed on one server reads no key twice: its plan
	// keeps the keys named by the feed, the keys read every sweep and
	// the reconciliation's apart (changed.go). A set of every key it
	// applied took 27-38 bytes a key while it ran (a Go map of 700k and
	// 1M hashes, measured alone: 18.9 and 37.7 MB).
	return run, nodes, nil
}

// read runs one attempt's reads: each node's keys, from where the last
// attempt left them, and the keys read every sweep. It returns how many
// keys it applied.
func (f *family) read(ctx context.Context, run *sweepRun, nodes []topology.Node) (int, error) {
	out := make(chan []redisread.KeyRead, 2*len(nodes))
	// One slot per reader, the volatile keys' included: when one fails it
	// cancels the others, which fail too, and a reader that could not
	// hand its error over would never let the sweep end.
	errc := make(chan error, len(nodes)+1)
	var wg sync.WaitGroup
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, n := range nodes {
		pos := run.progress[n.Addr]
		if pos.Done {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if run.changed != nil {
				err = f.readChanged(sctx, run, n, out)
			} else {
				err = f.readNode(sctx, n, run.plan, pos, out)
			}
			if err != nil {
				errc <- fmt.Errorf("node %s: %w", n.Addr, err)
				cancel()
			}
		}()
	}
	if len(run.volatile) > 0 && !run.volatilePos.Done {
		// Keys read every sweep go through the router: in a cluster
		// it finds their node now; through Sentinel it is the server
		// this sweep listed.
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f.s.reader.ReadKeysFrom(sctx, f.s.topo.RouterFor(nodes), run.plan, run.volatile, &run.volatilePos, out); err != nil {
				errc <- fmt.Errorf("keys read every sweep: %w", err)
				cancel()
			}
		}()
	}
	go func() { wg.Wait(); close(out) }()
	// Every batch a reader hands over is applied, error or not: what its
	// progress says was read is what the sweep has.
	applied := 0
	for batch := range out {
		applied += len(batch)
		for i := range batch {
			f.apply(run, &batch[i])
		}
		f.confirmProbes(ctx, run, nodes, false)
		if h := f.s.afterBatch; h != nil {
			h()
		}
		if run.limitAsRead {
			f.s.changes.SetLimit(f.cfg.Name, feedLimit(run.sets, len(nodes)))
		}
	}
	close(errc)
	var errs []error
	for e := range errc {
		errs = append(errs, e)
	}
	return applied, errors.Join(errs...)
}

// finish ends a sweep whose keys have all been read: settling a cluster,
// replaying what did not change, ending what vanished, committing floors.
// It fails, ending nothing, when a node turned out to be a replica with
// none of its master's data (lostWatch.recheck).
func (f *family) finish(ctx context.Context, run *sweepRun, nodes []topology.Node) (gauges, error) {
	st := f.state
	flushed, err := st.lost.recheck(ctx, nodes)
	if err != nil {
		return gauges{}, err
	}
	unsettled := f.settle(ctx, run, run.start)
	deferEnds := unsettled
	if !unsettled && st.lost.deferFor(flushed) {
		st.floor.KeepUnseen()
		f.log().Info("a FLUSHDB or SWAPDB landed while the sweep read: no holds end in it, the next sweep tells whether they were lost")
		deferEnds = true
	}
	if run.changed != nil {
		if unsettled {
			// Keys moved between nodes in a way this sweep could not
			// follow: the next one reads everything.
			st.pendingSync = nil
		}
		run.sets += run.replayer.Replay(&run.Sweep)
	}

	// A deferred sweep ends nothing, and a restart it noticed is for the
	// sweep that does.
	lost := !deferEnds && st.lost.endsLost(st.tracker, f.log())
	run.ReadBy = run.Now + time.Since(run.after).Milliseconds()
	if !deferEnds {
		run.Unwatched, st.unwatched = st.unwatched, false
	}
	ended := st.tracker.End(&run.Sweep, lost, deferEnds)
	// After End: a sweep that ends holds clears the last mark
	// (SweepJudgedAt), and this sweep's must outlast its own End.
	if s := st.survivals(); s != nil && flushed {
		s.Unproven()
	}
	if lost && ended.Lost > 0 {
		f.log().Warn("holds lost: the data vanished (restart, failover, flush, or another Redis)", "lost", ended.Lost)
	}

	g := gauges{began: run.began, attempts: run.attempts, sets: run.sets}
	g.users = st.floor.Commit(run.Now, f.sampling.Window.Milliseconds(), f.floorWindow(), st.tracker.Limits())
	views, dropped := st.floor.Top(f.leaks.PerUserSeries, run.Now)
	g.userSeries = make([]snapshot.User, len(views))
	for i, v := range views {
		g.userSeries[i] = snapshot.User{UserView: v, Extra: st.tracker.UserExtra(v)}
	}
	g.seriesDropped = dropped
	return g, nil
}

// floorWindow is the family's floor threshold in ms; a family with the
// floor alert off (0) still ages its floors, never counting them nonzero.
func (f *family) floorWindow() int64 {
	if f.cfg.FloorWindow <= 0 {
		return 1<<63 - 1
	}
	return f.cfg.FloorWindow.Milliseconds()
}

// readNode reads one node's keys: by SCAN from where pos says the last
// attempt left it, or from notifications.
func (f *family) readNode(ctx context.Context, n topology.Node, p *redisread.Plan, pos *redisread.Progress, out chan<- []redisread.KeyRead) error {
	if w := f.s.watcher; w != nil {
		return w.ReadNode(ctx, f.s.reader, f.cfg.Name, n, p, f.sampling.FullScanInterval, out)
	}
	return f.s.reader.ScanNodeFrom(ctx, n.C, p, pos, out)
}

// pages is how many SCAN pages the sweep has walked through on its nodes.
func (run *sweepRun) pages() int {
	n := 0
	for _, p := range run.progress {
		n += p.Pages
	}
	return n
}
