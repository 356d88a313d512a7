package redisread

import (
	"context"
	"fmt"
	"math"
	"time"

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

// ScanPage is how many keys one SCAN of the plan asks for: ScanCount,
// and under a key budget or the pace no more than a chunk of reads. One
// SCAN COUNT 1000 holds Redis for about a millisecond (1.0-1.3 ms in
// `make bench`'s change-driven phases, 1M slot sets), which is what other
// clients' p99 sees.
func (p *Plan) ScanPage() int64 { return min(p.ScanCount, int64(p.chunk())) }

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
// pacedChunk again. Larger batches cost hardly less and hold Redis longer:
// reading with ZSCAN, 1M sets, 600 against 300 in turn, Redis spent 1.20
// µs a key outside its commands against 1.31 (means of 5 and 3), where
// its CPU a key in all drifted between 4.3 and 5.2 µs from run to run.
// Nor do bursts pay: 10,000 keys prepaid and read back to back, in SCAN
// pages of 1000 and batches of 300 or of 1000, so that Redis idles less
// often, against this (BenchmarkFirstPicture -first-picture-probe, 1M
// sets, the three in turn in one process, 10 runs): Redis's CPU a key
// moved with the machine (4.9-7.2 µs, the probe's included, in all three)
// while a GET every ms saw its p99 rise from 1.25-1.37 ms to 1.72-2.09
// (batches of 300) and 1.86-2.38 (1000), its largest from 5-8 ms to 11.
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
	if p.throttled() {
		return 1
	}
	return readDepth
}

// throttled: the reads go at a key budget or the CPU pace.
func (p *Plan) throttled() bool { return p.Budget != nil || p.Pace != nil }

// onDemand: SCAN pages are scanned when the reads ask for them. Under the
// CPU pace alone: a key budget (sampling.max_keys_per_second) is a hard
// cap, and a page's keys past what was paid for before it wait for it.
func (p *Plan) onDemand() bool { return p.Pace != nil && p.Budget == nil }

// Under the pace, SCAN is not run ahead: the reads wait for a chunk of
// the pace, then ask for a page, and read it whole as soon as SCAN returns
// it (prepaid). Redis then finds the keys' entries where SCAN has just
// left them, in its caches; SCAN pages ahead of the reads, a pace's wait
// before them, left them cold. BenchmarkFirstPicture, 1M slot sets, a
// quiet two-core machine, the two builds run in turn, 2 runs each:
// ZRANGE 2.0-2.1 µs a key against 2.5-3.4 (1.6-1.8 in an unpaced deep
// pipeline), SCAN 1.55-1.6 against 1.3-1.7 (it now wakes Redis), Redis's
// CPU a key in all 4.9-5.2 µs against 5.1-7.0, the first picture 48-51 s
// against 52-66. Lists of keys (the change feed's) have no SCAN to follow.

// wait spends n keys of the budget and of the pace, in pieces no larger
// than their bursts. They are counted as Spent once the wait is over,
// when they go to Redis: counted before it, keys that waited out the
// pacer's held second were taken for reads made during it, and their
// assumed cost came off the baseline it measures.
func (p *Plan) wait(ctx context.Context, n int) error {
	if err := p.take(ctx, n); err != nil {
		return err
	}
	p.spend(n)
	return nil
}

// spend counts n keys as Spent as they go to Redis.
func (p *Plan) spend(n int) {
	if p.Spent != nil {
		p.Spent(n)
	}
}

// prepaid is a throttled SCAN's keys taken from the budget and the pace
// before its page was asked for (see above), and not yet read. A page
// may hold fewer of the plan's keys than a chunk (a keyspace of other
// keys too): what it leaves over goes to the next.
type prepaid struct {
	p *Plan
	n int
	// scanning: the last page held none of the plan's keys, and SCAN
	// goes on to the next without being asked.
	scanning bool
}

// next asks for the next page, if pages come on demand, after waiting for
// a chunk of keys, and takes it; false once there are no more.
func (pp *prepaid) next(ctx context.Context, pages <-chan page, ask chan<- struct{}) (page, bool, error) {
	if ask != nil && !pp.scanning {
		if need := pp.p.chunk() - pp.n; need > 0 {
			if err := pp.p.take(ctx, need); err != nil {
				return page{}, false, err
			}
			pp.n += need
		}
		select {
		case ask <- struct{}{}:
		default:
		}
	}
	pg, ok := <-pages
	pp.scanning = ok && pg.scan && len(pg.keys) == 0
	return pg, ok, nil
}

// chargeScan charges the pace for the keys a SCAN of count passed over,
// kept of them: they cost Redis all the same. A page that brings keys to
// read leaves the charge to the reads' next wait, so that they still
// follow their SCAN at once; a page that brings none waits for it before
// the next SCAN. Uncharged, a family whose pattern matches few keys of a
// large keyspace SCANned it unpaced, back to back (4,954 SCANs in 3 s for
// a few families matching nothing: 12.4% of a core where the share was
// 10).
func (p *Plan) chargeScan(ctx context.Context, count int64, kept int) error {
	n := (int(count) - kept) / scanVisitsPerKey
	if n <= 0 {
		return nil
	}
	if kept > 0 {
		p.owe(n)
	} else if err := p.take(ctx, n); err != nil {
		return err
	}
	p.spend(n)
	return nil
}

// scanVisitsPerKey is how many keys a SCAN passes over for the price of a
// key read: Redis 7.0, 200k keys of which none matched, SCAN COUNT 40
// spent 0.79 µs a key inside the command (about 0.9 with its socket work),
// where a paced first read costs Redis 3.7-5.0 µs a key in all.
const scanVisitsPerKey = 4

// wait is Plan.wait for n keys of a page, less what was prepaid. A page
// asked for is read without a wait between its SCAN and its reads: what
// it holds beyond the prepaid is owed, and the next page waits for it.
func (pp *prepaid) wait(ctx context.Context, n int, asked bool) error {
	use := min(n, pp.n)
	pp.n -= use
	if asked {
		pp.p.owe(n - use)
	} else if err := pp.p.take(ctx, n-use); err != nil {
		return err
	}
	pp.p.spend(n)
	return nil
}

// chunk is how many keys of a page of n go to Redis at once: a page asked
// for goes whole, unless it is over twice the chunk (SCAN COUNT is the
// chunk, and a page is seldom much larger). Split, its rest would wait
// for the pace after its SCAN, or go as a batch of a few keys, each of
// which wakes Redis for its fixed price.
func (pp *prepaid) chunk(n int, asked bool) int {
	c := pp.p.chunk()
	if asked && n <= 2*c {
		return n
	}
	return c
}

// owe takes n keys from the pace (and a budget) without waiting: the
// next wait is that much longer.
func (p *Plan) owe(n int) {
	for _, l := range []*rate.Limiter{p.Budget, p.Pace} {
		if l == nil {
			continue
		}
		for left := n; left > 0; {
			k := min(left, l.Burst())
			if l.ReserveN(time.Now(), k).OK() {
				left -= k
			} else if k <= 1 {
				break
			}
		}
	}
}

// take waits for n keys of the budget and of the pace, in pieces no
// larger than their bursts.
func (p *Plan) take(ctx context.Context, n int) error {
	if p.Waited != nil {
		defer func(start time.Time) { p.Waited.Add(int64(time.Since(start))) }(time.Now())
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
