package redisread

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"
)

// Reads is what a family reads for each of its keys: a kind's choice.
type Reads interface {
	// Read reads keys with c in as few round trips as it can, filling
	// reads[i] for keys[i]. An error about one key is marked on its
	// KeyRead (see judgeError); a returned error is about the connection
	// or the server, and fails the sweep.
	Read(ctx context.Context, c redis.Cmdable, keys []string, reads []KeyRead) error
}

// Plan is what a family needs from Redis in one sweep.
type Plan struct {
	Match     string // SCAN MATCH pattern
	ScanCount int64
	// Budget bounds keys read per second; nil is unbounded. It belongs to
	// the family, not the sweep, so that it holds across sweeps and
	// reloads.
	Budget *rate.Limiter
	Reads  Reads
}

// readDepth is how many batches of reads are in flight on a raw
// connection: later batches wait in Redis while the exporter parses the
// earliest one, so Redis is not left idle when the exporter is slow to be
// scheduled. Two were enough in theory; four measured about 10% faster at
// 1M keys on two cores shared with Redis. The cost is Redis's output
// buffer for that many batches' replies.
const readDepth = 4

// Reader reads keys for the families of one sweeper. It owns the raw
// connections of the fast path for slot sets, which close with it.
type Reader struct {
	pool respPool
}

// NewReader returns a reader. readOnly is set when the keys are read from
// cluster replicas: raw connections then send READONLY, as go-redis's own
// node connections do.
func NewReader(readOnly bool) *Reader {
	return &Reader{pool: respPool{readOnly: readOnly}}
}

// Close closes the idle raw connections.
func (rd *Reader) Close() { rd.pool.close() }

// ScanNode SCANs one node for the plan's keys and reads them in pipelined
// batches. SCAN runs ahead on its own connection, a few pages in advance,
// so its round trips overlap the reads. Batches of results go to out; the
// first error ends the scan and is returned.
func (rd *Reader) ScanNode(ctx context.Context, c redis.Cmdable, p *Plan, out chan<- []KeyRead) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pages := make(chan []string, 4)
	scanErr := make(chan error, 1)
	// Under a key budget a SCAN page is no bigger than a chunk of reads:
	// one SCAN COUNT 1000 holds Redis for about a millisecond, which is
	// what other clients' p99 sees.
	count := min(p.ScanCount, int64(p.chunk()))
	go func() {
		defer close(pages)
		var cursor uint64
		for {
			keys, next, err := c.Scan(ctx, cursor, p.Match, count).Result()
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
	if err := rd.readPages(ctx, c, p, pages, out); err != nil {
		return err
	}
	return <-scanErr
}

// ReadKeys reads a list of known keys (from notifications, or keys that
// moved between cluster nodes) in batches of scan_count, the way ScanNode
// reads SCAN pages.
func (rd *Reader) ReadKeys(ctx context.Context, c redis.Cmdable, p *Plan, keys []string, out chan<- []KeyRead) error {
	step := int(p.ScanCount)
	if step < 1 {
		step = 1000
	}
	pages := make(chan []string)
	go func() {
		defer close(pages)
		for i := 0; i < len(keys); i += step {
			select {
			case pages <- keys[i:min(i+step, len(keys))]:
			case <-ctx.Done():
				return
			}
		}
	}()
	err := rd.readPages(ctx, c, p, pages, out)
	for range pages { // let the feeder finish on an early error
	}
	if err == nil {
		err = ctx.Err()
	}
	return err
}

// readPages reads pages of keys into out. Slot sets on a plain client go
// over a raw connection with readDepth batches in flight; everything else
// through go-redis, one pipelined batch at a time.
func (rd *Reader) readPages(ctx context.Context, c redis.Cmdable, p *Plan, pages <-chan []string, out chan<- []KeyRead) error {
	if z, ok := p.Reads.(*ZSetReads); ok {
		if cl := rawClient(c); cl != nil {
			return rd.readPagesRaw(ctx, cl, c, p, z, pages, out)
		}
	}
	for page := range pages {
		for len(page) > 0 {
			keys := page[:min(len(page), p.chunk())]
			page = page[len(keys):]
			if err := p.wait(ctx, len(keys)); err != nil {
				return err
			}
			reads := make([]KeyRead, len(keys))
			if err := p.Reads.Read(ctx, c, keys, reads); err != nil {
				return err
			}
			select {
			case out <- reads:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return nil
}

// ReadBatch reads one batch of keys in one go, for callers that handle
// batches themselves.
func (rd *Reader) ReadBatch(ctx context.Context, c redis.Cmdable, p *Plan, keys []string) ([]KeyRead, error) {
	if err := p.wait(ctx, len(keys)); err != nil {
		return nil, err
	}
	reads := make([]KeyRead, len(keys))
	if err := p.Reads.Read(ctx, c, keys, reads); err != nil {
		return nil, err
	}
	return reads, nil
}

// readPagesRaw reads slot sets over a raw connection with readDepth
// batches in flight.
func (rd *Reader) readPagesRaw(ctx context.Context, cl *redis.Client, c redis.Cmdable, p *Plan, z *ZSetReads, pages <-chan []string, out chan<- []KeyRead) error {
	conn, err := rd.pool.get(ctx, cl)
	if err != nil {
		return fmt.Errorf("sweep connection: %w", err)
	}
	var inflight [][]string
	defer func() {
		if len(inflight) > 0 {
			conn.broken = true // replies left unread
		}
		rd.pool.put(cl, conn)
	}()
	recv := func() error {
		keys := inflight[0]
		reads := make([]KeyRead, len(keys))
		big, err := conn.recvSlotReads(ctx, keys, z.MaxMembers, reads)
		if err != nil {
			return err
		}
		if len(big) > 0 {
			if err := z.countOversized(ctx, c, reads, big); err != nil {
				return err
			}
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
			if err := conn.sendSlotReads(ctx, keys, z.MaxMembers); err != nil {
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

// chunk is how many keys go to Redis at once. Unbudgeted, a whole SCAN
// page. Under a key budget, about a millisecond's worth (at least 10), so
// that the reads reach Redis as a steady trickle rather than a page every
// few milliseconds that other clients would queue behind: at 100k keys/s
// this halved the p99 of concurrent GET/SET traffic in `make bench`.
func (p *Plan) chunk() int {
	if p.Budget == nil {
		return math.MaxInt
	}
	return max(int(p.Budget.Limit())/1000, 10)
}

// wait spends n keys of the budget, in pieces no larger than its burst.
func (p *Plan) wait(ctx context.Context, n int) error {
	if p.Budget == nil {
		return nil
	}
	b := p.Budget.Burst()
	for n > 0 {
		k := min(n, b)
		if err := p.Budget.WaitN(ctx, k); err != nil {
			return fmt.Errorf("key budget: %w", err)
		}
		n -= k
	}
	return nil
}

// PTTLMillis undoes go-redis's scaling: it returns PTTL's -1 ("no expiry")
// and -2 ("no key") as raw durations, everything else in milliseconds.
func PTTLMillis(d time.Duration) int64 {
	if d < 0 {
		return int64(d)
	}
	return d.Milliseconds()
}
