package collector

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"
)

// keyRead is what one pipelined read returned for one key.
type keyRead struct {
	key string
	// skip is set when the key cannot be used; skipReason says why.
	skip       bool
	skipReason int
	// missed is set when the key could not be read in this sweep for a
	// reason that says nothing about its members (it moved to another
	// cluster node mid-sweep): its members are carried, not ended.
	missed bool
	gone   bool // deleted between SCAN and the read

	// slot sets
	pttl    int64
	members []redis.Z
	// oversized sets are counted with ZCOUNT instead of being read.
	oversized bool
	counts    [numStates]int64

	// counters
	value int64
}

// readPlan is what a family needs from Redis for each key.
type readPlan struct {
	kind       string // config.KindSlotSet or config.KindCounter
	match      string
	scanCount  int64
	maxMembers int64
	budget     *rate.Limiter // nil: unbounded
}

// scanNode SCANs one node for the family's keys and reads them in pipelined
// batches. The next SCAN page is fetched while the current batch is read,
// so the two round trips overlap. Batches of results go to out; the first
// error ends the scan and is returned.
func scanNode(ctx context.Context, c redis.Cmdable, p *readPlan, zc *zcountPlan, out chan<- []keyRead) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pages := make(chan []string, 1)
	scanErr := make(chan error, 1)
	go func() {
		defer close(pages)
		var cursor uint64
		for {
			keys, next, err := c.Scan(ctx, cursor, p.match, p.scanCount).Result()
			if err != nil {
				scanErr <- fmt.Errorf("SCAN: %w", err)
				return
			}
			if len(keys) > 0 {
				select {
				case pages <- keys:
				case <-ctx.Done():
					scanErr <- ctx.Err()
					return
				}
			}
			if next == 0 {
				scanErr <- nil
				return
			}
			cursor = next
		}
	}()
	for keys := range pages {
		if err := p.wait(ctx, len(keys)); err != nil {
			return err
		}
		reads, err := readBatch(ctx, c, p, zc, keys)
		if err != nil {
			return err
		}
		select {
		case out <- reads:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return <-scanErr
}

// wait spends n keys of the budget, in pieces no larger than its burst.
func (p *readPlan) wait(ctx context.Context, n int) error {
	if p.budget == nil {
		return nil
	}
	b := p.budget.Burst()
	for n > 0 {
		k := min(n, b)
		if err := p.budget.WaitN(ctx, k); err != nil {
			return fmt.Errorf("key budget: %w", err)
		}
		n -= k
	}
	return nil
}

// zcountPlan holds the score bounds (in the key's own score unit) that split
// an oversized set into states without reading its members.
type zcountPlan struct {
	now, staleEdge, futureEdge string
}

func readBatch(ctx context.Context, c redis.Cmdable, p *readPlan, zc *zcountPlan, keys []string) ([]keyRead, error) {
	reads := make([]keyRead, len(keys))
	pipe := c.Pipeline()
	switch p.kind {
	case "counter":
		cmds := make([]*redis.StringCmd, len(keys))
		for i, k := range keys {
			cmds[i] = pipe.Get(ctx, k)
		}
		_, _ = pipe.Exec(ctx)
		for i, k := range keys {
			r := &reads[i]
			r.key = k
			v, err := cmds[i].Result()
			if err != nil {
				if err := classifyKeyErr(r, err); err != nil {
					return nil, err
				}
				continue
			}
			n, perr := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if perr != nil {
				r.skip, r.skipReason = true, SkipBadValue
				continue
			}
			r.value = n
		}
	default:
		zr := make([]*redis.ZSliceCmd, len(keys))
		pt := make([]*redis.DurationCmd, len(keys))
		for i, k := range keys {
			// Reading one member past the cap tells an oversized set
			// apart without a ZCARD, and bounds memory all the same.
			zr[i] = pipe.ZRangeWithScores(ctx, k, 0, p.maxMembers)
			pt[i] = pipe.PTTL(ctx, k)
		}
		_, _ = pipe.Exec(ctx)
		var big []int
		for i, k := range keys {
			r := &reads[i]
			r.key = k
			members, err := zr[i].Result()
			if err != nil {
				if err := classifyKeyErr(r, err); err != nil {
					return nil, err
				}
				continue
			}
			d, err := pt[i].Result()
			if err != nil {
				if err := classifyKeyErr(r, err); err != nil {
					return nil, err
				}
				continue
			}
			r.pttl = pttlMillis(d)
			if len(members) == 0 || r.pttl == -2 {
				r.gone = true
				continue
			}
			if int64(len(members)) > p.maxMembers {
				r.oversized = true
				big = append(big, i)
				continue
			}
			r.members = members
		}
		if len(big) > 0 {
			if err := countOversized(ctx, c, zc, reads, big); err != nil {
				return nil, err
			}
		}
	}
	return reads, nil
}

// countOversized splits each oversized set into expired, future and the
// rest with ZCOUNT. Without the members there is no first-seen time, so
// zombies cannot be told from live slots; stale ones can, by score.
func countOversized(ctx context.Context, c redis.Cmdable, zc *zcountPlan, reads []keyRead, idx []int) error {
	pipe := c.Pipeline()
	type q struct{ expired, stale, live, future *redis.IntCmd }
	qs := make([]q, len(idx))
	for j, i := range idx {
		k := reads[i].key
		qs[j] = q{
			expired: pipe.ZCount(ctx, k, "-inf", zc.now),
			stale:   pipe.ZCount(ctx, k, "("+zc.now, zc.staleEdge),
			live:    pipe.ZCount(ctx, k, "("+zc.staleEdge, zc.futureEdge),
			future:  pipe.ZCount(ctx, k, "("+zc.futureEdge, "+inf"),
		}
	}
	_, _ = pipe.Exec(ctx)
	for j, i := range idx {
		r := &reads[i]
		for st, cmd := range map[MemberState]*redis.IntCmd{StateExpired: qs[j].expired, StateStale: qs[j].stale, StateLive: qs[j].live, StateFuture: qs[j].future} {
			n, err := cmd.Result()
			if err != nil {
				if err := classifyKeyErr(r, err); err != nil {
					return err
				}
				break
			}
			r.counts[st] = n
		}
	}
	return nil
}

// pttlMillis undoes go-redis's scaling: it returns PTTL's -1 ("no expiry")
// and -2 ("no key") as raw durations, everything else in milliseconds.
func pttlMillis(d time.Duration) int64 {
	if d < 0 {
		return int64(d)
	}
	return d.Milliseconds()
}

// classifyKeyErr decides whether an error reading one key is about that key
// (skip it, keep sweeping) or about the connection (fail the sweep).
func classifyKeyErr(r *keyRead, err error) error {
	switch {
	case errors.Is(err, redis.Nil):
		r.gone = true
		return nil
	case redis.HasErrorPrefix(err, "WRONGTYPE"):
		r.skip, r.skipReason = true, SkipWrongType
		return nil
	}
	if _, ok := redis.IsMovedError(err); ok {
		r.missed = true
		return nil
	}
	if _, ok := redis.IsAskError(err); ok {
		r.missed = true
		return nil
	}
	if redis.HasErrorPrefix(err, "TRYAGAIN") {
		r.missed = true
		return nil
	}
	return fmt.Errorf("reading %q: %w", r.key, err)
}
