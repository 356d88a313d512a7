package simulator

import (
	"maps"
	"time"
)

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
//
// The other recipes' truths (RateLimits, Locks, ListQueues, StreamQueues)
// are present only when their workload is on. Their gauges describe Redis
// at At, from what the simulator wrote and what Redis's own clock does to
// it since (TTLs and leases running out, entries and heads ageing). They
// are exact while the simulation is paused (Pause) and Redis has had no
// errors; while it runs, a step in flight may or may not have landed.
type Truth struct {
	At time.Time `json:"at"`
	// Paused: the simulation was paused when this was taken.
	Paused bool `json:"paused,omitempty"`

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

	Errors        int64 `json:"errors"`         // failed Redis calls or pipelines, of every workload
	AcquireErrors int64 `json:"acquire_errors"` // acquires that failed on an error (stream dropped)

	KilledUsers  map[string]int64 `json:"killed_users"`
	CrashedUsers map[string]int64 `json:"crashed_users"`
	ZombieUsers  map[string]int64 `json:"zombie_users"`
	LeakedUsers  map[string]int64 `json:"leaked_users"` // users with leaked counter INCRs
	FutureUsers  map[string]int64 `json:"future_users"`
	LostUsers    map[string]int64 `json:"lost_users"`

	RateLimits   *RateLimitTruth   `json:"ratelimits,omitempty"`
	Locks        *LockTruth        `json:"locks,omitempty"`
	ListQueues   *ListQueueTruth   `json:"list_queues,omitempty"`
	StreamQueues *StreamQueueTruth `json:"stream_queues,omitempty"`
}

func newTruth() Truth {
	return Truth{
		KilledUsers: map[string]int64{}, CrashedUsers: map[string]int64{}, ZombieUsers: map[string]int64{},
		LeakedUsers: map[string]int64{}, FutureUsers: map[string]int64{}, LostUsers: map[string]int64{},
	}
}

// Truth returns a snapshot of the ground truth.
func (s *Sim) Truth() Truth {
	t := s.slotTruth()
	t.Paused = s.gate.isPaused()
	for _, r := range s.recipes() {
		r.fill(&t, t.At)
	}
	return t
}

func (s *Sim) slotTruth() Truth {
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
