package simulator

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/limiter"
)

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
	gate     *gate

	// beatMu is held by the scheduler for a whole tick, Redis round trips
	// included, and by KillShare: a kill never races an in-flight heartbeat.
	beatMu sync.Mutex

	mu      sync.Mutex
	seq     int64
	holders map[string]*holder // live and zombie, by id
	dead    []*holder          // killed and crashed, until their slot expires
	t       Truth
	killRng *rand.Rand

	// The other recipes' workloads; nil when off.
	rate    *rateWorkload
	locks   *lockWorkload
	lists   *listWorkload
	streams *streamWorkload
}

// recipe is one of the other recipes' workloads.
type recipe interface {
	// start launches the workload's goroutines, counted in s.wg.
	start()
	// fill writes the workload's ground truth at now into t.
	fill(t *Truth, now time.Time)
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
		gate:    newGate(),
		holders: make(map[string]*holder),
		killRng: rand.New(rand.NewPCG(uint64(o.Seed), saltKills)),
		t:       newTruth(),
	}
	s.lim = limiter.New(c, limiter.Options{
		TTL:               o.TTL,
		HeartbeatInterval: o.HeartbeatInterval,
		Now:               o.Now,
		FailOpen:          false, // an acquire on error is dropped: keeps the ground truth exact
	})
	// Holder ids and tokens carry a per-run token so that a rerun with the
	// same seed never collides with members a previous run left behind.
	s.runID = strconv.FormatUint(rand.Uint64()&0xffffff, 36)
	s.tick = min(max(o.HeartbeatInterval/10, 5*time.Millisecond), 250*time.Millisecond)

	planRng := rand.New(rand.NewPCG(uint64(o.Seed), saltPlans))
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
	s.rate = newRateWorkload(s)
	s.locks = newLockWorkload(s)
	s.lists = newListWorkload(s)
	s.streams = newStreamWorkload(s)

	s.wg.Add(1)
	go s.watch(ctx)
	if !o.NoSlotStreams {
		s.wg.Add(2 + o.Workers)
		go s.arrivals(rand.New(rand.NewPCG(uint64(o.Seed), saltArrivals)))
		go s.scheduler()
		for range o.Workers {
			go s.worker()
		}
	}
	for _, r := range s.recipes() {
		r.start()
	}
	return s, nil
}

// recipes returns the workloads of the other recipes that are on.
func (s *Sim) recipes() []recipe {
	var out []recipe
	if s.rate != nil {
		out = append(out, s.rate)
	}
	if s.locks != nil {
		out = append(out, s.locks)
	}
	if s.lists != nil {
		out = append(out, s.lists)
	}
	if s.streams != nil {
		out = append(out, s.streams)
	}
	return out
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
// after their ttl; locks, queues and streams are left as they are. Stop is
// safe to call more than once, and ends a pause.
func (s *Sim) Stop() {
	s.halt()
	s.wg.Wait()
}

func (s *Sim) halt() {
	s.stopOnce.Do(func() {
		close(s.stop)
		s.gate.close()
	})
}

// Pause stops all traffic: once it returns, no goroutine of the simulation
// writes to Redis until Resume. It waits for the steps in flight, blocking
// reads included (at most the recipes' block timeout, 100ms). Nothing is
// released or completed on the way: holders, workers and consumers freeze
// mid-work, as if every process were SIGSTOPped. Redis keeps its own time:
// leases and TTLs run out, entries and heads age, and Truth accounts for
// it. Timers keep running while paused, so work that fell due during the
// pause happens right after Resume.
//
// The slot-set workload's truth does not model a pause: its holders miss
// their heartbeats while paused, and a pause longer than the slot ttl lets
// their slots expire while Truth still counts them in flight.
func (s *Sim) Pause() { s.gate.pause() }

// Resume ends a pause.
func (s *Sim) Resume() { s.gate.resume() }

// Paused reports whether the simulation is paused.
func (s *Sim) Paused() bool { return s.gate.isPaused() }

func (s *Sim) watch(ctx context.Context) {
	defer s.wg.Done()
	select {
	case <-ctx.Done():
		s.halt()
	case <-s.stop:
	}
}

// sleep waits d; false when the simulation stopped meanwhile.
func (s *Sim) sleep(d time.Duration) bool {
	if d <= 0 {
		return !s.stopping()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.stop:
		return false
	case <-t.C:
		return true
	}
}

// step runs f, which talks to Redis, unless the simulation stops first. It
// waits while the simulation is paused.
func (s *Sim) step(f func()) bool {
	if !s.gate.enter() {
		return false
	}
	defer s.gate.leave()
	f()
	return true
}

// Salts of the random sources derived from Seed, one per use.
const (
	saltPlans = iota
	saltArrivals
	saltKills
	saltRateUsers
	saltLockUsers
	saltListUsers
	saltStreamUsers
)

// pickUsers returns n distinct users in an order drawn from Seed.
func (s *Sim) pickUsers(salt uint64, n int) []string {
	rng := rand.New(rand.NewPCG(uint64(s.o.Seed), salt))
	perm := rng.Perm(len(s.users))
	out := make([]string, n)
	for i := range out {
		out[i] = s.users[perm[i]]
	}
	return out
}

// actorRng returns the random source of one actor of a kind.
func (s *Sim) actorRng(kindSalt uint64, i int) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(s.o.Seed), kindSalt<<32|uint64(i)))
}

// jitter returns d scaled uniformly into 50%..150%.
func jitter(rng *rand.Rand, d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.5 + rng.Float64()))
}
