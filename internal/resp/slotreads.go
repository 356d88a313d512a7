package resp

import (
	"context"
	"fmt"
	"io"
	"strconv"
)

// The raw path's reads of slot sets: one ZRANGE WITHSCORES and one PTTL per
// key, written into one buffer and parsed in place. What a reply says of
// its key is redisread's to judge (zset_raw.go there).

// SendSlotReads queues ZRANGE key 0 max WITHSCORES and PTTL key for every
// key and writes them.
func (c *Conn) SendSlotReads(ctx context.Context, keys []string, maxMembers int64) error {
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

// ReadZRangeLen reads the head of a ZRANGE WITHSCORES reply: how many
// members follow, each read with ReadScored. An error reply is returned
// as errMsg.
func (c *Conn) ReadZRangeLen() (n int, errMsg []byte, err error) {
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
	return int(cnt / 2), nil, nil
}

// ReadScored reads one member of a ZRANGE WITHSCORES reply: the member
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
