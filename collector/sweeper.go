package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"

	"github.com/slotexporter/slot_exporter/config"
)

// Sweeper samples every family of a config in the background, each on its
// own loop, and publishes an immutable snapshot after every sweep. Scrapes
// read the latest snapshot; they never reach Redis.
type Sweeper struct {
	cfg    *config.Config
	topo   Topology
	logger *slog.Logger
	fams   []*familyRunner
	// watcher is set with discovery: notify.
	watcher *keyWatcher

	skewNanos atomic.Int64
	haveClock atomic.Bool

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// NewSweeper builds a sweeper. Families of prev with the same name and kind
// hand over their tracked members, users and counters, so a reload neither
// resets counters nor reads every member as a fresh acquire. prev must be
// stopped.
func NewSweeper(cfg *config.Config, client redis.UniversalClient, logger *slog.Logger, prev *Sweeper) *Sweeper {
	s := &Sweeper{cfg: cfg, topo: NewTopology(client, cfg.Redis.ReadFrom == config.ReadFromReplica), logger: logger}
	old := map[string]*familyRunner{}
	if prev != nil {
		for _, f := range prev.fams {
			old[f.fam.Name] = f
		}
		s.skewNanos.Store(prev.skewNanos.Load())
		s.haveClock.Store(prev.haveClock.Load())
	}
	if cfg.Sampling.Discovery == config.DiscoveryNotify {
		w, err := newKeyWatcher(cfg, logger)
		if err != nil {
			logger.Error("discovery: notify unavailable, falling back to scan", "err", err)
		} else {
			s.watcher = w
		}
	}
	for i := range cfg.Families {
		fam := &cfg.Families[i]
		r := newFamilyRunner(fam, cfg, s)
		if p := old[fam.Name]; p != nil && p.fam.Kind == fam.Kind {
			r.members, r.floor, r.totals, r.runIDs, r.restarted = p.members, p.floor, p.totals, p.runIDs, p.restarted
			r.lastSuccess = p.lastSuccess
			r.snap.Store(p.snap.Load())
		}
		s.fams = append(s.fams, r)
	}
	return s
}

// Start runs the sweep loops until Stop.
func (s *Sweeper) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	for _, f := range s.fams {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			f.loop(ctx)
		}()
	}
}

// Stop ends the loops and waits for a sweep in flight to finish.
func (s *Sweeper) Stop() {
	if s.cancel != nil {
		s.cancel()
	}
	s.wg.Wait()
	if s.watcher != nil {
		s.watcher.close()
	}
}

// SweepOnce runs one sweep of every family, one after the other. Tests use
// it to step time by hand.
func (s *Sweeper) SweepOnce(ctx context.Context) error {
	var errs []error
	for _, f := range s.fams {
		errs = append(errs, f.sweepAndPublish(ctx))
	}
	return errors.Join(errs...)
}

// Ready reports whether every family has been swept successfully at least
// once, so that /metrics has real numbers to show.
func (s *Sweeper) Ready() bool {
	for _, f := range s.fams {
		if fs := f.snap.Load(); fs == nil || fs.LastSuccess.IsZero() {
			return false
		}
	}
	return true
}

// Snapshot returns the latest published state.
func (s *Sweeper) Snapshot() *Snapshot {
	snap := &Snapshot{ClockSkew: time.Duration(s.skewNanos.Load()), HaveClock: s.haveClock.Load()}
	for _, f := range s.fams {
		if fs := f.snap.Load(); fs != nil {
			snap.Families = append(snap.Families, fs)
		} else {
			snap.Families = append(snap.Families, &FamilySnapshot{Name: f.fam.Name, Kind: f.fam.Kind})
		}
	}
	return snap
}

// familyRunner owns one family's trackers. Only its own goroutine touches
// them; the outside world sees published snapshots.
type familyRunner struct {
	fam      *config.Family
	sampling config.Sampling
	leaks    config.Leaks
	s        *Sweeper
	rules    SlotRules
	unit     float64 // milliseconds per score unit
	budget   *rate.Limiter

	members *MemberTracker
	floor   *FloorTracker
	totals  FamilyTotals
	runIDs  map[string]string
	// restarted is set when a node's run_id changes and cleared by the
	// next successful sweep: the sweep that notices a restart may fail
	// after recording the new run_id, and the vanished holds must still
	// count as lost when a later sweep ends them.
	restarted   bool
	lastSuccess time.Time
	lastGauges  FamilyGauges
	// noRunIDWarned: the missing-INFO warning is logged once.
	noRunIDWarned bool
	scanMu        sync.Mutex
	scanned       map[string]scanMark // discovery: notify only

	snap atomic.Pointer[FamilySnapshot]
}

func newFamilyRunner(fam *config.Family, cfg *config.Config, s *Sweeper) *familyRunner {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	r := &familyRunner{
		fam: fam, sampling: cfg.Sampling, leaks: cfg.Leaks, s: s,
		rules: SlotRules{
			TTL: ms(fam.TTL), Heartbeat: ms(fam.HeartbeatInterval), StaleAfter: ms(fam.StaleAfter),
			MaxHold: ms(fam.MaxHold), Skew: ms(fam.ClockSkewTolerance),
		},
		unit:    1,
		members: NewMemberTracker(),
		floor:   NewFloorTracker(),
		runIDs:  map[string]string{},
		scanned: map[string]scanMark{},
	}
	if r.rules.Heartbeat <= 0 {
		r.rules.Heartbeat = 1
	}
	if fam.ScoreUnit == "s" {
		r.unit = 1000
	}
	r.totals.HoldCounts = make([]uint64, len(HoldBuckets))
	if n := cfg.Sampling.MaxKeysPerSecond; n > 0 {
		r.budget = rate.NewLimiter(rate.Limit(n), max(n/10, 1))
	}
	return r
}

func (r *familyRunner) loop(ctx context.Context) {
	for {
		start := time.Now()
		_ = r.sweepAndPublish(ctx)
		wait := r.sampling.Interval - time.Since(start)
		if wait < 0 {
			wait = 0
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

func (r *familyRunner) log() *slog.Logger {
	return r.s.logger.With("family", r.fam.Name)
}

func (r *familyRunner) sweepAndPublish(ctx context.Context) error {
	start := time.Now()
	sctx, cancel := context.WithTimeout(ctx, r.sampling.Timeout)
	g, err := r.sweep(sctx)
	cancel()
	end := time.Now()
	dur := end.Sub(start)
	if err != nil {
		if ctx.Err() != nil {
			// Shutting down or reloading: not a Redis failure.
			return err
		}
		r.totals.SweepErrors++
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("sweep cut off at sampling.timeout (%s): %w", r.sampling.Timeout, err)
		}
		r.log().Error("sweep failed", "err", err, "duration", dur)
	} else {
		r.lastSuccess = end
		r.lastGauges = g
	}
	if dur > r.sampling.Interval {
		r.totals.Overruns++
		r.log().Warn("sweep did not finish inside sampling.interval", "duration", dur, "interval", r.sampling.Interval,
			"hint", "raise sampling.interval or sampling.max_keys_per_second")
	}
	fs := &FamilySnapshot{
		Name: r.fam.Name, Kind: r.fam.Kind, OK: err == nil, LastSuccess: r.lastSuccess,
		Duration: dur, StaleAfter: 2 * r.sampling.Interval, Gauges: r.lastGauges, Totals: r.totals.clone(),
	}
	r.snap.Store(fs)
	return err
}

func (t FamilyTotals) clone() FamilyTotals {
	t.HoldCounts = append([]uint64(nil), t.HoldCounts...)
	return t
}

// sweepState accumulates one sweep.
type sweepState struct {
	now      int64 // Redis TIME, ms
	g        FamilyGauges
	carry    Carry
	seenKeys map[uint64]struct{} // only with several nodes
	// moved are keys a node redirected: they changed nodes mid-sweep and
	// are read again through the cluster (rereadMoved).
	moved     []string
	rereading bool
	missed    int // moved keys that could not be read even then
}

func (r *familyRunner) sweep(ctx context.Context) (FamilyGauges, error) {
	// Taken before the nodes are listed, so that a slot that changes
	// hands in between is caught by settle.
	start := r.slotView(ctx)
	nodes, err := r.s.topo.Nodes(ctx)
	if err != nil {
		return FamilyGauges{}, fmt.Errorf("listing nodes: %w", err)
	}
	if len(nodes) == 0 {
		return FamilyGauges{}, errors.New("no Redis node to sweep")
	}
	before := time.Now()
	t, err := nodes[0].c.Time(ctx).Result()
	if err != nil {
		return FamilyGauges{}, fmt.Errorf("TIME: %w", err)
	}
	after := time.Now()
	// The exporter's clock at the moment Redis answered, halfway through
	// the round trip.
	mid := before.Add(after.Sub(before) / 2)
	r.s.skewNanos.Store(int64(mid.Sub(t)))
	r.s.haveClock.Store(true)

	for _, n := range nodes {
		id := runID(ctx, n.c)
		if prev, ok := r.runIDs[n.addr]; ok && id != "" && prev != "" && prev != id {
			r.restarted = true
		}
		if id != "" {
			r.runIDs[n.addr] = id
		} else if !r.noRunIDWarned {
			// Without INFO the sweep still works, but an emptied keyspace
			// cannot be told from mass releases.
			r.noRunIDWarned = true
			r.log().Warn("INFO server gave no run_id (not permitted by ACL?): a Redis restart will be counted as releases and expiries, not as lost", "node", n.addr)
		}
	}

	st := &sweepState{now: t.UnixMilli(), carry: Carry{}}
	if len(nodes) > 1 || start != nil {
		st.seenKeys = make(map[uint64]struct{})
	}
	plan := &readPlan{
		kind: r.fam.Kind, match: r.fam.Match, scanCount: int64(r.sampling.ScanCount),
		maxMembers: int64(r.sampling.MaxMembersPerKey), budget: r.budget,
	}
	zc := r.zcountPlan(st.now)
	r.floor.Begin()

	out := make(chan []keyRead, 2*len(nodes))
	errc := make(chan error, len(nodes))
	var wg sync.WaitGroup
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.readNode(sctx, n, plan, zc, out); err != nil {
				errc <- fmt.Errorf("node %s: %w", n.addr, err)
				cancel()
			}
		}()
	}
	go func() { wg.Wait(); close(out) }()
	for batch := range out {
		for i := range batch {
			r.apply(st, &batch[i])
		}
	}
	close(errc)
	var errs []error
	for e := range errc {
		errs = append(errs, e)
	}
	if err := errors.Join(errs...); err != nil {
		if ctx.Err() != nil {
			return FamilyGauges{}, ctx.Err()
		}
		return FamilyGauges{}, err
	}
	deferEnds := r.settle(ctx, st, plan, zc, start)

	// A deferred sweep ends nothing, and a restart it noticed is for the
	// sweep that does.
	restarted := r.restarted && !deferEnds
	var ended Ended
	if !deferEnds {
		r.restarted = false
		ended = r.members.Sweep(st.now, st.carry, restarted)
	}
	r.totals.Ended[OutcomeReleased] += uint64(ended.Released)
	r.totals.Ended[OutcomeExpired] += uint64(ended.Expired)
	r.totals.Ended[OutcomeLost] += uint64(ended.Lost)
	for _, d := range ended.Durations {
		r.totals.observeHold(d)
	}
	if restarted && r.fam.Kind != config.KindCounter {
		// A Sentinel failover changes the run_id too: the promoted
		// replica is a different server.
		r.log().Warn("Redis run_id changed (restart or failover): holds that vanished since the last sweep are counted as lost, not released",
			"lost", ended.Lost)
	}

	ms := func(d time.Duration) int64 { return d.Milliseconds() }
	st.g.Users = r.floor.Commit(st.now, ms(r.sampling.Window), ms(r.leaks.FloorWindow), int64(r.fam.Limit))
	st.g.UserSeries, st.g.SeriesDropped = r.floor.Top(r.leaks.PerUserSeries, st.now)
	st.g.MembersTracked = r.members.Len()
	st.g.UsersTracked = r.floor.Len()
	return st.g, nil
}

func (r *familyRunner) zcountPlan(now int64) *zcountPlan {
	f := func(ms float64) string { return strconv.FormatFloat(ms/r.unit, 'f', -1, 64) }
	n := float64(now)
	return &zcountPlan{
		now:        f(n),
		staleEdge:  f(n + r.rules.TTL - r.rules.StaleAfter),
		futureEdge: f(n + r.rules.TTL + r.rules.Skew),
	}
}

func (t *FamilyTotals) observeHold(sec float64) {
	for i, b := range HoldBuckets {
		if sec <= b {
			t.HoldCounts[i]++
		}
	}
	t.HoldCount++
	t.HoldSum += sec
}

// apply folds one key's read into the sweep.
func (r *familyRunner) apply(st *sweepState, kr *keyRead) {
	kh := xxhash.Sum64String(kr.key)
	if kr.missed {
		// Not read here: it counts as scanned where it is read.
		if !st.rereading {
			st.moved = append(st.moved, kr.key)
			return
		}
		st.missed++
		st.carry[uint32(kh)] = struct{}{}
		if user, ok := r.fam.UserOf(kr.key); ok {
			r.floor.keep(xxhash.Sum64String(user), user)
		}
		return
	}
	if st.seenKeys != nil {
		// A key that changed nodes mid-sweep can be read on both.
		if _, dup := st.seenKeys[kh]; dup {
			return
		}
		if !kr.gone {
			st.seenKeys[kh] = struct{}{}
		}
	}
	r.totals.KeysScanned++
	if kr.gone {
		return
	}
	if kr.skip {
		r.totals.Skipped[kr.skipReason]++
		return
	}
	user, ok := r.fam.UserOf(kr.key)
	if !ok {
		r.totals.Skipped[SkipBadUser]++
		return
	}
	uh := xxhash.Sum64String(user)
	st.g.Sets++

	if r.fam.Kind == config.KindCounter {
		var flags uint8
		used := kr.value
		if used < 0 {
			st.g.CountersNegative++
			flags |= anomalyNegative
			used = 0
		}
		r.floor.Add(uh, user, used, flags)
		return
	}

	if kr.oversized {
		// Counted by score ranges; its members are neither read nor
		// tracked, so they are carried rather than ended.
		r.totals.Skipped[SkipOversized]++
		st.carry[uint32(kh)] = struct{}{}
		var used int64
		var flags uint8
		for s, n := range kr.counts {
			st.g.Members[s] += int(n)
			if MemberState(s).Holding() {
				used += n
			}
			if n > 0 {
				flags |= stateAnomaly[s]
			}
		}
		if kr.pttl == -1 {
			st.g.WithoutTTL++
		}
		r.floor.Add(uh, user, used, flags)
		return
	}

	var used int64
	var flags uint8
	latest := math.Inf(-1)
	now := st.now
	for _, z := range kr.members {
		score := z.Score * r.unit
		o := r.members.Observe(z.Hash, kh, score, now, &r.rules)
		if o.Duplicate {
			continue
		}
		if o.New {
			r.totals.Acquires++
		}
		r.totals.Heartbeats += uint64(o.Heartbeats)
		st.g.Members[o.State]++
		flags |= stateAnomaly[o.State]
		if o.State.Holding() {
			used++
			if o.State != StateFuture && score > latest {
				latest = score
			}
		}
	}
	switch {
	case kr.pttl == -1:
		st.g.WithoutTTL++
	case kr.pttl >= 0 && used > 0 && float64(now+kr.pttl) < latest:
		st.g.ExpiringEarly++
	}
	r.floor.Add(uh, user, used, flags)
}

var stateAnomaly = [numStates]uint8{
	StateLive:    0,
	StateExpired: anomalyExpired,
	StateFuture:  anomalyFuture,
	StateStale:   anomalyStale,
	StateZombie:  anomalyZombie,
}
