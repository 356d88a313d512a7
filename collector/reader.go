package collector

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"

	"github.com/slotexporter/slot_exporter/config"
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
	members []slotMember
	// oversized sets are counted with ZCOUNT instead of being read.
	oversized bool
	counts    [numStates]int64

	// counters
	value int64
}

// slotMember is one member of a slot set as read: the member is only
// known by its hash (memberHash of key and member), computed as the reply
// is read, so that no string is made per member.
type slotMember struct {
	Hash  uint64
	Score float64 // in the key's own score unit
}

// readDepth is how many batches of reads are in flight on a raw
// connection: later batches wait in Redis while the exporter parses the
// earliest one, so Redis is not left idle when the exporter is slow to be
// scheduled. Two were enough in theory; four measured about 10% faster at
// 1M keys on two cores shared with Redis. The cost is Redis's output
// buffer for that many batches' replies.
const readDepth = 4

// readPlan is what a family needs from Redis for each key.
type readPlan struct {
	kind       string // config.KindSlotSet or config.KindCounter
	match      string
	scanCount  int64
	maxMembers int64
	budget     *rate.Limiter // nil: unbounded
}

// scanNode SCANs one node for the family's keys and reads them in pipelined
// batches. SCAN runs ahead on its own connection, a few pages in advance,
// so its round trips overlap the reads. Batches of results go to out; the
// first error ends the scan and is returned.
func scanNode(ctx context.Context, c redis.Cmdable, p *readPlan, zc *zcountPlan, out chan<- []keyRead) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pages := make(chan []string, 4)
	scanErr := make(chan error, 1)
	// Under a key budget a SCAN page is no bigger than a chunk of reads:
	// one SCAN COUNT 1000 holds Redis for about a millisecond, which is
	// what other clients' p99 sees.
	count := min(p.scanCount, int64(p.chunk()))
	go func() {
		defer close(pages)
		var cursor uint64
		for {
			keys, next, err := c.Scan(ctx, cursor, p.match, count).Result()
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
	var err error
	if cl := rawClient(c); cl != nil && p.kind != config.KindCounter {
		err = readPagesRaw(ctx, cl, c, p, zc, pages, out)
	} else {
		err = readPages(ctx, c, p, zc, pages, out)
	}
	if err != nil {
		return err
	}
	return <-scanErr
}

// readPages reads each page through go-redis, one batch at a time.
func readPages(ctx context.Context, c redis.Cmdable, p *readPlan, zc *zcountPlan, pages <-chan []string, out chan<- []keyRead) error {
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
	return nil
}

// readPagesRaw reads slot sets over a raw connection with readDepth
// batches in flight.
func readPagesRaw(ctx context.Context, cl *redis.Client, c redis.Cmdable, p *readPlan, zc *zcountPlan, pages <-chan []string, out chan<- []keyRead) error {
	conn, err := getResp(ctx, cl)
	if err != nil {
		return fmt.Errorf("sweep connection: %w", err)
	}
	var inflight [][]string
	defer func() {
		if len(inflight) > 0 {
			conn.broken = true // replies left unread
		}
		putResp(cl, conn)
	}()
	recv := func() error {
		keys := inflight[0]
		reads, err := recvBatch(ctx, conn, c, p, zc, keys)
		if err != nil {
			return err
		}
		inflight = inflight[1:]
		select {
		case out <- reads:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for page := range pages {
		for len(page) > 0 {
			keys := page[:min(len(page), p.chunk())]
			page = page[len(keys):]
			if err := p.wait(ctx, len(keys)); err != nil {
				return err
			}
			if err := conn.sendSlotReads(ctx, keys, p.maxMembers); err != nil {
				return err
			}
			inflight = append(inflight, keys)
			if len(inflight) >= readDepth {
				if err := recv(); err != nil {
					return err
				}
			}
		}
	}
	for len(inflight) > 0 {
		if err := recv(); err != nil {
			return err
		}
	}
	return nil
}

func recvBatch(ctx context.Context, conn *respConn, c redis.Cmdable, p *readPlan, zc *zcountPlan, keys []string) ([]keyRead, error) {
	reads := make([]keyRead, len(keys))
	big, err := conn.recvSlotReads(ctx, keys, p.maxMembers, reads)
	if err != nil {
		return nil, err
	}
	if len(big) > 0 {
		if err := countOversized(ctx, c, zc, reads, big); err != nil {
			return nil, err
		}
	}
	return reads, nil
}

// chunk is how many keys go to Redis at once. Unbudgeted, a whole SCAN
// page. Under a key budget, about a millisecond's worth (at least 10), so
// that the reads reach Redis as a steady trickle rather than a page every
// few milliseconds that other clients would queue behind: at 100k keys/s
// this halved the p99 of concurrent GET/SET traffic in `make bench`.
func (p *readPlan) chunk() int {
	if p.budget == nil {
		return math.MaxInt
	}
	return max(int(p.budget.Limit())/1000, 10)
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

// readBatch reads one batch of keys in one round trip.
func readBatch(ctx context.Context, c redis.Cmdable, p *readPlan, zc *zcountPlan, keys []string) ([]keyRead, error) {
	if cl := rawClient(c); cl != nil && p.kind != config.KindCounter {
		conn, err := getResp(ctx, cl)
		if err != nil {
			return nil, fmt.Errorf("sweep connection: %w", err)
		}
		defer putResp(cl, conn)
		if err := conn.sendSlotReads(ctx, keys, p.maxMembers); err != nil {
			return nil, err
		}
		return recvBatch(ctx, conn, c, p, zc, keys)
	}
	reads := make([]keyRead, len(keys))
	pipe := c.Pipeline()
	switch p.kind {
	case config.KindCounter:
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
		digest := xxhash.New()
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
			r.members = make([]slotMember, len(members))
			for j, z := range members {
				m, _ := z.Member.(string)
				r.members[j] = slotMember{Hash: memberHash(digest, k, m), Score: z.Score}
			}
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
