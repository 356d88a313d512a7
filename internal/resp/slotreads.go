package resp

import (
	"context"
	"fmt"
	"io"
	"strconv"
)

// The raw path's reads of slot sets: per key, one ZSCAN key 0 COUNT n (or
// ZRANGE key 0 max WITHSCORES) and one PTTL, written into one buffer and
// parsed in place. What a reply says of its key is redisread's to judge
// (zset_raw.go there).

// SendSlotReads queues, for every key, ZSCAN key 0 COUNT 2(max+1) (with
// byRange, ZRANGE key 0 max WITHSCORES) and PTTL key, and writes them.
// COUNT bounds the members a hash-table set returns, which Redis counts
// twice each (member and score): one past the cap tells an oversized set
// apart, as the ZRANGE's range does.
func (c *Conn) SendSlotReads(ctx context.Context, keys []string, maxMembers int64, byRange bool) error {
	if byRange {
		c.num = strconv.AppendInt(c.num[:0], maxMembers, 10)
	} else {
		c.num = strconv.AppendInt(c.num[:0], 2*(maxMembers+1), 10)
	}
	for _, k := range keys {
		if byRange {
			c.wbuf = append(c.wbuf, "*5\r\n$6\r\nZRANGE\r\n"...)
			c.bulk(k)
			c.wbuf = append(c.wbuf, "$1\r\n0\r\n"...)
			c.wbuf = appendBulk(c.wbuf, c.num)
			c.wbuf = append(c.wbuf, "$10\r\nWITHSCORES\r\n"...)
		} else {
			c.wbuf = append(c.wbuf, "*5\r\n$5\r\nZSCAN\r\n"...)
			c.bulk(k)
			c.wbuf = append(c.wbuf, "$1\r\n0\r\n$5\r\nCOUNT\r\n"...)
			c.wbuf = appendBulk(c.wbuf, c.num)
		}
		c.wbuf = append(c.wbuf, "*2\r\n$4\r\nPTTL\r\n"...)
		c.bulk(k)
	}
	stop, err := c.flush(ctx)
	stop()
	return err
}

// ReadSlotHead reads the head of a ZSCAN reply (a ZRANGE WITHSCORES one
// with byRange): how many members follow, each read with ReadScored, and
// whether ZSCAN's cursor says there are more (a hash-table set it could
// not give whole within COUNT). An error reply is returned as errMsg.
func (c *Conn) ReadSlotHead(byRange bool) (n int, more bool, errMsg []byte, err error) {
	name := "ZRANGE"
	if !byRange {
		name = "ZSCAN"
	}
	line, err := c.line()
	if err != nil {
		return 0, false, nil, err
	}
	switch {
	case line[0] == '-':
		return 0, false, append([]byte(nil), line[1:]...), nil
	case line[0] != '*':
		return 0, false, nil, fmt.Errorf("%w to %s: %q", errProtocol, name, line)
	case byRange && string(line) == "*-1":
		return 0, false, nil, nil
	case !byRange:
		if string(line) != "*2" {
			return 0, false, nil, fmt.Errorf("%w to ZSCAN: %q", errProtocol, line)
		}
		cursor, err := c.bulkReply()
		if err != nil {
			return 0, false, nil, err
		}
		more = string(cursor) != "0"
		if line, err = c.line(); err != nil {
			return 0, false, nil, err
		}
		if line[0] != '*' {
			return 0, false, nil, fmt.Errorf("%w to ZSCAN: %q", errProtocol, line)
		}
	}
	cnt, ok := parseInt(line[1:])
	if !ok || cnt < 0 || cnt%2 != 0 {
		return 0, false, nil, fmt.Errorf("%w to %s: %q", errProtocol, name, line)
	}
	return int(cnt / 2), more, nil, nil
}

// ReadScored reads one member of a ZSCAN or ZRANGE WITHSCORES reply: the member
// into w (streamed, see bulkTo: a slot-set member is only hashed), and
// its score.
func (c *Conn) ReadScored(w io.Writer) (float64, error) {
	if err := c.bulkTo(w); err != nil {
		return 0, err
	}
	s, err := c.bulkReply()
	if err != nil {
		return 0, err
	}
	return parseScore(s)
}
