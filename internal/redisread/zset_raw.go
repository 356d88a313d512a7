package redisread

import (
	"context"

	"github.com/cespare/xxhash/v2"

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
