package sweep

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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

// maxBackoff caps the wait between sweeps while Redis keeps failing.
const maxBackoff = 30 * time.Second

// retryAfter is sampling.interval, doubled for each failure in a row up to
// maxBackoff (or the interval, if longer): a Redis that is down is not
// hammered with reconnects, and comes back to the normal pace at once.
func (f *family) retryAfter() time.Duration {
	d := f.sampling.Interval
	for i := 1; i < f.state.failures && d < maxBackoff; i++ {
		d *= 2
	}
	return min(d, max(maxBackoff, f.sampling.Interval))
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
	}
	if dur > f.sampling.Interval {
		st.overruns++
		f.log().Warn("sweep overran sampling.interval", "duration", dur, "interval", f.sampling.Interval,
			"hint", "raise sampling.interval or sampling.max_keys_per_second")
	}
	fs := f.emptySnapshot()
	fs.OK, fs.LastSuccess, fs.Duration = err == nil, st.lastSuccess, dur
	fs.SweepErrors, fs.Overruns, fs.KeysScanned = st.sweepErrors, st.overruns, st.keysScanned
	for i, name := range redisread.SkipReasonNames() {
		fs.Skipped = append(fs.Skipped, snapshot.Count{Label: name, N: st.skipped[i]})
	}
	if !st.lastSuccess.IsZero() {
		g := st.lastGauges
		fs.Sets, fs.Aggregates, fs.Users, fs.SeriesDropped = g.sets, g.users, g.userSeries, g.seriesDropped
		st.tracker.Publish(fs)
	}
	f.snap.Store(fs)
	return err
}

// emptySnapshot is the family's snapshot before any sweep: its config.
func (f *family) emptySnapshot() *snapshot.Family {
	lim := f.state.tracker.Limits()
	return &snapshot.Family{
		Name: f.cfg.Name, Kind: string(f.cfg.Kind),
		Limit: float64(lim.Limit), HasLimit: lim.Limit > 0, FloorWindow: f.cfg.FloorWindow,
		StaleAfter: 2 * f.sampling.Interval, OverLimitShown: lim.OverLimitIsAnomaly,
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
	run.plan = &redisread.Plan{Match: f.cfg.Match, ScanCount: int64(f.sampling.ScanCount), Budget: st.budget, Reads: run.reads}
	st.floor.Begin()

	out := make(chan []redisread.KeyRead, 2*len(nodes))
	errc := make(chan error, len(nodes))
	var wg sync.WaitGroup
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f.readNode(sctx, n, run.plan, out); err != nil {
				errc <- fmt.Errorf("node %s: %w", n.Addr, err)
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

	// A deferred sweep ends nothing, and a restart it noticed is for the
	// sweep that does.
	lost := st.lost.suspect && !deferEnds
	if !deferEnds {
		st.lost.suspect = false
	}
	ended := st.tracker.End(&run.Sweep, lost, deferEnds)
	if lost && ended.Lost > 0 {
		f.log().Warn("holds lost: Redis restarted or failed over", "lost", ended.Lost)
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
