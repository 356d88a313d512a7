package resp

import "fmt"

// Push is what ReadPush keeps of one message on a subscribed connection.
type Push struct {
	// Kind is the message's first element ("message", "pong",
	// "subscribe"...); empty when the reply is not an array led by a
	// bulk string.
	Kind string
	// Arg is the second element when it is a bulk string, except in a
	// "message", whose channel is known to whoever subscribed.
	Arg string
	// Len is the number of elements.
	Len int
	// List: the third element is an array, whose bulk strings were
	// passed to ReadPush's each.
	List bool
}

// ReadPush reads one reply of a subscribed connection without keeping
// its list. An invalidation names every key a write touched: read as
// values, each name was an interface, a string and a slot in a slice,
// garbage as soon as the feed had copied it, at the rate the
// application writes. Here each bulk string of the third element is
// passed to each, as a slice valid only during that call.
func (c *Conn) ReadPush(each func([]byte)) (Push, error) {
	line, err := c.line()
	if err != nil {
		return Push{}, err
	}
	if line[0] != '*' {
		_, err := c.valueOf(line)
		return Push{}, err
	}
	n, ok := parseInt(line[1:])
	if !ok {
		return Push{}, fmt.Errorf("%w: %q", errProtocol, line)
	}
	p := Push{Len: int(max(n, 0))}
	for i := range p.Len {
		line, err := c.line()
		if err != nil {
			return Push{}, err
		}
		switch {
		case i < 2 && line[0] == '$':
			b, err := c.bulkOf(line)
			if err != nil {
				return Push{}, err
			}
			switch {
			case i == 1 && p.Kind != "message":
				p.Arg = string(b)
			case i == 0:
				p.Kind = kindOf(b)
			}
		case i == 2 && line[0] == '*':
			m, ok := parseInt(line[1:])
			if !ok {
				return Push{}, fmt.Errorf("%w: %q", errProtocol, line)
			}
			p.List = m >= 0
			for range m {
				line, err := c.line()
				if err != nil {
					return Push{}, err
				}
				if line[0] != '$' {
					if _, err := c.valueOf(line); err != nil {
						return Push{}, err
					}
					continue
				}
				b, err := c.bulkOf(line)
				if err != nil {
					return Push{}, err
				}
				if b != nil {
					each(b)
				}
			}
		default:
			if _, err := c.valueOf(line); err != nil {
				return Push{}, err
			}
		}
	}
	return p, nil
}

// kindOf returns the kinds a feed sees without allocating them.
func kindOf(b []byte) string {
	switch string(b) {
	case "message":
		return "message"
	case "pong":
		return "pong"
	}
	return string(b)
}

// bulkOf reads the body of the bulk string whose header is line: nil for
// a null bulk.
func (c *Conn) bulkOf(line []byte) ([]byte, error) {
	n, ok := parseInt(line[1:])
	if !ok {
		return nil, fmt.Errorf("%w: %q", errProtocol, line)
	}
	if n < 0 {
		return nil, nil
	}
	b, err := c.bulkBody(int(n))
	if b == nil && err == nil {
		b = []byte{}
	}
	return b, err
}
