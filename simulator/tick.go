package simulator

import (
	"cmp"
	"errors"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/slotexporter/slot_exporter/limiter"
)

func (s *Sim) scheduler() {
	defer s.wg.Done()
	t := time.NewTicker(s.tick)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.step(s.runTick)
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
