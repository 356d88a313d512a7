package redisread

import (
	"context"
	"fmt"
	"math"

	"golang.org/x/time/rate"
)

// chunk is how many keys go to Redis at once. Unbudgeted, a whole SCAN
// page. Under a key budget, about a millisecond's worth (at least 10), so
// that the reads reach Redis as a steady trickle rather than a page every
// few milliseconds that other clients would queue behind: at 100k keys/s
// this halved the p99 of concurrent GET/SET traffic in `make bench`.
// Under the CPU pace, at least pacedChunk (firstPacedChunk for a first
// read).
func (p *Plan) chunk() int {
	n := math.MaxInt
	if p.Budget != nil {
		n = min(n, max(limitInt(p.Budget)/1000, 10))
	}
	if p.Pace != nil {
		least := pacedChunk
		if p.First {
			least = firstPacedChunk
		}
		n = min(n, max(limitInt(p.Pace)/1000, least))
	}
	return n
}

// pacedChunk is the smallest batch the CPU pace sends, and so how long
// Redis's other clients can queue behind one: an application's p99 rises
// by about a batch's time once the exporter keeps Redis busy for more
// than 1% of it (at a tenth of a core it does). 40 slot sets' ZRANGE and
// PTTL hold Redis about 0.3 ms (7.5 µs a key paced, Redis 7.0 on this
// two-core machine), inside the 0.5 ms the p99 may rise. The cost per key
// hardly depends on the batch: 7.1-7.6 µs at 40 keys, 7.5-7.8 at 100,
// 7.1-7.3 at 1000 (BenchmarkFirstPicture, 200k sets, a busy machine,
// where Redis is seldom idle; see firstPacedChunk for a quiet one);
// what a batch does cost is a round trip, which at 40 keys and one batch
// in flight bounds the reads near the pace on a busy machine.
const pacedChunk = 40

// firstPacedChunk is the batch of a first read. Each batch that wakes an
// idle Redis costs it a fixed price beside its keys, so small batches
// cost more a key: BenchmarkFirstPicture, 300k slot sets, a quiet
// two-core machine, Redis's CPU a key over the whole first read: 9.5-10.1
// µs at 100, 6.5 at 300, 6.0-6.3 at 500, 5.5-6.4 at 1000 (4.4 unpaced).
// A first read at 300 costs Redis a third less; at 300k sets it came in
// 21.4 s against 24.1 (medians of 3), the pace not yet its bound. Each
// batch holds Redis about 2 ms (300 keys at 6.5 µs), which other clients
// see in their p99 until the first picture; after it the batches are
// pacedChunk again. Larger batches cost hardly less and hold Redis longer.
const firstPacedChunk = 300

// limitInt is l's rate as an int, an unlimited one as the largest.
func limitInt(l *rate.Limiter) int {
	if r := float64(l.Limit()); r < math.MaxInt32 {
		return int(r)
	}
	return math.MaxInt32
}

// depth is how many batches are in flight on a raw connection. Under a
// budget or pace, one: batches that wait in Redis's input buffer are
// executed back to back, and every other client queues behind all of
// them; one chunk at a time still reads far faster than any pace asks.
func (p *Plan) depth() int {
	if p.Budget != nil || p.Pace != nil {
		return 1
	}
	return readDepth
}

// wait spends n keys of the budget and of the pace, in pieces no larger
// than their bursts. They are counted as Spent once the wait is over,
// when they go to Redis: counted before it, keys that waited out the
// pacer's held second were taken for reads made during it, and their
// assumed cost came off the baseline it measures.
func (p *Plan) wait(ctx context.Context, n int) (err error) {
	if p.Spent != nil {
		defer func() {
			if err == nil {
				p.Spent(n)
			}
		}()
	}
	for _, l := range []struct {
		lim  *rate.Limiter
		name string
	}{{p.Budget, "key budget"}, {p.Pace, "Redis CPU pace"}} {
		if l.lim == nil {
			continue
		}
		for left := n; left > 0; {
			k := min(left, l.lim.Burst())
			if err := l.lim.WaitN(ctx, k); err != nil {
				if _, ok := ctx.Deadline(); ok && ctx.Err() == nil && k <= l.lim.Burst() {
					// WaitN refuses at once a wait that would end past
					// the deadline. The read is cut off at the deadline
					// all the same, and ends there as one cut off while
					// waiting does: a sweep that goes on in its next
					// attempt, not a failed one.
					<-ctx.Done()
				}
				if ctx.Err() != nil {
					return fmt.Errorf("%s: %w", l.name, ctx.Err())
				}
				// The pace moves its burst as it measures: a piece cut
				// to the old burst is tried again at the new one.
				if k <= 1 {
					return fmt.Errorf("%s: %w", l.name, err)
				}
				continue
			}
			left -= k
		}
	}
	return nil
}
