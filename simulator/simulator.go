// Package simulator drives Redis with a workload of streams that hold
// crash-safe slots (package limiter) and, optionally, legacy INCR/DECR
// counters, and injects the faults slot_exporter exists to see: holders that
// die mid-stream (SIGKILL), heartbeat loops that outlive their stream
// (zombies), unit-bug scores far in the future, heartbeats that never refresh
// the key's expiry, and counters that are INCRed but never DECRed.
//
// It keeps its own ground truth (Truth, Slots) so that tests can compare
// what the exporter reports with what actually happened.
//
// Goroutines are bounded: one arrival goroutine, a fixed pool of acquire
// workers, and one scheduler that, every tick, heartbeats all due holders
// and ends all due streams in pipelines. Redis errors never stop the
// simulator: they are counted in Truth.Errors and it keeps going, so Redis
// may be restarted under it.
package simulator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/limiter"
)

// Defaults for zero Options fields.
const (
	DefaultUsers          = 100
	DefaultKeyPrefix      = "joishi:streams:"
	DefaultStreamRate     = 10
	DefaultStreamDuration = 60 * time.Second
	DefaultWorkers        = 8
	FreeLimit             = 1
	PaidLimit             = 3
)

// maxBatch bounds the commands of one pipeline.
const maxBatch = 500

// Options configures a simulation. Rates are shares in [0, 1] drawn
// independently per stream, except CrashRate and ZombieRate, which are
// exclusive (their sum must be at most 1).
type Options struct {
	// Users is the number of users, named u0 .. u<Users-1> (default 100).
	Users int
	// FreeShare is the share of users on the free plan (limit FreeLimit);
	// the others are paid (limit PaidLimit). Ignored when Limit > 0.
	FreeShare float64
	// Limit, when > 0, is every user's limit.
	Limit int
	// KeyPrefix prefixes slot sets: KeyPrefix+"{"+user+"}", e.g.
	// "joishi:streams:{u17}" (default "joishi:streams:").
	KeyPrefix string
	// CounterPrefix prefixes legacy counters the same way, e.g.
	// "joishi:streams-legacy:{u17}". Empty disables counters. A stream that
	// got its slot INCRs its user's counter and DECRs it when it ends.
	CounterPrefix string
	// StreamRate is new streams per second across all users, Poisson
	// arrivals (default 10).
	StreamRate float64
	// StreamDuration is the mean stream duration; each stream lasts uniformly
	// 50%..150% of it (default 60s).
	StreamDuration time.Duration
	// TTL and HeartbeatInterval are the limiter's (defaults 120s and 20s).
	TTL, HeartbeatInterval time.Duration
	// CrashRate is the share of streams whose holder dies at a random point
	// mid-stream: it stops heartbeating, never releases, never DECRs.
	CrashRate float64
	// ZombieRate is the share of streams whose heartbeat loop outlives the
	// stream: it keeps heartbeating until Stop and never releases.
	ZombieRate float64
	// FutureRate is the share of acquires whose score is then rewritten with
	// a unit bug: now in microseconds (+ ttl in ms) instead of milliseconds.
	// The holder then heartbeats and releases normally; its heartbeats
	// cannot lower that score (GT), so the member stays "future" until it is
	// released or its holder dies, when it is never pruned.
	FutureRate float64
	// NoRefreshRate is the share of holders heartbeating with
	// limiter.HeartbeatNoRefresh: their key may expire under live slots.
	NoRefreshRate float64
	// CounterLeakRate is the share of counter-holding streams that end
	// without DECR.
	CounterLeakRate float64
	// Seed seeds the random draws (users, plans, fates, durations, kills).
	Seed int64
	// Now is the clock scores are computed from (default time.Now).
	// Scheduling always uses the real clock.
	Now func() time.Time
	// Workers is the number of concurrent acquires (default 8). Arrivals
	// that find all workers busy and the queue full are dropped and
	// counted in Truth.Dropped.
	Workers int
}

// Slot states in Slot.State.
const (
	StateLive    = "live"    // stream running, heartbeating
	StateZombie  = "zombie"  // stream ended, heartbeat loop still running, never releases
	StateKilled  = "killed"  // holder SIGKILLed by KillShare: no heartbeat, no release
	StateCrashed = "crashed" // holder died mid-stream (CrashRate)
)

// Slot is one slot the simulator knows is (or should be) in Redis.
type Slot struct {
	User  string `json:"user"`
	Key   string `json:"key"`
	ID    string `json:"id"`
	State string `json:"state"`
	// Future: the score was written with the microsecond unit bug.
	Future bool `json:"future,omitempty"`
	// NoRefresh: the holder's heartbeats do not refresh the key's expiry.
	NoRefresh bool `json:"no_refresh,omitempty"`
	// Lost: a heartbeat found the member gone while its holder lived (the
	// key expired under it, or Redis lost its data).
	Lost bool `json:"lost,omitempty"`
	// Counter: the holder owns one INCR on its user's counter that has not
	// been DECRed (for a killed or crashed holder: a leaked one).
	Counter bool `json:"counter,omitempty"`
	// Acquired is when the slot was granted; Died when a killed or crashed
	// holder stopped (zero otherwise).
	Acquired time.Time `json:"acquired"`
	Died     time.Time `json:"died,omitzero"`
}

// Truth is the simulator's ground truth. All counts are totals since Run,
// except the gauges InFlight, ZombiesActive, DeadUnexpired and
// CountersInFlight. Per-user maps count events by user.
type Truth struct {
	At time.Time `json:"at"`

	Started  int64 `json:"started"`  // acquires attempted (= Acquired + Denied + AcquireErrors)
	Dropped  int64 `json:"dropped"`  // arrivals dropped: workers saturated
	Acquired int64 `json:"acquired"` // slots granted
	Denied   int64 `json:"denied"`   // acquires refused at the limit
	Released int64 `json:"released"` // streams that ended and sent ZREM
	Crashed  int64 `json:"crashed"`  // holders that died mid-stream (CrashRate)
	Killed   int64 `json:"killed"`   // holders killed by KillShare
	Zombies  int64 `json:"zombies"`  // streams whose heartbeat loop outlived them
	// Future counts acquires rewritten with a microsecond score.
	Future int64 `json:"future"`
	// NoRefresh counts holders using the non-refreshing heartbeat.
	NoRefresh int64 `json:"no_refresh"`
	// Lost counts holders (live or zombie) whose member a heartbeat found
	// gone: the key expired under it, or Redis lost its data.
	Lost       int64 `json:"lost"`
	Heartbeats int64 `json:"heartbeats"` // heartbeats sent

	CounterIncrs int64 `json:"counter_incrs"`
	CounterDecrs int64 `json:"counter_decrs"`
	// CountersLeaked counts INCRs that will never be DECRed: streams that
	// leaked (CounterLeakRate) plus crashed and killed holders with a counter.
	CountersLeaked int64 `json:"counters_leaked"`
	// CountersInFlight counts INCRs held by running streams. After Stop, and
	// absent Redis errors or restarts, the counters sum to
	// CountersLeaked + CountersInFlight.
	CountersInFlight int64 `json:"counters_in_flight"`

	InFlight      int64 `json:"in_flight"`      // live streams holding a slot
	ZombiesActive int64 `json:"zombies_active"` // zombie heartbeat loops running
	// DeadUnexpired counts slots of killed or crashed holders whose expiry
	// has not passed yet (they should show as stale), future ones included.
	DeadUnexpired int64 `json:"dead_unexpired"`

	Errors        int64 `json:"errors"`         // failed Redis calls or pipelines
	AcquireErrors int64 `json:"acquire_errors"` // acquires that failed on an error (stream dropped)

	KilledUsers  map[string]int64 `json:"killed_users"`
	CrashedUsers map[string]int64 `json:"crashed_users"`
	ZombieUsers  map[string]int64 `json:"zombie_users"`
	LeakedUsers  map[string]int64 `json:"leaked_users"` // users with leaked counter INCRs
	FutureUsers  map[string]int64 `json:"future_users"`
	LostUsers    map[string]int64 `json:"lost_users"`
}

type holder struct {
	Slot
	limit     int
	end       time.Time // real clock: stream end
	crashAt   time.Time // real clock: death, when crash
	nextBeat  time.Time // real clock
	crash     bool
	zombie    bool
	leak      bool
	expiry    time.Time // sim clock: latest score written, as a time
	futureExp bool
}

type arrival struct {
	user      string
	dur       time.Duration
	crashFrac float64
	crash     bool
	zombie    bool
	future    bool
	noRefresh bool
	leak      bool
}

// Sim is a running simulation.
type Sim struct {
	o     Options
	c     redis.UniversalClient
	lim   *limiter.Limiter
	rctx  context.Context // for Redis calls: never cancelled, so accounting stays exact
	users []string
	limit map[string]int
	runID string
	tick  time.Duration

	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
	queue    chan arrival

	// beatMu is held by the scheduler for a whole tick, Redis round trips
	// included, and by KillShare: a kill never races an in-flight heartbeat.
	beatMu sync.Mutex

	mu      sync.Mutex
	seq     int64
	holders map[string]*holder // live and zombie, by id
	dead    []*holder          // killed and crashed, until their slot expires
	t       Truth
	killRng *rand.Rand
}

func (o *Options) validate() error {
	if o.Users < 0 || o.Limit < 0 || o.Workers < 0 {
		return errors.New("simulator: Users, Limit and Workers must not be negative")
	}
	if o.StreamRate < 0 || math.IsNaN(o.StreamRate) || math.IsInf(o.StreamRate, 0) {
		return errors.New("simulator: StreamRate must be a finite number >= 0")
	}
	if o.StreamDuration < 0 || o.TTL < 0 || o.HeartbeatInterval < 0 {
		return errors.New("simulator: durations must not be negative")
	}
	for name, r := range map[string]float64{
		"FreeShare": o.FreeShare, "CrashRate": o.CrashRate, "ZombieRate": o.ZombieRate,
		"FutureRate": o.FutureRate, "NoRefreshRate": o.NoRefreshRate, "CounterLeakRate": o.CounterLeakRate,
	} {
		if !(r >= 0 && r <= 1) {
			return fmt.Errorf("simulator: %s %v is not in [0, 1]", name, r)
		}
	}
	if o.CrashRate+o.ZombieRate > 1 {
		return errors.New("simulator: CrashRate + ZombieRate must be at most 1")
	}
	if o.Users == 0 {
		o.Users = DefaultUsers
	}
	if o.KeyPrefix == "" {
		o.KeyPrefix = DefaultKeyPrefix
	}
	if o.StreamRate == 0 {
		o.StreamRate = DefaultStreamRate
	}
	if o.StreamDuration == 0 {
		o.StreamDuration = DefaultStreamDuration
	}
	if o.TTL == 0 {
		o.TTL = limiter.DefaultTTL
	}
	if o.HeartbeatInterval == 0 {
		o.HeartbeatInterval = limiter.DefaultHeartbeatInterval
	}
	if o.HeartbeatInterval >= o.TTL {
		return fmt.Errorf("simulator: HeartbeatInterval %v must be shorter than TTL %v", o.HeartbeatInterval, o.TTL)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Workers == 0 {
		o.Workers = DefaultWorkers
	}
	return nil
}

// Run validates o, fills in defaults and starts the simulation in the
// background. It returns at once; Redis is not contacted before the first
// arrival. The simulation ends on Stop or when ctx is done (call Stop to
// wait for it).
func Run(ctx context.Context, c redis.UniversalClient, o Options) (*Sim, error) {
	if c == nil {
		return nil, errors.New("simulator: nil client")
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	s := &Sim{
		o:       o,
		c:       c,
		rctx:    context.WithoutCancel(ctx),
		limit:   make(map[string]int, o.Users),
		stop:    make(chan struct{}),
		queue:   make(chan arrival, 1024),
		holders: make(map[string]*holder),
		killRng: rand.New(rand.NewPCG(uint64(o.Seed), 2)),
		t:       newTruth(),
	}
	s.lim = limiter.New(c, limiter.Options{
		TTL:               o.TTL,
		HeartbeatInterval: o.HeartbeatInterval,
		Now:               o.Now,
		FailOpen:          false, // an acquire on error is dropped: keeps the ground truth exact
	})
	// Holder ids carry a per-run token so that a rerun with the same seed
	// never collides with members a previous run left behind.
	s.runID = strconv.FormatUint(rand.Uint64()&0xffffff, 36)
	s.tick = min(max(o.HeartbeatInterval/10, 5*time.Millisecond), 250*time.Millisecond)

	planRng := rand.New(rand.NewPCG(uint64(o.Seed), 0))
	s.users = make([]string, o.Users)
	for i := range s.users {
		u := "u" + strconv.Itoa(i)
		s.users[i] = u
		switch {
		case o.Limit > 0:
			s.limit[u] = o.Limit
		case planRng.Float64() < o.FreeShare:
			s.limit[u] = FreeLimit
		default:
			s.limit[u] = PaidLimit
		}
	}

	s.wg.Add(3 + o.Workers)
	go s.watch(ctx)
	go s.arrivals(rand.New(rand.NewPCG(uint64(o.Seed), 1)))
	go s.scheduler()
	for range o.Workers {
		go s.worker()
	}
	return s, nil
}

func newTruth() Truth {
	return Truth{
		KilledUsers: map[string]int64{}, CrashedUsers: map[string]int64{}, ZombieUsers: map[string]int64{},
		LeakedUsers: map[string]int64{}, FutureUsers: map[string]int64{}, LostUsers: map[string]int64{},
	}
}

// Options returns the options in effect, defaults filled in.
func (s *Sim) Options() Options { return s.o }

// Users returns the user names.
func (s *Sim) Users() []string { return slices.Clone(s.users) }

// UserLimit returns user's limit (0 for an unknown user).
func (s *Sim) UserLimit(user string) int { return s.limit[user] }

// Key returns user's slot-set key.
func (s *Sim) Key(user string) string { return s.o.KeyPrefix + "{" + user + "}" }

// CounterKey returns user's legacy counter key ("" when counters are off).
func (s *Sim) CounterKey(user string) string {
	if s.o.CounterPrefix == "" {
		return ""
	}
	return s.o.CounterPrefix + "{" + user + "}"
}

func (s *Sim) stopping() bool {
	select {
	case <-s.stop:
		return true
	default:
		return false
	}
}

// Stop ends the simulation and waits for its goroutines. Holders are
// abandoned as they are: live and zombie slots are not released and their
// counters are not DECRed (like a process exit), so they expire in Redis
// after their ttl. Stop is safe to call more than once.
func (s *Sim) Stop() {
	s.stopOnce.Do(func() { close(s.stop) })
	s.wg.Wait()
}

func (s *Sim) watch(ctx context.Context) {
	defer s.wg.Done()
	select {
	case <-ctx.Done():
		s.stopOnce.Do(func() { close(s.stop) })
	case <-s.stop:
	}
}

// arrivals draws Poisson arrivals and their fates, and queues them for the
// workers.
func (s *Sim) arrivals(rng *rand.Rand) {
	defer s.wg.Done()
	defer close(s.queue)
	o := s.o
	next := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for {
		next = next.Add(time.Duration(rng.ExpFloat64() / o.StreamRate * float64(time.Second)))
		if now := time.Now(); next.Before(now.Add(-time.Second)) {
			next = now // far behind (a stall): do not burst to catch up
		}
		if d := time.Until(next); d > 0 {
			timer.Reset(d)
			select {
			case <-s.stop:
				return
			case <-timer.C:
			}
		} else if s.stopping() {
			return
		}
		a := arrival{
			user:      s.users[rng.IntN(len(s.users))],
			dur:       time.Duration(float64(o.StreamDuration) * (0.5 + rng.Float64())),
			crashFrac: rng.Float64(),
		}
		r := rng.Float64()
		a.crash = r < o.CrashRate
		a.zombie = !a.crash && r < o.CrashRate+o.ZombieRate
		a.future = rng.Float64() < o.FutureRate
		a.noRefresh = rng.Float64() < o.NoRefreshRate
		a.leak = o.CounterPrefix != "" && rng.Float64() < o.CounterLeakRate
		select {
		case s.queue <- a:
		default:
			s.mu.Lock()
			s.t.Dropped++
			s.mu.Unlock()
		}
	}
}

func (s *Sim) worker() {
	defer s.wg.Done()
	for a := range s.queue {
		if s.stopping() {
			continue // drain without acquiring
		}
		s.start(a)
	}
}

func (s *Sim) start(a arrival) {
	ctx := s.rctx
	key := s.Key(a.user)
	s.mu.Lock()
	s.seq++
	s.t.Started++
	id := fmt.Sprintf("st-%s-%d", s.runID, s.seq)
	s.mu.Unlock()
	limit := s.limit[a.user]

	granted, _, err := s.lim.Acquire(ctx, key, id, limit)
	if err != nil {
		s.mu.Lock()
		s.t.Errors++
		s.t.AcquireErrors++
		s.mu.Unlock()
		return
	}
	if !granted {
		s.mu.Lock()
		s.t.Denied++
		s.mu.Unlock()
		return
	}
	acquired := s.o.Now()
	expiry := acquired.Add(s.o.TTL)
	errs := int64(0)
	future := false
	if a.future {
		// The unit bug: now in microseconds where milliseconds belong.
		score := float64(acquired.UnixMicro() + s.o.TTL.Milliseconds())
		err := s.c.ZAddArgs(ctx, key, redis.ZAddArgs{XX: true, Members: []redis.Z{{Score: score, Member: id}}}).Err()
		if err != nil {
			errs++
		} else {
			future = true
		}
	}
	counter := false
	if s.o.CounterPrefix != "" {
		if err := s.c.Incr(ctx, s.CounterKey(a.user)).Err(); err != nil {
			errs++
		} else {
			counter = true
		}
	}
	now := time.Now()
	h := &holder{
		Slot: Slot{
			User: a.user, Key: key, ID: id, State: StateLive,
			Future: future, NoRefresh: a.noRefresh, Counter: counter, Acquired: acquired,
		},
		limit:     limit,
		end:       now.Add(a.dur),
		crash:     a.crash,
		crashAt:   now.Add(time.Duration(float64(a.dur) * a.crashFrac)),
		zombie:    a.zombie,
		leak:      a.leak && counter,
		nextBeat:  now.Add(s.o.HeartbeatInterval),
		expiry:    expiry,
		futureExp: future,
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.t.Errors += errs
	s.t.Acquired++
	if future {
		s.t.Future++
		s.t.FutureUsers[a.user]++
	}
	if a.noRefresh {
		s.t.NoRefresh++
	}
	if counter {
		s.t.CounterIncrs++
		s.t.CountersInFlight++
	}
	s.holders[id] = h
	s.t.InFlight++
}

func (s *Sim) scheduler() {
	defer s.wg.Done()
	t := time.NewTicker(s.tick)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.runTick()
		}
	}
}

type ending struct {
	h       *holder
	release bool // ZREM
	decr    bool // DECR the counter
}

// runTick kills due crashers, ends due streams and heartbeats due holders.
func (s *Sim) runTick() {
	s.beatMu.Lock()
	defer s.beatMu.Unlock()
	now := time.Now()
	var beats []limiter.Beat
	var beaters []*holder
	var ends []ending

	s.mu.Lock()
	for id, h := range s.holders {
		if h.State == StateLive && h.crash && !now.Before(h.crashAt) {
			delete(s.holders, id)
			s.die(h, StateCrashed)
			continue
		}
		if h.State == StateLive && !now.Before(h.end) {
			s.t.InFlight--
			decr := h.Counter && !h.leak
			if h.Counter {
				s.t.CountersInFlight--
				if h.leak {
					s.t.CountersLeaked++
					s.t.LeakedUsers[h.User]++
				} else {
					s.t.CounterDecrs++
				}
				h.Counter = false
			}
			if h.zombie {
				h.State = StateZombie
				s.t.Zombies++
				s.t.ZombiesActive++
				s.t.ZombieUsers[h.User]++
				if decr {
					ends = append(ends, ending{h: h, decr: true})
				}
			} else {
				delete(s.holders, id)
				s.t.Released++
				ends = append(ends, ending{h: h, release: true, decr: decr})
				continue
			}
		}
		if !now.Before(h.nextBeat) {
			h.nextBeat = h.nextBeat.Add(s.o.HeartbeatInterval)
			if h.nextBeat.Before(now) {
				h.nextBeat = now.Add(s.o.HeartbeatInterval)
			}
			beats = append(beats, limiter.Beat{Key: h.Key, ID: h.ID, NoRefresh: h.NoRefresh})
			beaters = append(beaters, h)
		}
	}
	s.t.Heartbeats += int64(len(beats))
	s.pruneDead()
	s.mu.Unlock()

	var errs int64
	ctx := s.rctx
	for i := 0; i < len(beats); i += maxBatch {
		j := min(i+maxBatch, len(beats))
		beatAt := s.o.Now()
		alive, err := s.lim.HeartbeatMany(ctx, beats[i:j])
		if err != nil {
			errs++
		}
		s.mu.Lock()
		for k, ok := range alive {
			h := beaters[i+k]
			if ok {
				if !h.futureExp {
					h.expiry = beatAt.Add(s.o.TTL)
				}
				continue
			}
			if err == nil || !errors.Is(err, limiter.ErrUnavailable) {
				if !h.Lost {
					h.Lost = true
					s.t.Lost++
					s.t.LostUsers[h.User]++
				}
			}
		}
		s.mu.Unlock()
	}
	for i := 0; i < len(ends); i += maxBatch {
		j := min(i+maxBatch, len(ends))
		pipe := s.c.Pipeline()
		for _, e := range ends[i:j] {
			if e.release {
				pipe.ZRem(ctx, e.h.Key, e.h.ID)
			}
			if e.decr {
				pipe.Decr(ctx, s.CounterKey(e.h.User))
			}
		}
		cmds, _ := pipe.Exec(ctx)
		for _, c := range cmds {
			if c.Err() != nil {
				errs++
			}
		}
	}
	if errs > 0 {
		s.mu.Lock()
		s.t.Errors += errs
		s.mu.Unlock()
	}
}

// die turns a live holder into a dead one (s.mu held).
func (s *Sim) die(h *holder, state string) {
	h.State = state
	h.Died = time.Now()
	s.t.InFlight--
	switch state {
	case StateKilled:
		s.t.Killed++
		s.t.KilledUsers[h.User]++
	case StateCrashed:
		s.t.Crashed++
		s.t.CrashedUsers[h.User]++
	}
	if h.Counter {
		s.t.CountersInFlight--
		s.t.CountersLeaked++
		s.t.LeakedUsers[h.User]++
	}
	s.dead = append(s.dead, h)
}

// maxDead bounds the memory of dead holders whose slots never expire.
const maxDead = 100000

// pruneDead forgets dead holders whose slot has expired (s.mu held).
func (s *Sim) pruneDead() {
	now := s.o.Now()
	kept := s.dead[:0]
	for _, h := range s.dead {
		if h.futureExp || h.expiry.After(now) {
			kept = append(kept, h)
		}
	}
	clear(s.dead[len(kept):])
	s.dead = kept
	if n := len(s.dead) - maxDead; n > 0 {
		s.dead = slices.Delete(s.dead, 0, n)
	}
}

// KillShare is the incident: at one instant it SIGKILLs share (0..1) of the
// live streams' holders, chosen at random. They stop heartbeating and never
// release nor DECR. Zombie loops are not counted as streams and are left
// alone. It waits for an in-flight heartbeat round, so no heartbeat of a
// killed holder lands after it returns. It returns how many it killed.
func (s *Sim) KillShare(share float64) int {
	share = min(max(share, 0), 1)
	s.beatMu.Lock()
	defer s.beatMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for id, h := range s.holders {
		if h.State == StateLive {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	n := int(math.Round(share * float64(len(ids))))
	s.killRng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	for _, id := range ids[:n] {
		h := s.holders[id]
		delete(s.holders, id)
		s.die(h, StateKilled)
	}
	return n
}

// Truth returns a snapshot of the ground truth.
func (s *Sim) Truth() Truth {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.t
	t.At = time.Now()
	now := s.o.Now()
	t.DeadUnexpired = 0
	for _, h := range s.dead {
		if h.futureExp || h.expiry.After(now) {
			t.DeadUnexpired++
		}
	}
	t.KilledUsers = maps.Clone(s.t.KilledUsers)
	t.CrashedUsers = maps.Clone(s.t.CrashedUsers)
	t.ZombieUsers = maps.Clone(s.t.ZombieUsers)
	t.LeakedUsers = maps.Clone(s.t.LeakedUsers)
	t.FutureUsers = maps.Clone(s.t.FutureUsers)
	t.LostUsers = maps.Clone(s.t.LostUsers)
	return t
}

// Slots returns the slots the simulator knows of: live and zombie holders,
// and killed or crashed ones whose slot has not expired yet (future-scored
// ones are kept, as they never expire). Sorted by key, then id.
func (s *Sim) Slots() []Slot {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.o.Now()
	out := make([]Slot, 0, len(s.holders)+len(s.dead))
	for _, h := range s.holders {
		out = append(out, h.Slot)
	}
	for _, h := range s.dead {
		if h.futureExp || h.expiry.After(now) {
			out = append(out, h.Slot)
		}
	}
	slices.SortFunc(out, func(a, b Slot) int {
		return cmp.Or(strings.Compare(a.Key, b.Key), strings.Compare(a.ID, b.ID))
	})
	return out
}
