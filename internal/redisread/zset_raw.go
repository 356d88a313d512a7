package redisread

import (
	"context"
	"fmt"
	"strconv"

	"github.com/cespare/xxhash/v2"
)

// The raw path's reads of slot sets: one ZRANGE WITHSCORES and one PTTL per
// key, written into one buffer and parsed in place.

// sendSlotReads queues ZRANGE key 0 max WITHSCORES and PTTL key for every
// key and writes them.
func (c *respConn) sendSlotReads(ctx context.Context, keys []string, maxMembers int64) error {
	c.num = strconv.AppendInt(c.num[:0], maxMembers, 10)
	for _, k := range keys {
		c.wbuf = append(c.wbuf, "*5\r\n$6\r\nZRANGE\r\n"...)
		c.bulk(k)
		c.wbuf = append(c.wbuf, "$1\r\n0\r\n$"...)
		c.wbuf = strconv.AppendInt(c.wbuf, int64(len(c.num)), 10)
		c.wbuf = append(c.wbuf, '\r', '\n')
		c.wbuf = append(c.wbuf, c.num...)
		c.wbuf = append(c.wbuf, "\r\n$10\r\nWITHSCORES\r\n*2\r\n$4\r\nPTTL\r\n"...)
		c.bulk(k)
	}
	stop, err := c.flush(ctx)
	stop()
	return err
}

// recvSlotReads parses the replies to sendSlotReads for keys. Errors local
// to a key are classified on the key's read; any other failure leaves the
// connection broken.
func (c *respConn) recvSlotReads(ctx context.Context, keys []string, maxMembers int64, reads []KeyRead) ([]int, error) {
	stop, err := c.deadline(ctx)
	defer stop()
	if err != nil {
		c.broken = true
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
		n, zerr, err := c.readZRange(d, &slab)
		if err != nil {
			return nil, c.ioErr(ctx, err)
		}
		pttl, perr, err := c.readInt()
		if err != nil {
			return nil, c.ioErr(ctx, err)
		}
		for _, e := range [][]byte{zerr, perr} {
			if e == nil {
				continue
			}
			if err := judgeError(r, string(e)); err != nil {
				c.broken = true // the rest of the replies are unread
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
// slab. An error reply is returned as errMsg.
func (c *respConn) readZRange(prefix *xxhash.Digest, slab *[]Member) (n int, errMsg []byte, err error) {
	line, err := c.line()
	if err != nil {
		return 0, nil, err
	}
	switch line[0] {
	case '-':
		return 0, append([]byte(nil), line[1:]...), nil
	case '*':
	default:
		return 0, nil, fmt.Errorf("%w to ZRANGE: %q", errProtocol, line)
	}
	cnt, ok := parseInt(line[1:])
	if !ok || cnt%2 != 0 {
		if cnt == -1 {
			return 0, nil, nil
		}
		return 0, nil, fmt.Errorf("%w to ZRANGE: %q", errProtocol, line)
	}
	for j := int64(0); j < cnt; j += 2 {
		d := *prefix
		if err := c.bulkTo(&d); err != nil {
			return 0, nil, err
		}
		h := d.Sum64()
		s, err := c.bulkReply()
		if err != nil {
			return 0, nil, err
		}
		score, err := parseScore(s)
		if err != nil {
			return 0, nil, err
		}
		*slab = append(*slab, Member{Hash: h, Score: score})
	}
	return int(cnt / 2), nil, nil
}
