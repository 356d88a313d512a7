package redisread

import (
	"context"
	"fmt"
	"io"

	"github.com/cespare/xxhash/v2"
	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/resp"
)

// The raw path's reads of slot sets: one ZSCAN key 0 COUNT 2(max+1) and
// one PTTL per key, written into one buffer (resp.Conn.SendSlotReads) and
// parsed in place.
//
// ZSCAN, not ZRANGE WITHSCORES: a small set's ZSCAN gives each score as
// Redis stores it, while ZRANGE prints every score as a double, which
// Redis 7.0 does with snprintf("%.17g"). Measured on 1M sets of 1.6
// UUID-shaped members with ms scores, read in a random order 40 keys to a
// round trip (the change-driven reads' shape), the two in turn 4 times:
// Redis's CPU a key 2.82-3.00 µs against 3.22-3.42, inside the command
// 1.55-1.65 µs against 1.81-1.97. A paced first read of 1M sets
// (BenchmarkFirstPicture, the two in turn 3 times on a machine whose speed
// drifted between runs) cost Redis less in each pair: 3.98, 3.99 and 5.00
// µs a key against 4.13, 5.08 and 5.96. ZSCAN gives a set whole in one reply when it is small
// (listpack, every member in order) or when COUNT's buckets reach the end
// of its hash table; a set it cannot give whole is read again with
// ZRANGE, as is every set when the ACL refuses ZSCAN (an ACL written for
// an older release).

// recvSlotReads parses the replies to SendSlotReads for keys. Errors local
// to a key are classified on the key's read; any other failure leaves the
// connection broken. It returns the keys to count by score range (big),
// and the keys to read again with ZRANGE (again).
func (rd *Reader) recvSlotReads(ctx context.Context, c *resp.Conn, keys []string, maxMembers int64, byRange bool, reads []KeyRead) (big, again []int, err error) {
	stop, err := c.Deadline(ctx)
	defer stop()
	if err != nil {
		c.MarkBroken()
		return nil, nil, err
	}
	slab := make([]Member, 0, len(keys)*2)
	d := xxhash.New()
	for i, k := range keys {
		r := &reads[i]
		r.Key = k
		d.Reset()
		_, _ = d.WriteString(k)
		_, _ = d.Write([]byte{0})
		start := len(slab)
		n, more, zerr, err := readSlotMembers(c, d, byRange, maxMembers, &slab)
		if err != nil {
			return nil, nil, c.Fail(ctx, err)
		}
		pttl, perr, err := c.ReadInt()
		if err != nil {
			return nil, nil, c.Fail(ctx, err)
		}
		if zerr != nil && !byRange && CommandRefused(string(zerr)) {
			rd.refuseZScan(string(zerr))
			again = append(again, i)
			continue
		}
		for _, e := range [][]byte{zerr, perr} {
			if e == nil {
				continue
			}
			if err := judgeError(r, string(e)); err != nil {
				c.MarkBroken() // the rest of the replies are unread
				return nil, nil, err
			}
			break
		}
		if r.Status != OK {
			slab = slab[:start]
			continue
		}
		r.PTTL = pttl
		switch {
		case more && int64(n) <= maxMembers:
			// A hash table far larger than its members (a set that
			// shrank): COUNT's buckets did not reach its end.
			again = append(again, i)
			slab = slab[:start]
		case n == 0 || pttl == -2:
			r.Status = Gone
			slab = slab[:start]
		case int64(n) > maxMembers:
			r.Oversized = true
			slab = slab[:start]
			big = append(big, i)
		default:
			r.Members = slab[start:len(slab):len(slab)]
		}
	}
	return big, again, nil
}

// readSlotMembers reads a ZSCAN (with byRange, ZRANGE WITHSCORES) reply,
// appending its members to slab, each hashed as (key, 0, member) from the
// reply bytes: prefix has the key and the 0 written. n is how many the
// reply held; past maxMembers+1 they are read but not kept (a small set's
// ZSCAN gives all of its members, whatever COUNT says). more: ZSCAN's
// cursor says the set has more. An error reply is returned as errMsg.
func readSlotMembers(c *resp.Conn, prefix *xxhash.Digest, byRange bool, maxMembers int64, slab *[]Member) (n int, more bool, errMsg []byte, err error) {
	n, more, errMsg, err = c.ReadSlotHead(byRange)
	if err != nil || errMsg != nil {
		return 0, false, errMsg, err
	}
	for j := range n {
		if int64(j) > maxMembers {
			if _, err := c.ReadScored(io.Discard); err != nil {
				return 0, false, nil, err
			}
			continue
		}
		d := *prefix
		score, err := c.ReadScored(&d)
		if err != nil {
			return 0, false, nil, err
		}
		*slab = append(*slab, Member{Hash: d.Sum64(), Score: score})
	}
	return n, more, nil, nil
}

// readPagesRaw reads slot sets over a raw connection with readDepth
// batches in flight.
func (rd *Reader) readPagesRaw(ctx context.Context, cl *redis.Client, c redis.Cmdable, p *Plan, z *ZSetReads, pos *Progress, pages <-chan page, ask chan<- struct{}, out chan<- []KeyRead) error {
	conn, err := rd.pool.Get(ctx, cl)
	if err != nil {
		return fmt.Errorf("sweep connection: %w", err)
	}
	type batch struct {
		keys    []string
		at      int64
		pg      *page
		last    bool
		byRange bool
	}
	var inflight []batch
	defer func() {
		if len(inflight) > 0 {
			conn.MarkBroken() // replies left unread
		}
		rd.pool.Put(cl, conn)
	}()
	recv := func() error {
		b := inflight[0]
		reads := make([]KeyRead, len(b.keys))
		big, again, err := rd.recvSlotReads(ctx, conn, b.keys, z.MaxMembers, b.byRange, reads)
		if err != nil {
			return err
		}
		p.stamp(reads, b.at)
		if len(big) > 0 {
			if err := z.countOversized(ctx, c, reads, big); err != nil {
				return err
			}
		}
		if len(again) > 0 {
			if err := p.readAgain(ctx, c, reads, again); err != nil {
				return err
			}
		}
		inflight = inflight[1:]
		select {
		case out <- reads:
			pos.handed(b.pg, b.keys, b.last)
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	pp := prepaid{p: p}
	for {
		pg, ok, err := pp.next(ctx, pages, ask)
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		if len(pg.keys) == 0 {
			// Recorded once every page before it is.
			for len(inflight) > 0 {
				if err := recv(); err != nil {
					return err
				}
			}
			pos.handed(&pg, nil, true)
			continue
		}
		for rest := pg.keys; len(rest) > 0; {
			keys := rest[:min(len(rest), pp.chunk(len(rest), ask != nil))]
			rest = rest[len(keys):]
			if err := pp.wait(ctx, len(keys), ask != nil); err != nil {
				return err
			}
			at := p.at()
			byRange := rd.byRange()
			if err := conn.SendSlotReads(ctx, keys, z.MaxMembers, byRange); err != nil {
				return err
			}
			if byRange {
				rd.rangeReads.Add(uint64(len(keys)))
			} else {
				rd.scanReads.Add(uint64(len(keys)))
			}
			inflight = append(inflight, batch{keys, at, &pg, len(rest) == 0, byRange})
			if len(inflight) >= p.depth() {
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

// readAgain reads the keys at idx of reads again through go-redis
// (Plan.read: ZRANGE and PTTL, and ZCOUNT for an oversized one), in
// place.
func (p *Plan) readAgain(ctx context.Context, c redis.Cmdable, reads []KeyRead, idx []int) error {
	keys := make([]string, len(idx))
	for j, i := range idx {
		keys[j] = reads[i].Key
	}
	sub, err := p.read(ctx, c, keys)
	if err != nil {
		return err
	}
	for j, i := range idx {
		reads[i] = sub[j]
	}
	return nil
}
