package sweep

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/kind"
	"github.com/slotexporter/slot_exporter/internal/redisread"
	"github.com/slotexporter/slot_exporter/internal/snapshot"
	"github.com/slotexporter/slot_exporter/internal/track"
)

// family runs one family's sweeps. Only its own goroutine touches its
// state; the outside world sees published snapshots.
type family struct {
	cfg      *config.Family
	sampling *config.Sampling
	leaks    *config.Leaks
	s        *Sweeper // read-only: topology, reader, watcher, logger
	state    *state
	// mu is held while a sweep changes the state, so that the on-call
	// page can look a member up between sweeps.
	mu sync.Mutex

	snap  atomic.Pointer[snapshot.Family]
	clock atomic.Pointer[clockReading]
}

// clockReading is the exporter clock minus Redis TIME, and when (exporter
// clock, Unix ns) it was measured.
type clockReading struct {
	skew time.Duration
	at   int64
}

func (f *family) log() *slog.Logger { return f.s.logger.With("family", f.cfg.Name) }

func (f *family) loop(ctx context.Context) {
	for {
		if wait := time.Until(f.state.next); wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
		if ctx.Err() != nil {
			return
		}
		start := time.Now()
		_ = f.sweepAndPublish(ctx)
		f.state.next = start.Add(f.retryAfter())
	}
}

// maxBackoff caps the wait between sweeps while Redis keeps failing: 8
// intervals, and never more than 30 s (or one interval, if longer), so
// that a Redis that comes back is seen within half a minute.
func (f *family) maxBackoff() time.Duration {
	return max(min(8*f.sampling.Interval, 30*time.Second), f.sampling.Interval)
}

// retryAfter is sampling.interval, doubled for each failure in a row up to
// maxBackoff: a Redis that is down is not hammered with reconnects, and
// comes back to the normal pace at once.
func (f *family) retryAfter() time.Duration {
	d, limit := f.sampling.Interval, f.maxBackoff()
	for i := 1; i < f.state.failures && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

func (f *family) sweepAndPublish(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.state
	start := time.Now()
	sctx, cancel := context.WithTimeout(ctx, f.sampling.Timeout)
	g, err := f.sweep(sctx)
	cancel()
	end := time.Now()
	dur := end.Sub(start)
	if err != nil {
		if ctx.Err() != nil {
			// Shutting down or reloading: not a Redis failure.
			return err
		}
		st.sweepErrors++
		// Keys the feed named for this sweep may not all have been read:
		// the next sweep reads everything.
		st.synced = nil
		if st.failures == 0 {
			st.firstFailure = start
		}
		st.failures++
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("cut off at sampling.timeout (%s): %w", f.sampling.Timeout, err)
		}
		// One line for the first failure, then one each time the run of
		// failures doubles: a Redis that is down for an hour logs a dozen
		// lines, not one per sweep.
		if n := st.failures; n&(n-1) == 0 {
			f.log().Error("sweep failed", "err", err, "duration", dur, "failures_in_a_row", n, "next_try_in", f.retryAfter())
		}
	} else {
		if st.failures > 0 {
			f.log().Info("sweep recovered", "failures_in_a_row", st.failures, "down_for", end.Sub(st.firstFailure))
		}
		st.failures = 0
		st.lastSuccess = end
		st.lastGauges = g
		st.synced, st.pendingSync = st.pendingSync, nil
		st.known = g.sets
		if st.lastStart.IsZero() {
			st.period = dur
		} else {
			st.period = start.Sub(st.lastStart)
		}
		st.lastStart = start
	}
	if dur > f.sampling.Interval {
		st.overruns++
		f.log().Warn("sweep overran sampling.interval", "duration", dur, "interval", f.sampling.Interval,
			"hint", "the read budget (sampling.redis_cpu_share, max_keys_per_second) is short of reading every changed key each interval; slot_exporter_sampling_period_seconds says what is achieved")
	}
	fs := f.emptySnapshot(st.period)
	fs.OK, fs.LastSuccess, fs.Duration = err == nil, st.lastSuccess, dur
	fs.SweepErrors, fs.Overruns, fs.KeysScanned = st.sweepErrors, st.overruns, st.keysScanned
	for i, name := range redisread.SkipReasonNames() {
		fs.Skipped = append(fs.Skipped, snapshot.Count{Label: name, N: st.skipped[i]})
	}
	if st.period > 0 {
		// Published with every attempt, fresh or not: the stale-sweep
		// alert compares the age of the last sweep with it.
		fs.Gauges = append(fs.Gauges, snapshot.Value{Metric: snapshot.SamplingPeriod, V: st.period.Seconds()})
	}
	if !st.lastSuccess.IsZero() {
		g := st.lastGauges
		fs.Sets, fs.Aggregates, fs.Users, fs.SeriesDropped = g.sets, g.users, g.userSeries, g.seriesDropped
		st.tracker.Publish(fs)
	}
	f.snap.Store(fs)
	return err
}

// staleAfter is how long a good sweep's domain values are served: two
// sampling periods (the interval, or the period achieved when sweeps take
// longer), plus the second the CPU pacer may hold the reads every
// quietEvery to measure Redis's own load, so that the series do not blink
// out at short intervals while it does.
func (f *family) staleAfter(period time.Duration) time.Duration {
	d := 2 * max(f.sampling.Interval, period)
	if f.s.pacer != nil {
		d += time.Second
	}
	return d
}

// emptySnapshot is the family's snapshot before any sweep: its config.
// period is the sampling period achieved so far (0 before the first
// sweep); it is passed in, not read from the state, because scrapes call
// this too while a sweep changes the state.
func (f *family) emptySnapshot(period time.Duration) *snapshot.Family {
	lim := f.state.tracker.Limits()
	return &snapshot.Family{
		Name: f.cfg.Name, Kind: string(f.cfg.Kind),
		Limit: float64(lim.Limit), HasLimit: lim.Limit > 0, FloorWindow: f.cfg.FloorWindow,
		StaleAfter: f.staleAfter(period), OverLimitShown: lim.OverLimitIsAnomaly,
	}
}

// sweepRun accumulates one sweep.
type sweepRun struct {
	kind.Sweep
	reads    redisread.Reads
	plan     *redisread.Plan
	sets     int
	seenKeys map[uint64]struct{} // only with several nodes
	// moved are keys a node redirected: they changed nodes mid-sweep and
	// are read again through the cluster (rereadMoved).
	moved     []string
	rereading bool
	missed    int // moved keys that could not be read even then
	// replayer is the kind's replay, when the kind has one and change
	// tracking is on; changed are the keys to read per node when this
	// sweep reads only what changed (nil: every key).
	replayer kind.Replayer
	changed  map[string][]string
	volatile []string
	quota    int
	cursorMu sync.Mutex
}

func (f *family) sweep(ctx context.Context) (gauges, error) {
	st := f.state
	topo := f.s.topo
	// Taken before the nodes are listed, so that a slot that changes
	// hands in between is caught by settle.
	start := f.slotView(ctx)
	nodes, err := topo.Nodes(ctx)
	if err != nil {
		return gauges{}, fmt.Errorf("listing nodes: %w", err)
	}
	if len(nodes) == 0 {
		return gauges{}, errors.New("no Redis node to sweep")
	}
	before := time.Now()
	t, err := nodes[0].C.Time(ctx).Result()
	if err != nil {
		return gauges{}, fmt.Errorf("TIME: %w", err)
	}
	after := time.Now()
	// The exporter's clock at the moment Redis answered, halfway through
	// the round trip.
	mid := before.Add(after.Sub(before) / 2)
	f.clock.Store(&clockReading{skew: mid.Sub(t), at: after.UnixNano()})
	st.lost.check(ctx, nodes, f.log())

	run := &sweepRun{Sweep: kind.Sweep{Now: t.UnixMilli(), Floor: st.floor, Carry: track.Carry{}}}
	if len(nodes) > 1 || start != nil {
		run.seenKeys = make(map[uint64]struct{})
	}
	run.reads = st.tracker.Begin(&run.Sweep)
	run.plan = &redisread.Plan{Match: f.cfg.Match, ScanCount: int64(f.sampling.ScanCount), Budget: st.budget,
		Reads: run.reads, Shard: f.s.shard}
	// PTTLs counted from the sweep's Redis time, which replaying a key
	// needs, and which makes every kind's expiries exact however long a
	// paced sweep takes to reach a key.
	run.plan.Now, run.plan.Start = run.Now, mid
	if p := f.s.pacer; p != nil {
		p.setNodes(nodes)
		run.plan.Pace = p.limiter
		run.plan.Spent = func(n int) { p.keys.Add(uint64(n)) }
		p.active.Add(1)
		defer p.active.Add(-1)
	}
	st.floor.Begin()
	f.planChanges(ctx, run, nodes)
	if run.changed != nil && run.seenKeys == nil {
		// Keys named by the feed, re-read as volatile and met by the
		// reconciliation can overlap.
		run.seenKeys = make(map[uint64]struct{})
	}

	out := make(chan []redisread.KeyRead, 2*len(nodes))
	errc := make(chan error, len(nodes))
	var wg sync.WaitGroup
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			read := f.readNode
			if run.changed != nil {
				read = func(ctx context.Context, n redisread.Node, p *redisread.Plan, out chan<- []redisread.KeyRead) error {
					return f.readChanged(ctx, run, n, out)
				}
			}
			if err := read(sctx, n, run.plan, out); err != nil {
				errc <- fmt.Errorf("node %s: %w", n.Addr, err)
				cancel()
			}
		}()
	}
	if len(run.volatile) > 0 {
		// Keys read every sweep go through the router, which finds
		// their node now.
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f.s.reader.ReadKeys(sctx, topo.Router(), run.plan, run.volatile, out); err != nil {
				errc <- fmt.Errorf("keys read every sweep: %w", err)
				cancel()
			}
		}()
	}
	go func() { wg.Wait(); close(out) }()
	for batch := range out {
		for i := range batch {
			f.apply(run, &batch[i])
		}
	}
	close(errc)
	var errs []error
	for e := range errc {
		errs = append(errs, e)
	}
	if err := errors.Join(errs...); err != nil {
		if ctx.Err() != nil {
			return gauges{}, ctx.Err()
		}
		return gauges{}, err
	}
	deferEnds := f.settle(ctx, run, start)
	if run.changed != nil {
		if deferEnds {
			// Keys moved between nodes in a way this sweep could not
			// follow: the next one reads everything.
			st.pendingSync = nil
		}
		run.sets += run.replayer.Replay(&run.Sweep)
	}

	// A deferred sweep ends nothing, and a restart it noticed is for the
	// sweep that does.
	lost := st.lost.suspect && !deferEnds
	if !deferEnds {
		st.lost.suspect = false
	}
	ended := st.tracker.End(&run.Sweep, lost, deferEnds)
	if lost && ended.Lost > 0 {
		f.log().Warn("holds lost: the data vanished (restart, failover, flush, or another Redis)", "lost", ended.Lost)
	}

	g := gauges{sets: run.sets}
	g.users = st.floor.Commit(run.Now, f.sampling.Window.Milliseconds(), f.floorWindow(), st.tracker.Limits())
	views, dropped := st.floor.Top(f.leaks.PerUserSeries, run.Now)
	g.userSeries = make([]snapshot.User, len(views))
	for i, v := range views {
		g.userSeries[i] = snapshot.User{UserView: v, Extra: st.tracker.UserExtra(v.User)}
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

// readNode reads one node's keys: by SCAN, or from notifications.
func (f *family) readNode(ctx context.Context, n redisread.Node, p *redisread.Plan, out chan<- []redisread.KeyRead) error {
	if w := f.s.watcher; w != nil {
		return w.ReadNode(ctx, f.s.reader, f.cfg.Name, n, p, f.sampling.FullScanInterval, out)
	}
	return f.s.reader.ScanNode(ctx, n.C, p, out)
}

// apply folds one key's read into the sweep: the parts every kind shares
// (duplicates across nodes, counts, skips, the user), then the kind's.
func (f *family) apply(run *sweepRun, kr *redisread.KeyRead) {
	st := f.state
	kh := xxhash.Sum64String(kr.Key)
	if run.replayer != nil {
		defer f.track(run, kr)
	}
	if kr.Status == redisread.Missed {
		// Not read here: it counts as scanned where it is read.
		if !run.rereading {
			run.moved = append(run.moved, kr.Key)
			return
		}
		run.missed++
		run.Carry[uint32(kh)] = struct{}{}
		if user, ok := f.cfg.UserOf(kr.Key); ok {
			st.floor.Keep(xxhash.Sum64String(user), user)
		}
		return
	}
	if run.seenKeys != nil {
		// A key that changed nodes mid-sweep can be read on both.
		if _, dup := run.seenKeys[kh]; dup {
			return
		}
		if kr.Status != redisread.Gone {
			run.seenKeys[kh] = struct{}{}
		}
	}
	st.keysScanned++
	switch kr.Status {
	case redisread.Gone:
		return
	case redisread.Skipped:
		st.skipped[kr.Skip]++
		return
	}
	user, ok := f.cfg.UserOf(kr.Key)
	if !ok {
		st.skipped[redisread.SkipBadUser]++
		return
	}
	if kr.Oversized {
		st.skipped[redisread.SkipOversized]++
	}
	run.sets++
	st.tracker.Apply(&run.Sweep, kind.Key{Read: kr, Hash: kh, User: user, UserHash: xxhash.Sum64String(user)})
}

// track keeps the family's books on which keys the kind can replay: a
// key it holds is not read again until it changes; one it cannot hold
// (an oversized set, a skipped key) is read every sweep; one gone is
// forgotten.
func (f *family) track(run *sweepRun, kr *redisread.KeyRead) {
	st := f.state
	kh := xxhash.Sum64String(kr.Key)
	switch kr.Status {
	case redisread.Missed:
		return
	case redisread.Gone:
		run.replayer.Forget(kh)
		delete(st.volatile, kr.Key)
		return
	}
	if kr.Status == redisread.OK && run.replayer.Held(kh) {
		delete(st.volatile, kr.Key)
		return
	}
	run.replayer.Forget(kh)
	st.volatile[kr.Key] = struct{}{}
}

// planChanges decides whether this sweep reads every key or only what
// changed, and which keys those are. It reads every key when change
// tracking is off or unavailable, when the kind cannot replay (streams),
// on a cluster, and when a node's feed epoch is not the one of the family's last
// complete read (the first sweep, a lost connection, a flush).
func (f *family) planChanges(ctx context.Context, run *sweepRun, nodes []redisread.Node) {
	st := f.state
	rp, ok := st.tracker.(kind.Replayer)
	feed := f.s.changes
	st.pendingSync = nil
	// Not on a cluster yet: keys that move between nodes mid-sweep are
	// followed by the full read's settling (settle.go), which change
	// tracking does not reproduce.
	if feed == nil || !ok || f.s.topo.IsCluster() {
		return
	}
	if st.lost.suspect {
		// The data may have vanished in a way tracking does not report
		// (SWAPDB, a restart or failover seen before the feed noticed):
		// read everything.
		st.synced = nil
	}
	run.replayer = rp
	run.Hold = true
	epochs := make(map[string]int, len(nodes))
	changed := make(map[string][]string, len(nodes))
	full := len(st.synced) != len(nodes)
	for _, n := range nodes {
		keys, epoch, err := feed.Changes(ctx, n, f.cfg.Name)
		if err != nil {
			// Without tracking on a node, every key is read.
			st.synced = nil
			return
		}
		epochs[n.Addr], changed[n.Addr] = epoch, keys
		if e, ok := st.synced[n.Addr]; !ok || e != epoch {
			full = true
		}
	}
	st.pendingSync = epochs
	if full {
		clear(st.volatile)
		return
	}
	run.changed = changed
	for k := range st.volatile {
		run.volatile = append(run.volatile, k)
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

// readChanged reads one node's changed keys, and the next slice of the
// reconciliation's SCAN, which goes on from where the last sweep left it.
func (f *family) readChanged(ctx context.Context, run *sweepRun, n redisread.Node, out chan<- []redisread.KeyRead) error {
	st := f.state
	keys := run.changed[n.Addr]
	if run.quota > 0 {
		seen := make(map[string]struct{}, len(keys))
		for _, k := range keys {
			seen[k] = struct{}{}
		}
		run.cursorMu.Lock()
		cursor := st.cursor[n.Addr]
		run.cursorMu.Unlock()
		got := 0
		for got < run.quota {
			count := int64(min(f.sampling.ScanCount, max(run.quota-got, 10)))
			page, next, err := n.C.Scan(ctx, cursor, f.cfg.Match, count).Result()
			if err != nil {
				return fmt.Errorf("SCAN: %w", err)
			}
			for _, k := range page {
				if _, dup := seen[k]; !dup {
					seen[k] = struct{}{}
					keys = append(keys, k)
				}
			}
			got += len(page)
			cursor = next
			if next == 0 {
				break
			}
		}
		run.cursorMu.Lock()
		st.cursor[n.Addr] = cursor
		run.cursorMu.Unlock()
	}
	if len(keys) == 0 {
		return nil
	}
	return f.s.reader.ReadKeys(ctx, n.C, run.plan, keys, out)
}
