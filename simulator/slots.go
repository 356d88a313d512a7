package simulator

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/redis/go-redis/v9"
)

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

func (s *Sim) arrivals(rng *rand.Rand) {
	defer s.wg.Done()
	defer close(s.queue)
	o := s.o
	next := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for {
		if !s.gate.wait() {
			return
		}
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
		s.step(func() { s.start(a) })
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
