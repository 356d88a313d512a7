// Package sweep runs the background sweeps: one loop per family, each
// reading the family's keys (internal/redisread), folding them into the
// family's kind tracker (internal/kind) and floor (internal/track), and
// publishing an immutable snapshot (internal/snapshot). Scrapes read the
// latest snapshot; they never reach Redis.
package sweep

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/changefeed"
	"github.com/slotexporter/slot_exporter/internal/discovery"
	"github.com/slotexporter/slot_exporter/internal/kind"
	"github.com/slotexporter/slot_exporter/internal/redisread"
	"github.com/slotexporter/slot_exporter/internal/snapshot"
	"github.com/slotexporter/slot_exporter/internal/topology"
)

// Sweeper samples every family of a config in the background.
type Sweeper struct {
	cfg     *config.Config
	topo    *topology.Topology
	reader  *redisread.Reader
	watcher *discovery.Watcher // discovery: notify only
	// changes names the keys written since their last read
	// (sampling.track_changes with discovery: scan); nil: read all.
	changes *changefeed.Feed
	// pacer paces every family's reads toward sampling.redis_cpu_share
	// of Redis's CPU; nil when the share is 0.
	pacer  *cpuPacer
	shard  topology.Shard
	logger *slog.Logger
	fams   []*family
	// viewWarned: the unreadable CLUSTER NODES warning is logged once.
	viewWarned atomic.Bool
	// afterLostCheck, for tests, runs in a sweep between lostWatch.check
	// and the change feed's barrier: what Redis does in that moment.
	afterLostCheck func()
	// afterBatch, for tests, runs in a sweep after each batch of keys it
	// applies, while the readers go on: what Redis does as a sweep reads.
	afterBatch func()

	cancel context.CancelFunc
	wg     sync.WaitGroup
	// loopsOnce ends the loops once; releaseOnce closes what s owns once,
	// by Stop or by a successor that first takes the pacer and the feed
	// over (keepPacer, keepFeed: release leaves them open).
	loopsOnce, releaseOnce sync.Once
	keepPacer, keepFeed    bool
}

// New builds a sweeper. Families of prev with the same name and kind hand
// over their state (trackers, counters, key budget, schedule), so a reload
// neither resets counters nor reads every member as a fresh acquire, and
// does not get around the key budget or sampling.interval. With
// discovery: notify, Redis must publish keyspace events: New refuses
// otherwise, with the CONFIG SET that fixes it, but only when Redis says
// so; an unreachable Redis is checked once it answers. Once the config is known
// to be runnable, New stops prev (which keeps running when New fails).
//
// What the new sweeper takes over from prev (the families' state, the
// CPU pacer, the change feed) is taken only once prev's loops have ended:
// an old family still sweeping would read it while it changes hands.
func New(ctx context.Context, cfg *config.Config, client redis.UniversalClient, logger *slog.Logger, prev *Sweeper) (*Sweeper, error) {
	replica := cfg.Redis.ReadFrom == config.ReadFromReplica
	s := &Sweeper{
		cfg:    cfg,
		topo:   topology.New(client, replica),
		reader: redisread.NewReader(replica && cfg.Redis.Mode == config.ModeCluster),
		logger: logger,
	}
	s.reader.Warn = logger.Warn
	if cfg.Sampling.Discovery == config.DiscoveryNotify {
		var fams []discovery.Family
		for i := range cfg.Families {
			f := &cfg.Families[i]
			fams = append(fams, discovery.Family{Name: f.Name, Match: f.Match, Re: f.MatchRegexp, Classes: kind.NotifyClasses(f.Kind)})
		}
		// A Redis that answers without the events is a config error, as
		// a bad value is. One that does not answer says nothing of the
		// setting, and scan mode starts (and reloads) without Redis:
		// refusing would crash-loop an exporter started before Redis.
		// The watcher checks the setting on every read, and reads by
		// full SCAN until the events are there.
		if err := discovery.CheckNotify(ctx, s.topo, fams); errors.Is(err, discovery.ErrNoAnswer) {
			logger.Warn("cannot check notify-keyspace-events now; every sweep checks it once Redis answers", "err", err)
		} else if err != nil {
			s.reader.Close()
			return nil, err
		}
		s.watcher = discovery.NewWatcher(fams, cfg.Redis.DB, logger)
	}
	s.shard = topology.Shard{Index: cfg.Sampling.ShardIndex, Count: cfg.Sampling.ShardCount}
	states := make([]*state, len(cfg.Families))
	for i := range cfg.Families {
		st, err := newState(&cfg.Families[i], &cfg.Sampling)
		if err != nil {
			if s.watcher != nil {
				s.watcher.Close()
			}
			s.reader.Close()
			return nil, err
		}
		states[i] = st
	}
	// Runnable: from here on nothing fails, and prev is stopped.
	var feedFams []changefeed.Family
	tracking := cfg.Sampling.TrackChanges && cfg.Sampling.Discovery == config.DiscoveryScan
	if tracking {
		for i := range cfg.Families {
			f := &cfg.Families[i]
			feedFams = append(feedFams, changefeed.Family{Name: f.Name, Match: f.Match, Re: f.MatchRegexp})
		}
		s.changes = changefeed.New(feedFams, s.shard, logger)
	}
	if prev != nil {
		prev.stopLoops()
		prev.releaseOnce.Do(func() {
			if prev.pacer != nil && cfg.Sampling.RedisCPUShare > 0 {
				// What the pacer measured (the cost per key, the
				// baseline) holds across reloads, as the key budget
				// does.
				prev.pacer.stop()
				s.pacer, prev.keepPacer = prev.pacer, true
				s.pacer.setShare(cfg.Sampling.RedisCPUShare)
			}
			if tracking && prev.changes != nil && sameRedis(&prev.cfg.Redis, &cfg.Redis) && prev.changes.Covers(s.changes) {
				// The connections and what they collected carry over:
				// a reload does not read every key again.
				prev.changes.SetFamilies(feedFams)
				s.changes, prev.keepFeed = prev.changes, true
			}
			prev.release()
		})
	}
	if s.pacer == nil && cfg.Sampling.RedisCPUShare > 0 {
		s.pacer = newCPUPacer(cfg.Sampling.RedisCPUShare)
	}
	if s.pacer != nil {
		var count func() changefeed.Invalidations
		if s.changes != nil {
			count = s.changes.Received
		}
		s.pacer.setSources(count, s.reader.SlotReads)
	}
	old := map[string]*family{}
	if prev != nil {
		for _, f := range prev.fams {
			old[f.cfg.Name] = f
		}
	}
	for i := range cfg.Families {
		fc := &cfg.Families[i]
		st, mu := states[i], &sync.Mutex{}
		p := old[fc.Name]
		if p != nil && p.cfg.Kind == fc.Kind {
			// The on-call page may still look a member up through prev:
			// the old and the new family share the state's lock.
			st, mu = p.state, p.mu
			mu.Lock()
			st.handOver(fc, &cfg.Sampling)
			if !sameRedis(&prev.cfg.Redis, &cfg.Redis) {
				st.lost.markMoved(prev.cfg.Redis.DB == cfg.Redis.DB)
				st.synced = nil
			} else if !sameKeys(p.cfg, fc, p.sampling, &cfg.Sampling) {
				// What the kind holds was read under the old match,
				// user or settings: keys that no longer match, users
				// named by the old regexp. One full read replaces it.
				st.synced = nil
				if userPattern(p.cfg) != userPattern(fc) {
					st.floor.Rename()
				}
				if p.cfg.Match != fc.Match {
					st.unwatched = true
				}
			}
			mu.Unlock()
		}
		f := &family{cfg: fc, sampling: &cfg.Sampling, leaks: &cfg.Leaks, s: s, state: st, mu: mu,
			limits: st.tracker.Limits()}
		if p != nil {
			f.snap.Store(p.snap.Load())
		}
		s.fams = append(s.fams, f)
	}
	return s, nil
}

// sameKeys reports whether a family reloaded from a to b holds what it
// held: the same keys (match), users (user), and what the kind keeps of
// each key (every other setting but the thresholds applied when
// publishing: limit, floor_window). Otherwise the reloaded family reads
// every key once, as a new one would.
func sameKeys(a, b *config.Family, sa, sb *config.Sampling) bool {
	x, y := *a, *b
	if userPattern(&x) != userPattern(&y) || sa.MaxMembersPerKey != sb.MaxMembersPerKey {
		return false
	}
	// The compiled forms follow from the fields compared.
	x.UserRegexp, x.MatchRegexp, y.UserRegexp, y.MatchRegexp = nil, nil, nil, nil
	x.Limit, x.FloorWindow, y.Limit, y.FloorWindow = 0, 0, 0, 0
	x.User, y.User = "", ""
	return reflect.DeepEqual(exported(x), exported(y))
}

// userPattern is the regexp that names a family's users, explicit or
// derived from match.
func userPattern(f *config.Family) string {
	if f.UserRegexp != nil {
		return f.UserRegexp.String()
	}
	return f.User
}

// exported is a family's exported fields: the unexported ones are
// derived from them.
func exported(f config.Family) []any {
	v := reflect.ValueOf(f)
	var out []any
	for i := range v.NumField() {
		if v.Type().Field(i).IsExported() {
			out = append(out, v.Field(i).Interface())
		}
	}
	return out
}

// sameRedis reports whether two redis sections point at the same data:
// credentials and timeouts may change, the server and database may not.
func sameRedis(a, b *config.Redis) bool {
	return a.Addr == b.Addr && slices.Equal(a.Addrs, b.Addrs) && a.Mode == b.Mode &&
		a.MasterName == b.MasterName && a.DB == b.DB
}

// Start runs the sweep loops until Stop.
func (s *Sweeper) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	if s.pacer != nil {
		s.pacer.start(s.logger)
	}
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
	s.stopLoops()
	s.releaseOnce.Do(s.release)
}

// stopLoops ends the loops and waits for a sweep in flight to finish: no
// goroutine of s reads its families' state or its fields after it.
func (s *Sweeper) stopLoops() {
	s.loopsOnce.Do(func() {
		if s.cancel != nil {
			s.cancel()
		}
		s.wg.Wait()
	})
}

// release closes what s owns, less what a successor took over. Called
// once, through releaseOnce, after stopLoops.
func (s *Sweeper) release() {
	if s.pacer != nil && !s.keepPacer {
		s.pacer.stop()
	}
	if s.watcher != nil {
		s.watcher.Close()
	}
	if s.changes != nil && !s.keepFeed {
		s.changes.Close()
	}
	s.reader.Close()
	s.topo.Close()
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
func (s *Sweeper) Snapshot() *snapshot.Snapshot {
	snap := &snapshot.Snapshot{}
	// The clock skew is the one measured last, by whichever family.
	var at int64
	for _, f := range s.fams {
		if c := f.clock.Load(); c != nil && c.at > at {
			at, snap.ClockSkew, snap.HaveClock = c.at, c.skew, true
		}
	}
	for _, f := range s.fams {
		if fs := f.snap.Load(); fs != nil {
			snap.Families = append(snap.Families, fs)
		} else {
			snap.Families = append(snap.Families, f.emptySnapshot(0))
		}
	}
	return snap
}

// FirstSeen returns when a member of a family's key was first seen (Redis
// time, ms), if the family's tracker remembers it; memberHash is
// track.MemberHash of the key and the member. It waits for a sweep in
// progress to finish.
func (s *Sweeper) FirstSeen(family, key string, memberHash uint64) (int64, bool) {
	for _, f := range s.fams {
		if f.cfg.Name != family {
			continue
		}
		fs, ok := f.state.tracker.(kind.FirstSeer)
		if !ok {
			return 0, false
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		return fs.FirstSeen(key, memberHash)
	}
	return 0, false
}

// Queue returns a queue of a framework family from its latest sweep, for
// the on-call page. It waits for a sweep in progress to finish.
func (s *Sweeper) Queue(family, queue string) (kind.QueueView, bool) {
	for _, f := range s.fams {
		if f.cfg.Name != family {
			continue
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		return kind.QueueOf(f.state.tracker, queue)
	}
	return kind.QueueView{}, false
}

// Topology is how the sweeper finds the servers, for live reads of one
// key (the on-call page).
func (s *Sweeper) Topology() *topology.Topology { return s.topo }

func (s *Sweeper) String() string { return fmt.Sprintf("sweeper(%d families)", len(s.fams)) }
