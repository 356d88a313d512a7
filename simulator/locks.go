package simulator

import (
	"maps"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/slotexporter/slot_exporter/recipe/ownerlock"
)

// Lock holder modes, besides ModeHealthy.
const (
	// LockNoTTL: SET key token NX without PX; the holder crashes at the end
	// of its hold, so the lock stays for ever.
	LockNoTTL = "no_ttl"
	// LockZombie: acquires, then extends for ever and never releases (a
	// stuck holder whose extend loop outlived its work).
	LockZombie = "zombie"
	// LockWrongUnit: the recipe given the ttl's value in milliseconds as
	// seconds: a lease 1000 times too long. Holds, extends and releases
	// like a healthy holder.
	LockWrongUnit = "wrong_unit"
	// LockKilled: killed at a random moment of each hold: no more extends,
	// no release. It comes back once its lease has run out, and again.
	LockKilled = "killed"
)

// Lock workload defaults.
const (
	DefaultLockPrefix = "lock:job:"
	DefaultLockTTL    = 10 * time.Second
	// DefaultClockSkewTolerance is the exporter's default.
	DefaultClockSkewTolerance = 5 * time.Second
)

// LockWorkload drives owner locks (package recipe/ownerlock): holders, one
// per user, each taking its own lock Prefix+"{"+user+"}" again and again.
// The counts say how many holders run in each mode; all zero (the default)
// turns the workload off.
type LockWorkload struct {
	// Prefix prefixes the locks (default "lock:job:").
	Prefix string
	// TTL is the lease holders mean to use (default 10s); they extend it
	// every TTL/3 while they hold.
	TTL time.Duration
	// Hold is the mean hold; each lasts uniformly 50%..150% of it
	// (default TTL).
	Hold time.Duration
	// Idle is the mean time between two holds (default Hold/2).
	Idle time.Duration
	// MaxHold and ClockSkewTolerance are the exporter's, used to classify
	// present locks in the truth (defaults 10 × TTL and 5s). MaxHold must
	// exceed 1.5 × Hold: a healthy hold is never a zombie.
	MaxHold            time.Duration
	ClockSkewTolerance time.Duration

	Healthy   int // holders using the recipe as intended
	NoTTL     int // LockNoTTL holders
	Zombie    int // LockZombie holders
	WrongUnit int // LockWrongUnit holders
	Killed    int // LockKilled holders
}

func (w *LockWorkload) validate(users int) error {
	total, err := checkCounts("Locks", users, map[string]int{
		"Healthy": w.Healthy, "NoTTL": w.NoTTL, "Zombie": w.Zombie, "WrongUnit": w.WrongUnit, "Killed": w.Killed,
	})
	if err != nil {
		return err
	}
	if err := checkDurations("Locks", map[string]time.Duration{
		"TTL": w.TTL, "Hold": w.Hold, "Idle": w.Idle, "MaxHold": w.MaxHold, "ClockSkewTolerance": w.ClockSkewTolerance,
	}); err != nil {
		return err
	}
	if total == 0 {
		return nil
	}
	w.Prefix = orDefault(w.Prefix, DefaultLockPrefix)
	w.TTL = orDefault(w.TTL, DefaultLockTTL)
	if w.TTL < 3*time.Millisecond {
		return errorf("Locks.TTL %v must be at least 3ms", w.TTL)
	}
	w.Hold = orDefault(w.Hold, w.TTL)
	w.Idle = orDefault(w.Idle, w.Hold/2)
	w.MaxHold = orDefault(w.MaxHold, 10*w.TTL)
	w.ClockSkewTolerance = orDefault(w.ClockSkewTolerance, DefaultClockSkewTolerance)
	if w.MaxHold <= w.Hold*3/2 {
		return errorf("Locks.MaxHold %v must exceed 1.5 × Locks.Hold %v", w.MaxHold, w.Hold)
	}
	return nil
}

// LockTruth is the lock workload's ground truth. Gauges describe the locks
// present in Redis at Truth.At (acquired, not released, lease not run out),
// classified by the exporter's rule: future if the lease left exceeds
// TTL + ClockSkewTolerance, else zombie if its token has held it for longer
// than MaxHold, else live.
type LockTruth struct {
	TTLSeconds     float64 `json:"ttl_seconds"`
	MaxHoldSeconds float64 `json:"max_hold_seconds"`
	// Users maps each holder's user to its mode.
	Users map[string]string `json:"users"`

	Acquires int64 `json:"acquires"` // holds begun (a new token set)
	Refused  int64 `json:"refused"`  // acquires that found the lock held
	// Released and Expired count holds that ended: released by their
	// holder (token-checked delete), or by their lease running out (the
	// holder was killed, or lost the lease during a pause).
	Released int64 `json:"released"`
	Expired  int64 `json:"expired"`

	Held       int64 `json:"held"`        // locks present
	Live       int64 `json:"live"`        // present, live
	Zombie     int64 `json:"zombie"`      // present, zombie
	Future     int64 `json:"future"`      // present, future
	WithoutTTL int64 `json:"without_ttl"` // present with no expiry

	// Used is 1 by user of a present lock.
	Used map[string]int64 `json:"used"`
	// HeldSeconds is, by user of a present lock, how long its token has held it.
	HeldSeconds  map[string]float64 `json:"held_seconds"`
	ZombieUsers  map[string]int64   `json:"zombie_users"`
	FutureUsers  map[string]int64   `json:"future_users"`
	NoTTLUsers   map[string]int64   `json:"no_ttl_users"`
	ExpiredUsers map[string]int64   `json:"expired_users"` // holds ended by expiry, by user
}

type lockWorkload struct {
	s *Sim
	o LockWorkload

	mu           sync.Mutex
	holders      []*lockHolder
	acquires     int64
	refused      int64
	released     int64
	expired      int64
	expiredUsers map[string]int64
	errors       int64
}

type lockHolder struct {
	user, key, mode string
	lk              *ownerlock.Locker
	lease           time.Duration
	rng             *rand.Rand
	seq             int

	// Guarded by lockWorkload.mu.
	token    string    // the current hold's token; "" when none
	acquired time.Time // when it was taken
	expires  time.Time // when its lease runs out; zero: no TTL
}

func newLockWorkload(s *Sim) *lockWorkload {
	o := s.o.Locks
	modes := modeList(map[string]int{
		ModeHealthy: o.Healthy, LockNoTTL: o.NoTTL, LockZombie: o.Zombie, LockWrongUnit: o.WrongUnit, LockKilled: o.Killed,
	}, []string{ModeHealthy, LockNoTTL, LockZombie, LockWrongUnit, LockKilled})
	if len(modes) == 0 {
		return nil
	}
	w := &lockWorkload{s: s, o: o, expiredUsers: map[string]int64{}}
	users := s.pickUsers(saltLockUsers, len(modes))
	for i, mode := range modes {
		h := &lockHolder{user: users[i], key: s.LockKey(users[i]), mode: mode, lease: o.TTL, rng: s.actorRng(saltLockUsers, i)}
		if mode == LockWrongUnit {
			h.lease = time.Duration(o.TTL.Milliseconds()) * time.Second
		}
		// Options were validated: New cannot fail.
		h.lk, _ = ownerlock.New(s.c, ownerlock.Options{TTL: h.lease})
		w.holders = append(w.holders, h)
	}
	return w
}

// LockKey returns user's lock ("" when the workload is off).
func (s *Sim) LockKey(user string) string {
	if s.o.Locks.Prefix == "" {
		return ""
	}
	return s.o.Locks.Prefix + "{" + user + "}"
}

func (w *lockWorkload) fill(t *Truth, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	lt := &LockTruth{
		TTLSeconds: w.o.TTL.Seconds(), MaxHoldSeconds: w.o.MaxHold.Seconds(), Users: map[string]string{},
		Acquires: w.acquires, Refused: w.refused, Released: w.released, Expired: w.expired,
		Used: map[string]int64{}, HeldSeconds: map[string]float64{},
		ZombieUsers: map[string]int64{}, FutureUsers: map[string]int64{}, NoTTLUsers: map[string]int64{},
		ExpiredUsers: maps.Clone(w.expiredUsers),
	}
	for _, h := range w.holders {
		lt.Users[h.user] = h.mode
		if h.token == "" {
			continue
		}
		noTTL := h.expires.IsZero()
		if !noTTL && !h.expires.After(now) {
			// The lease ran out; its holder has not noticed yet.
			lt.Expired++
			lt.ExpiredUsers[h.user]++
			continue
		}
		lt.Held++
		lt.Used[h.user] = 1
		lt.HeldSeconds[h.user] = now.Sub(h.acquired).Seconds()
		if noTTL {
			lt.WithoutTTL++
			lt.NoTTLUsers[h.user] = 1
		}
		switch {
		case !noTTL && h.expires.Sub(now) > w.o.TTL+w.o.ClockSkewTolerance:
			lt.Future++
			lt.FutureUsers[h.user] = 1
		case now.Sub(h.acquired) > w.o.MaxHold:
			lt.Zombie++
			lt.ZombieUsers[h.user] = 1
		default:
			lt.Live++
		}
	}
	t.Locks = lt
	t.Errors += w.errors
}
