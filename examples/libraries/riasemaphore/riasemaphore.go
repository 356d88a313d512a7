// Package riasemaphore is the fair counting semaphore of "Redis in Action"
// (Josiah Carlson, chapter 6.3), written in Go from the book's published
// algorithm so that slot_exporter can be tested against the layout that
// many hand-rolled semaphores copied from it:
//
//   - NAME, a sorted set: member = holder id, score = the Unix time in
//     seconds (a float) of its acquire or last refresh. Holders older than
//     the timeout are pruned with ZREMRANGEBYSCORE NAME -inf now-timeout.
//   - NAME:owner, a sorted set: member = holder id, score = a ticket from
//     NAME:counter. A holder owns a slot if its ticket ranks below the
//     limit, which makes acquisition fair across clients whose clocks
//     differ slightly.
//   - NAME:counter, a string: the ticket counter (INCR).
//
// None of the three keys is ever given a TTL: the sets empty themselves
// as holders are released or pruned, and the counter stays.
package riasemaphore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Semaphore is one named semaphore.
type Semaphore struct {
	rdb     redis.Cmdable
	name    string
	limit   int64
	timeout time.Duration
	// now is the client's clock: the book scores with the client's
	// time.time(), so a skewed client shows in the scores.
	now func() time.Time
}

// New returns the semaphore NAME with limit holders whose slots time out
// after timeout without a refresh.
func New(rdb redis.Cmdable, name string, limit int, timeout time.Duration) (*Semaphore, error) {
	switch {
	case name == "":
		return nil, errors.New("riasemaphore: empty name")
	case limit < 1:
		return nil, fmt.Errorf("riasemaphore: limit %d, want >= 1", limit)
	case timeout <= 0:
		return nil, fmt.Errorf("riasemaphore: timeout %v, want > 0", timeout)
	}
	return &Semaphore{rdb: rdb, name: name, limit: int64(limit), timeout: timeout, now: time.Now}, nil
}

// WithClock replaces the client clock, as a host whose clock is off.
func (s *Semaphore) WithClock(now func() time.Time) *Semaphore {
	c := *s
	c.now = now
	return &c
}

// Keys are the semaphore's three keys: the timeout set, the owner set
// and the ticket counter.
func (s *Semaphore) Keys() (timeouts, owners, counter string) {
	return s.name, s.name + ":owner", s.name + ":counter"
}

func seconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// Acquire tries once to take a slot. It returns the holder id, or "" when
// the semaphore is full.
func (s *Semaphore) Acquire(ctx context.Context) (string, error) {
	id, err := newID()
	if err != nil {
		return "", err
	}
	timeouts, owners, counter := s.Keys()
	now := seconds(s.now())

	// Step 1: drop timed-out holders from both sets and draw a ticket.
	var ticket *redis.IntCmd
	_, err = s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.ZRemRangeByScore(ctx, timeouts, "-inf", fmt.Sprint(now-s.timeout.Seconds()))
		// Keep in the owner set only the holders still in the timeout
		// set, with their ticket as score (weight 0 for the timeouts).
		p.ZInterStore(ctx, owners, &redis.ZStore{Keys: []string{owners, timeouts}, Weights: []float64{1, 0}})
		ticket = p.Incr(ctx, counter)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("riasemaphore: acquire %s: %w", s.name, err)
	}

	// Step 2: join both sets and see where the ticket ranks.
	var rank *redis.IntCmd
	_, err = s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.ZAdd(ctx, timeouts, redis.Z{Score: now, Member: id})
		p.ZAdd(ctx, owners, redis.Z{Score: float64(ticket.Val()), Member: id})
		rank = p.ZRank(ctx, owners, id)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("riasemaphore: acquire %s: %w", s.name, err)
	}
	if rank.Val() < s.limit {
		return id, nil
	}

	// Step 3: too late; leave both sets.
	if _, err := s.release(ctx, id); err != nil {
		return "", err
	}
	return "", nil
}

// Release gives the slot back. It reports whether the holder still had it
// (false: it had timed out and been pruned).
func (s *Semaphore) Release(ctx context.Context, id string) (bool, error) {
	return s.release(ctx, id)
}

func (s *Semaphore) release(ctx context.Context, id string) (bool, error) {
	timeouts, owners, _ := s.Keys()
	var removed *redis.IntCmd
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		removed = p.ZRem(ctx, timeouts, id)
		p.ZRem(ctx, owners, id)
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("riasemaphore: release %s: %w", s.name, err)
	}
	return removed.Val() == 1, nil
}

// Refresh moves the holder's score to now. A holder that had already been
// pruned is not resurrected: the book's refresh notices that its ZADD
// added a member, removes it again and reports the slot lost (false).
func (s *Semaphore) Refresh(ctx context.Context, id string) (bool, error) {
	timeouts, _, _ := s.Keys()
	added, err := s.rdb.ZAdd(ctx, timeouts, redis.Z{Score: seconds(s.now()), Member: id}).Result()
	if err != nil {
		return false, fmt.Errorf("riasemaphore: refresh %s: %w", s.name, err)
	}
	if added == 0 {
		return true, nil
	}
	if _, err := s.release(ctx, id); err != nil {
		return false, err
	}
	return false, nil
}

func newID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("riasemaphore: holder id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}
