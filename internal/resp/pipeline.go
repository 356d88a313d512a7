package resp

import (
	"context"
	"fmt"
	"io"
)

// Queue adds one command to those the next Flush writes.
func (c *Conn) Queue(args ...string) { c.cmd(args...) }

// Flush writes the queued commands.
func (c *Conn) Flush(ctx context.Context) error {
	stop, err := c.flush(ctx)
	stop()
	return err
}

// ReadBulkTo reads a bulk string reply into w a reader's buffer at a time,
// never holding it whole (bulkTo): nil says the reply was a nil bulk, and
// an error reply is returned as errMsg.
func (c *Conn) ReadBulkTo(w io.Writer) (isNil bool, errMsg []byte, err error) {
	b, err := c.rd.Peek(1)
	if err != nil {
		c.broken = true
		return false, nil, err
	}
	switch b[0] {
	case '-':
		line, err := c.line()
		if err != nil {
			return false, nil, err
		}
		return false, append([]byte(nil), line[1:]...), nil
	case '$':
		if nb, err := c.rd.Peek(4); err == nil && string(nb) == "$-1\r" {
			_, err := c.line()
			return true, nil, err
		}
		return false, nil, c.bulkTo(w)
	}
	line, err := c.line()
	if err != nil {
		return false, nil, err
	}
	c.broken = true
	return false, nil, fmt.Errorf("%w: want a bulk string, got %q", errProtocol, line)
}

// ReadArrayHead reads the head of an array reply whose elements are read
// one by one after it (each with ReadBulkTo, for HMGET's values): how many
// follow, none for a nil array. An error reply is returned as errMsg.
func (c *Conn) ReadArrayHead() (n int, errMsg []byte, err error) {
	line, err := c.line()
	if err != nil {
		return 0, nil, err
	}
	switch line[0] {
	case '-':
		return 0, append([]byte(nil), line[1:]...), nil
	case '*':
		if cnt, ok := parseInt(line[1:]); ok && cnt >= -1 {
			return int(max(cnt, 0)), nil, nil
		}
	}
	c.broken = true
	return 0, nil, fmt.Errorf("%w: want an array, got %q", errProtocol, line)
}
