package redisread

import (
	"context"
	"fmt"

	"github.com/cespare/xxhash/v2"
	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/resp"
)

// The raw path's reads of slot sets: one ZRANGE WITHSCORES and one PTTL per
// key, written into one buffer (resp.Conn.SendSlotReads) and parsed in
// place.

// recvSlotReads parses the replies to SendSlotReads for keys. Errors local
// to a key are classified on the key's read; any other failure leaves the
// connection broken.
func recvSlotReads(ctx context.Context, c *resp.Conn, keys []string, maxMembers int64, reads []KeyRead) ([]int, error) {
	stop, err := c.Deadline(ctx)
	defer stop()
	if err != nil {
		c.MarkBroken()
		return nil, err
	}
	slab := make([]Member, 0, len(keys)*2)
	var big []int
	d := xxhash.New()
	for i, k := range keys {
		r := &reads[i]
		r.Key = k
		d.Reset()
		_, _ = d.WriteString(k)
		_, _ = d.Write([]byte{0})
		start := len(slab)
		n, zerr, err := readZRange(c, d, &slab)
		if err != nil {
			return nil, c.Fail(ctx, err)
		}
		pttl, perr, err := c.ReadInt()
		if err != nil {
			return nil, c.Fail(ctx, err)
		}
		for _, e := range [][]byte{zerr, perr} {
			if e == nil {
				continue
			}
			if err := judgeError(r, string(e)); err != nil {
				c.MarkBroken() // the rest of the replies are unread
				return nil, err
			}
			break
		}
		if r.Status != OK {
			slab = slab[:start]
			continue
		}
		r.PTTL = pttl
		switch {
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
	return big, nil
}

// readZRange reads a ZRANGE WITHSCORES reply, appending its members to
// slab, each hashed as (key, 0, member) from the reply bytes: prefix has
// the key and the 0 written. An error reply is returned as errMsg.
func readZRange(c *resp.Conn, prefix *xxhash.Digest, slab *[]Member) (n int, errMsg []byte, err error) {
	n, errMsg, err = c.ReadZRangeLen()
	if err != nil || errMsg != nil {
		return 0, errMsg, err
	}
	for range n {
		d := *prefix
		score, err := c.ReadScored(&d)
		if err != nil {
			return 0, nil, err
		}
		*slab = append(*slab, Member{Hash: d.Sum64(), Score: score})
	}
	return n, nil, nil
}

// readPagesRaw reads slot sets over a raw connection with readDepth
// batches in flight.
func (rd *Reader) readPagesRaw(ctx context.Context, cl *redis.Client, c redis.Cmdable, p *Plan, z *ZSetReads, pos *Progress, pages <-chan page, ask chan<- struct{}, out chan<- []KeyRead) error {
	conn, err := rd.pool.Get(ctx, cl)
	if err != nil {
		return fmt.Errorf("sweep connection: %w", err)
	}
	type batch struct {
		keys []string
		at   int64
		pg   *page
		last bool
	}
	var inflight []batch
	defer func() {
		if len(inflight) > 0 {
			conn.MarkBroken() // replies left unread
		}
		rd.pool.Put(cl, conn)
	}()
	recv := func() error {
		keys := inflight[0].keys
		reads := make([]KeyRead, len(keys))
		big, err := recvSlotReads(ctx, conn, keys, z.MaxMembers, reads)
		if err != nil {
			return err
		}
		p.stamp(reads, inflight[0].at)
		if len(big) > 0 {
			if err := z.countOversized(ctx, c, reads, big); err != nil {
				return err
			}
		}
		b := inflight[0]
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
		for rest := pg.keys; len(rest) > 0; {
			keys := rest[:min(len(rest), pp.chunk(len(rest), ask != nil))]
			rest = rest[len(keys):]
			if err := pp.wait(ctx, len(keys), ask != nil); err != nil {
				return err
			}
			at := p.at()
			if err := conn.SendSlotReads(ctx, keys, z.MaxMembers); err != nil {
				return err
			}
			rd.slotReads.Add(uint64(len(keys)))
			inflight = append(inflight, batch{keys, at, &pg, len(rest) == 0})
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
