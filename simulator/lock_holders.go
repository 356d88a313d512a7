package simulator

import (
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// The lock holders' behaviour.

func (w *lockWorkload) start() {
	for _, h := range w.holders {
		w.s.wg.Add(1)
		go w.run(h)
	}
}

func (w *lockWorkload) run(h *lockHolder) {
	defer w.s.wg.Done()
	s := w.s
	if !s.step(func() { w.check(s.c.Del(s.rctx, h.key).Err()) }) {
		return
	}
	if !s.sleep(time.Duration(h.rng.Float64() * float64(w.o.Idle))) {
		return
	}
	for {
		var ok bool
		switch h.mode {
		case LockZombie:
			ok = w.zombie(h)
		case LockNoTTL:
			w.noTTL(h)
			return // crashed, and stays dead: its lock stays for ever
		default:
			ok = w.hold(h)
		}
		if !ok || !s.sleep(jitter(h.rng, w.o.Idle)) {
			return
		}
	}
}

// acquire takes h's lock with a new token; false when it was held or on an
// error. withTTL false is the SET NX without PX.
func (w *lockWorkload) acquire(h *lockHolder, withTTL bool) (got, ran bool) {
	h.seq++
	token := fmt.Sprintf("%s-%s-%d", w.s.runID, h.user, h.seq)
	ran = w.s.step(func() {
		sent := time.Now()
		var err error
		if withTTL {
			got, err = h.lk.AcquireToken(w.s.rctx, h.key, token)
		} else {
			err = w.s.c.SetArgs(w.s.rctx, h.key, token, redis.SetArgs{Mode: "NX"}).Err()
			got = err == nil
			if errors.Is(err, redis.Nil) {
				err = nil
			}
		}
		if !w.check(err) {
			got = false
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if !got {
			w.refused++
			return
		}
		w.acquires++
		h.token, h.acquired, h.expires = token, sent, time.Time{}
		if withTTL {
			h.expires = sent.Add(h.lease)
		}
	})
	return got, ran
}

// extend renews h's lease; false when the lease was gone (the hold then
// ended, expired) or the simulation stopped.
func (w *lockWorkload) extend(h *lockHolder) (held, ran bool) {
	ran = w.s.step(func() {
		sent := time.Now()
		ok, err := h.lk.Extend(w.s.rctx, h.key, w.token(h))
		if !w.check(err) {
			held = true // unknown: try again at the next extend
			return
		}
		held = ok
		if ok {
			w.mu.Lock()
			h.expires = sent.Add(h.lease)
			w.mu.Unlock()
			return
		}
		w.end(h, false)
	})
	return held, ran
}

// release ends h's hold with the token-checked delete.
func (w *lockWorkload) release(h *lockHolder) bool {
	return w.s.step(func() {
		ok, err := h.lk.Release(w.s.rctx, h.key, w.token(h))
		if !w.check(err) {
			ok = false // the lease will run out
		}
		w.end(h, ok)
	})
}

// hold is one hold of a healthy, wrong-unit or killed holder. It returns
// false when the simulation stopped.
func (w *lockWorkload) hold(h *lockHolder) bool {
	got, ran := w.acquire(h, true)
	if !got {
		return ran
	}
	began := time.Now()
	end := began.Add(jitter(h.rng, w.o.Hold))
	death := time.Time{}
	if h.mode == LockKilled {
		death = began.Add(time.Duration(h.rng.Float64() * float64(end.Sub(began))))
	}
	every := w.o.TTL / 3
	next := began.Add(every)
	for {
		due := next
		if !death.IsZero() && death.Before(due) {
			due = death
		}
		if end.Before(due) {
			due = end
		}
		if !w.s.sleep(time.Until(due)) {
			return false
		}
		switch {
		case !death.IsZero() && !time.Now().Before(death):
			// Killed: the lease runs out by itself; then a new process starts.
			w.mu.Lock()
			expires := h.expires
			w.mu.Unlock()
			if !w.s.sleep(time.Until(expires)) {
				return false
			}
			w.end(h, false)
			return true
		case !time.Now().Before(end):
			return w.release(h)
		}
		if held, ran := w.extend(h); !held || !ran {
			return ran
		}
		next = time.Now().Add(every) // after a pause: no burst of extends
	}
}

// zombie acquires once and extends for ever; if its lease is lost (a long
// pause), it acquires again.
func (w *lockWorkload) zombie(h *lockHolder) bool {
	got, ran := w.acquire(h, true)
	if !got {
		return ran
	}
	for {
		if !w.s.sleep(w.o.TTL / 3) {
			return false
		}
		if held, ran := w.extend(h); !held || !ran {
			return ran
		}
	}
}

// noTTL takes the lock without a lease, holds it, and crashes.
func (w *lockWorkload) noTTL(h *lockHolder) {
	for {
		got, ran := w.acquire(h, false)
		if !ran || got {
			break
		}
		if !w.s.sleep(jitter(h.rng, w.o.Idle)) {
			return
		}
	}
	w.s.sleep(jitter(h.rng, w.o.Hold))
}

func (w *lockWorkload) token(h *lockHolder) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return h.token
}

// end closes h's hold: released by its holder, or expired.
func (w *lockWorkload) end(h *lockHolder, released bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if h.token == "" {
		return
	}
	if released {
		w.released++
	} else {
		w.expired++
		w.expiredUsers[h.user]++
	}
	h.token = ""
}

func (w *lockWorkload) check(err error) bool {
	if err == nil {
		return true
	}
	w.mu.Lock()
	w.errors++
	w.mu.Unlock()
	return false
}
