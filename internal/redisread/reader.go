package redisread

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"

	"github.com/slotexporter/slot_exporter/internal/resp"
	"github.com/slotexporter/slot_exporter/internal/topology"
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
	// Pace is the exporter-wide key rate that keeps its share of Redis's
	// CPU (nil: none); keys wait for both. Spent counts the keys it let
	// through.
	Pace  *rate.Limiter
	Spent func(n int)
	Reads Reads
	// Shard keeps the keys of one exporter's share (sampling.shard); the
	// others are dropped before they are read.
	Shard topology.Shard
	// Now is the sweep's Redis time (ms), and Start the exporter's clock
	// when Redis read it. When set, each key's PTTL is turned into its
	// remaining time at Now (see at): a key read seconds into a long,
	// paced sweep gets the expiry it really has, and a key that is not
	// read again can be advanced from it (KeyRead.At).
	Now   int64
	Start time.Time
	// First says that the family has published nothing yet: the pace
	// sends its reads in larger batches (firstPacedChunk), since a first
	// picture sooner is worth more than other clients' p99 for a while.
	First bool
	// Waited adds up how long the reads waited for the budget and the
	// pace (ns, summed over the nodes read at once; nil: not counted): a
	// sweep that overran its interval waiting on them is short of budget,
	// one that did not is held up by Redis.
	Waited *atomic.Int64
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
	pool *resp.Pool
	// scanReads and rangeReads count the slot sets read over raw
	// connections, each one ZSCAN (or ZRANGE) and one PTTL: the CPU pace
	// prices them from Redis's own INFO commandstats.
	scanReads, rangeReads atomic.Uint64
	// zscanRefused is when the ACL last refused a ZSCAN (Unix ns; 0:
	// never): slot sets are read with ZRANGE for zscanRetry after it, so
	// that a grant takes effect without a restart while a refusal costs
	// the ACL LOG one entry every zscanRetry.
	zscanRefused atomic.Int64
	zscanRetry   time.Duration
	warned       atomic.Bool
	// Warn (nil: none) is told, once, that the ACL refuses ZSCAN. Set
	// before the first read.
	Warn func(msg string, args ...any)
}

// zscanRetry is how long slot sets are read with ZRANGE after the ACL
// refused a ZSCAN.
const zscanRetry = 10 * time.Minute

// SlotReads counts the slot sets a Reader has read over raw connections,
// by the command that read their members; each had one PTTL too.
type SlotReads struct {
	ZScan, ZRange uint64
}

// SlotReads is how many slot sets the reader has read over raw
// connections.
func (rd *Reader) SlotReads() SlotReads {
	return SlotReads{ZScan: rd.scanReads.Load(), ZRange: rd.rangeReads.Load()}
}

// byRange: the raw reads go as ZRANGE, the ACL having refused ZSCAN less
// than zscanRetry ago.
func (rd *Reader) byRange() bool {
	at := rd.zscanRefused.Load()
	return at != 0 && time.Since(time.Unix(0, at)) < rd.zscanRetry
}

// refuseZScan turns the raw reads to ZRANGE for zscanRetry, and warns
// once.
func (rd *Reader) refuseZScan(msg string) {
	rd.zscanRefused.Store(time.Now().UnixNano())
	if !rd.warned.Swap(true) && rd.Warn != nil {
		rd.Warn("the ACL refuses ZSCAN: slot sets are read with ZRANGE, which costs Redis about 15% more CPU a key; grant +zscan (README, \"Redis permissions\")", "err", msg)
	}
}

// NewReader returns a reader. readOnly is set when the keys are read from
// cluster replicas: raw connections then send READONLY, as go-redis's own
// node connections do.
func NewReader(readOnly bool) *Reader {
	return &Reader{pool: resp.NewPool(readOnly), zscanRetry: zscanRetry}
}

// Close closes the idle raw connections.
func (rd *Reader) Close() { rd.pool.Close() }

// ScanNode SCANs one node for the plan's keys and reads them in pipelined
// batches. SCAN runs ahead on its own connection, a few pages in advance,
// so its round trips overlap the reads; under the CPU pace, one page at a
// time, when the reads ask for it (Plan.onDemand).
// Batches of results go to out; the first error ends the scan and is
// returned.
func (rd *Reader) ScanNode(ctx context.Context, c redis.Cmdable, p *Plan, out chan<- []KeyRead) error {
	return rd.ScanNodeFrom(ctx, c, p, nil, out)
}

// ScanNodeFrom is ScanNode going on from pos (nil: from the start,
// untracked), which it advances as batches go to out.
func (rd *Reader) ScanNodeFrom(ctx context.Context, c redis.Cmdable, p *Plan, pos *Progress, out chan<- []KeyRead) error {
	if pos != nil && pos.Done {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pages := make(chan page, 4)
	var ask chan struct{}
	if p.onDemand() {
		ask = make(chan struct{}, 1)
	}
	scanErr := make(chan error, 1)
	count := p.ScanPage()
	var cursor, sentUntil uint64
	var sent map[string]struct{}
	if pos != nil {
		// A copy: the reads add to pos.Sent as they hand batches over.
		cursor, sent, sentUntil = pos.Cursor, maps.Clone(pos.Sent), pos.SentUntil
	}
	go func() {
		defer close(pages)
		asked := false
		for {
			if ask != nil && !asked {
				select {
				case <-ask:
				case <-ctx.Done():
					scanErr <- ctx.Err()
					return
				}
			}
			keys, next, err := c.Scan(ctx, cursor, p.Match, count).Result()
			if err != nil {
				scanErr <- fmt.Errorf("SCAN: %w", err)
				return
			}
			if len(sent) > 0 {
				// The page a cut-off attempt was in the middle of, and
				// the pages it may have spread to since (Progress): its
				// keys handed over then are not read twice.
				keys = slices.DeleteFunc(keys, func(k string) bool { _, ok := sent[k]; return ok })
				if !scanBefore(next, sentUntil) {
					sent = nil
				}
			}
			// A page with none of the plan's keys was not asked
			// for: the reads still wait for one.
			asked = true
			keys = p.Shard.Filter(keys)
			if ask != nil {
				if err := p.chargeScan(ctx, count, len(keys)); err != nil {
					scanErr <- err
					return
				}
			}
			// A page without keys goes to the reads too, to be
			// recorded as passed: an attempt cut off among such pages
			// must not walk them again (a family that matches nothing
			// in a large keyspace would never get through it), and it
			// has moved on all the same (Progress.Pages).
			select {
			case pages <- page{keys: keys, scan: true, cursor: cursor, next: next}:
				asked = len(keys) == 0
			case <-ctx.Done():
				scanErr <- ctx.Err()
				return
			}
			if next == 0 {
				scanErr <- nil
				return
			}
			cursor = next
		}
	}()
	if err := rd.readPages(ctx, c, p, pos, pages, ask, out); err != nil {
		return err
	}
	err := <-scanErr
	if err == nil && pos != nil {
		// The last pages may have held none of the plan's keys.
		pos.Done, pos.Sent, pos.SentUntil = true, nil, 0
	}
	return err
}

// ReadKeys reads a list of known keys (from notifications, or keys that
// moved between cluster nodes) in batches of scan_count, the way ScanNode
// reads SCAN pages.
func (rd *Reader) ReadKeys(ctx context.Context, c redis.Cmdable, p *Plan, keys []string, out chan<- []KeyRead) error {
	return rd.ReadKeysFrom(ctx, c, p, keys, nil, out)
}

// ReadKeysFrom is ReadKeys going on from pos (nil: from the start,
// untracked): keys must be the same list each time.
func (rd *Reader) ReadKeysFrom(ctx context.Context, c redis.Cmdable, p *Plan, keys []string, pos *Progress, out chan<- []KeyRead) error {
	return rd.ReadListFrom(ctx, c, p, keySlice(keys), pos, out)
}

// KeyList is a list of key names to read. A sweep's changed keys are
// hundreds of thousands when the reads fall behind the writes: the list
// makes strings of a batch at a time, rather than holding one for every
// name (16 bytes each, beside the name).
type KeyList interface {
	Len() int
	At(i int) string
}

// keySlice is a KeyList of strings.
type keySlice []string

// Len is the number of keys.
func (k keySlice) Len() int { return len(k) }

// At is key i.
func (k keySlice) At(i int) string { return k[i] }

// ReadListFrom is ReadKeysFrom for a KeyList.
func (rd *Reader) ReadListFrom(ctx context.Context, c redis.Cmdable, p *Plan, keys KeyList, pos *Progress, out chan<- []KeyRead) error {
	if pos != nil && pos.Done {
		return nil
	}
	step := int(p.ScanCount)
	if step < 1 {
		step = 1000
	}
	if p.Shard.Count > 1 {
		owned := make([]string, 0, keys.Len()/p.Shard.Count)
		for i := range keys.Len() {
			if k := keys.At(i); p.Shard.Owns(k) {
				owned = append(owned, k)
			}
		}
		keys = keySlice(owned)
	}
	start := 0
	if pos != nil {
		start = min(pos.Offset, keys.Len())
	}
	pages := make(chan page)
	go func() {
		defer close(pages)
		for i := start; i < keys.Len(); i += step {
			pg := make([]string, min(step, keys.Len()-i))
			for j := range pg {
				pg[j] = keys.At(i + j)
			}
			select {
			case pages <- page{keys: pg}:
			case <-ctx.Done():
				return
			}
		}
	}()
	err := rd.readPages(ctx, c, p, pos, pages, nil, out)
	for range pages { // let the feeder finish on an early error
	}
	if err == nil {
		err = ctx.Err()
	}
	if err == nil && pos != nil {
		pos.Done = true
	}
	return err
}

// readPages reads pages of keys into out. Slot sets on a plain client go
// over a raw connection with readDepth batches in flight; everything else
// through go-redis, one pipelined batch at a time.
//
// pos (nil: untracked) is advanced as each batch goes to out: what the
// caller has received is exactly what pos says was handed over.
//
// ask (nil: none) is the SCAN's, under the pace: each page is asked
// for once a chunk of keys is paid for, and read as soon as it comes
// (prepaid).
func (rd *Reader) readPages(ctx context.Context, c redis.Cmdable, p *Plan, pos *Progress, pages <-chan page, ask chan<- struct{}, out chan<- []KeyRead) error {
	if z, ok := p.Reads.(*ZSetReads); ok {
		if cl := resp.Client(c); cl != nil {
			return rd.readPagesRaw(ctx, cl, c, p, z, pos, pages, ask, out)
		}
	}
	pp := prepaid{p: p}
	for {
		pg, ok, err := pp.next(ctx, pages, ask)
		if err != nil || !ok {
			return err
		}
		if len(pg.keys) == 0 {
			pos.handed(&pg, nil, true)
			continue
		}
		for rest := pg.keys; len(rest) > 0; {
			keys := rest[:min(len(rest), pp.chunk(len(rest), ask != nil))]
			rest = rest[len(keys):]
			if err := pp.wait(ctx, len(keys), ask != nil); err != nil {
				return err
			}
			reads, err := rd.readBatch(ctx, c, p, keys)
			if err != nil {
				return err
			}
			select {
			case out <- reads:
			case <-ctx.Done():
				return ctx.Err()
			}
			pos.handed(&pg, keys, len(rest) == 0)
		}
	}
}

// ReadBatch reads one batch of keys in one go, for callers that handle
// batches themselves: keys that moved between a cluster's nodes mid-sweep.
// Through a cluster client it reads with go-redis, which follows MOVED and
// ASK (ASKING included) to wherever each key is by now; the raw reads by
// node would find a key of a slot being migrated redirected again.
func (rd *Reader) ReadBatch(ctx context.Context, c redis.Cmdable, p *Plan, keys []string) ([]KeyRead, error) {
	if err := p.wait(ctx, len(keys)); err != nil {
		return nil, err
	}
	if _, ok := c.(*redis.ClusterClient); ok {
		return p.read(ctx, c, keys)
	}
	return rd.readBatch(ctx, c, p, keys)
}

// read reads one batch through go-redis.
func (p *Plan) read(ctx context.Context, c redis.Cmdable, keys []string) ([]KeyRead, error) {
	reads := make([]KeyRead, len(keys))
	at := p.at()
	if err := p.Reads.Read(ctx, c, keys, reads); err != nil {
		return nil, err
	}
	p.stamp(reads, at)
	return reads, nil
}

// at is the Redis time (ms) at which a batch sent now reaches Redis, at
// the earliest: the sweep's TIME plus what the exporter's own monotonic
// clock says has passed since. A PTTL counted from it gives an expiry
// early by the batch's wait in Redis's queue (a millisecond or so), never
// late; no command is added to read it.
func (p *Plan) at() int64 {
	if p.Now == 0 {
		return 0
	}
	return p.Now + time.Since(p.Start).Milliseconds()
}

// stamp records that reads were read at Redis time at (ms), and turns
// their PTTLs into remaining times at p.Now. A key that was read at all
// still had its expiry ahead: never below 0.
func (p *Plan) stamp(reads []KeyRead, at int64) {
	if at == 0 {
		return
	}
	for i := range reads {
		r := &reads[i]
		r.At = p.Now
		if r.Status == OK && r.PTTL >= 0 {
			r.PTTL = max(r.PTTL+at-p.Now, 0)
		}
	}
}

// PTTLMillis undoes go-redis's scaling: it returns PTTL's -1 ("no expiry")
// and -2 ("no key") as raw durations, everything else in milliseconds.
func PTTLMillis(d time.Duration) int64 {
	if d < 0 {
		return int64(d)
	}
	return d.Milliseconds()
}
