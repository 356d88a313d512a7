package resp

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Call sends one command and reads its reply (an error reply is an
// error).
func (c *Conn) Call(ctx context.Context, args ...string) (any, error) {
	c.wbuf = c.wbuf[:0]
	c.cmd(args...)
	stop, err := c.flush(ctx)
	defer stop()
	if err != nil {
		return nil, err
	}
	v, err := c.Value()
	if err != nil {
		return nil, c.Fail(ctx, err)
	}
	if e, ok := v.(redis.Error); ok {
		return nil, e
	}
	return v, nil
}

// Value reads one RESP2 reply as a string, an int64, a []any, nil, or a
// redis.Error.
func (c *Conn) Value() (any, error) {
	line, err := c.line()
	if err != nil {
		return nil, err
	}
	return c.valueOf(line)
}

// valueOf reads the rest of the reply whose first line is line.
func (c *Conn) valueOf(line []byte) (any, error) {
	var err error
	switch line[0] {
	case '+':
		return string(line[1:]), nil
	case '-':
		return ReplyError(line[1:]), nil
	case ':':
		n, ok := parseInt(line[1:])
		if !ok {
			return nil, fmt.Errorf("%w: %q", errProtocol, line)
		}
		return n, nil
	case '$':
		b, err := c.bulkOf(line)
		if b == nil || err != nil {
			return nil, err
		}
		return string(b), nil
	case '*':
		n, ok := parseInt(line[1:])
		if !ok {
			return nil, fmt.Errorf("%w: %q", errProtocol, line)
		}
		if n < 0 {
			return nil, nil
		}
		out := make([]any, n)
		for i := range out {
			if out[i], err = c.Value(); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: %q", errProtocol, line)
}

// ReplyError is an error reply, a redis.Error like go-redis's own.
type ReplyError string

func (e ReplyError) Error() string { return string(e) }
func (ReplyError) RedisError()     {}
