// Package resp speaks RESP2 to Redis directly, for the reads where
// go-redis's per-command objects would cost more than Redis does: a
// connection made with a go-redis client's own dialer and credentials, a
// pool of idle ones, and replies parsed in place.
package resp

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// The sweep's reads (one ZSCAN and one PTTL per key, a million
// keys a sweep) go over a connection of their own that speaks RESP2
// directly: commands are appended to one buffer, and replies are parsed in
// place, each member hashed straight from the reply bytes. Through go-redis
// every command is an object with boxed arguments and every member a string
// in an interface, which made the client, not Redis, the bottleneck. The
// connection is opened with the client's own dialer (so TLS, sentinel
// master discovery and unix sockets are the client's), authenticated with
// the client's credentials, and sends nothing the client would not. SCAN, ZCOUNT and everything else stay on
// go-redis. A client whose options this cannot reproduce (a credentials
// provider, an OnConnect hook) is read through go-redis instead.

// respIdle is how long an unused sweep connection is kept: long enough to
// serve every batch of a sweep, short enough that it is gone between
// sweeps.
const respIdle = 2 * time.Second

// Client returns the go-redis client whose connection settings the raw
// reader can reproduce, or nil: a client with an OnConnect hook or a
// streaming credentials provider is read through go-redis.
func Client(c redis.Cmdable) *redis.Client {
	cl, ok := c.(*redis.Client)
	if !ok {
		return nil
	}
	o := cl.Options()
	if o.Dialer == nil || o.OnConnect != nil || o.StreamingCredentialsProvider != nil {
		return nil
	}
	return cl
}

// Conn is one raw connection.
type Conn struct {
	nc      net.Conn
	rd      *bufio.Reader
	wbuf    []byte
	num     []byte
	scratch []byte
	readTO  time.Duration
	broken  bool
}

// Dial opens a connection with cl's dialer and sets it up as go-redis
// would (see hello).
func Dial(ctx context.Context, cl *redis.Client, readOnly bool) (*Conn, error) {
	o := cl.Options()
	if o.DialTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.DialTimeout)
		defer cancel()
	}
	nc, err := o.Dialer(ctx, o.Network, o.Addr)
	if err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	c := NewConn(nc, o.ReadTimeout)
	if err := c.hello(ctx, o, readOnly); err != nil {
		_ = nc.Close()
		return nil, err
	}
	return c, nil
}

// NewConn wraps nc, already set up, whose every exchange may take up to
// readTimeout (0: no limit).
func NewConn(nc net.Conn, readTimeout time.Duration) *Conn {
	return &Conn{nc: nc, rd: bufio.NewReaderSize(nc, 64<<10), readTO: readTimeout}
}

// Close closes the connection.
func (c *Conn) Close() error { return c.nc.Close() }

// closed reports whether an idle connection can no longer be used: its
// server closed it, or sent something unasked. It looks without waiting
// and without a round trip (peekClosed).
func (c *Conn) closed() bool {
	if c.rd.Buffered() > 0 {
		return true
	}
	nc, tlsConn := c.nc, false
	if t, ok := nc.(*tls.Conn); ok {
		nc, tlsConn = t.NetConn(), true
	}
	return peekClosed(nc, tlsConn)
}

// MarkBroken keeps the connection from being reused: replies to what was
// sent are left unread.
func (c *Conn) MarkBroken() { c.broken = true }

// NoDeadline lifts the deadline the last exchange armed, for a connection
// that from now on only waits for what the server sends (a
// subscription).
func (c *Conn) NoDeadline() { _ = c.nc.SetDeadline(time.Time{}) }

// Send writes one command at once, with no deadline armed: for a
// connection that another goroutine reads with Value. Callers serialise
// their Sends.
func (c *Conn) Send(args ...string) error {
	c.wbuf = c.wbuf[:0]
	c.cmd(args...)
	_, err := c.nc.Write(c.wbuf)
	return err
}

// credentials picks the username and password in go-redis's order:
// CredentialsProviderContext, CredentialsProvider, the static fields.
func credentials(ctx context.Context, o *redis.Options) (string, string, error) {
	switch {
	case o.CredentialsProviderContext != nil:
		return o.CredentialsProviderContext(ctx)
	case o.CredentialsProvider != nil:
		u, p := o.CredentialsProvider()
		return u, p, nil
	}
	return o.Username, o.Password, nil
}

// hello authenticates, selects the database and, on a cluster replica,
// sends READONLY, the way go-redis sets up a RESP2 connection. Nothing
// else is sent: an ACL user limited to the sweep's commands never trips
// the ACL log.
func (c *Conn) hello(ctx context.Context, o *redis.Options, readOnly bool) error {
	user, pass, err := credentials(ctx, o)
	if err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	c.wbuf = c.wbuf[:0]
	var sent []string
	if pass != "" {
		if user != "" {
			c.cmd("AUTH", user, pass)
		} else {
			c.cmd("AUTH", pass)
		}
		sent = append(sent, "AUTH")
	}
	if o.DB != 0 {
		c.cmd("SELECT", strconv.Itoa(o.DB))
		sent = append(sent, "SELECT")
	}
	if readOnly {
		c.cmd("READONLY")
		sent = append(sent, "READONLY")
	}
	if len(sent) == 0 {
		return nil
	}
	stop, err := c.flush(ctx)
	defer stop()
	if err != nil {
		return err
	}
	for _, what := range sent {
		line, err := c.line()
		if err != nil {
			return c.Fail(ctx, err)
		}
		if line[0] == '-' {
			return fmt.Errorf("%s: %s", what, line[1:])
		}
	}
	return nil
}

// cmd appends one command to the write buffer.
func (c *Conn) cmd(args ...string) {
	c.wbuf = append(c.wbuf, '*')
	c.wbuf = strconv.AppendInt(c.wbuf, int64(len(args)), 10)
	c.wbuf = append(c.wbuf, '\r', '\n')
	for _, a := range args {
		c.bulk(a)
	}
}

func (c *Conn) bulk(a string) { c.wbuf = appendBulk(c.wbuf, a) }

func appendBulk[T string | []byte](b []byte, a T) []byte {
	b = append(b, '$')
	b = strconv.AppendInt(b, int64(len(a)), 10)
	b = append(b, '\r', '\n')
	b = append(b, a...)
	return append(b, '\r', '\n')
}

// Deadline arms the connection for one exchange: the read timeout from the
// client's options, cut short when ctx ends. The returned func disarms the
// context watch; a connection whose watch has already fired is not reused,
// since the watch may still be about to move its deadline.
func (c *Conn) Deadline(ctx context.Context) (func(), error) {
	var d time.Time
	if c.readTO > 0 {
		d = time.Now().Add(c.readTO)
	}
	_ = c.nc.SetDeadline(d)
	stop := context.AfterFunc(ctx, func() { _ = c.nc.SetDeadline(time.Unix(1, 0)) })
	release := func() {
		if !stop() {
			c.broken = true
		}
	}
	// Checked after arming: a ctx that ended before AfterFunc was set up
	// may have had its deadline overwritten above.
	if err := ctx.Err(); err != nil {
		release()
		return func() {}, err
	}
	return release, nil
}

// flush writes the buffered commands.
func (c *Conn) flush(ctx context.Context) (func(), error) {
	stop, err := c.Deadline(ctx)
	if err != nil {
		c.broken = true
		return stop, err
	}
	if _, err := c.nc.Write(c.wbuf); err != nil {
		c.broken = true
		return stop, c.Fail(ctx, err)
	}
	c.wbuf = c.wbuf[:0]
	return stop, nil
}

// Fail marks the connection broken after a failed exchange and says why:
// the context's end when it has ended (its watch moved the deadline that
// failed the read), else err, with what an EOF means.
func (c *Conn) Fail(ctx context.Context, err error) error {
	c.broken = true
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		// A bare EOF said nothing to whoever read the log.
		return fmt.Errorf("reading replies: Redis closed the connection (CLIENT KILL, its timeout for idle clients, maxclients, a restart): %w", err)
	}
	return err
}

var errProtocol = errors.New("redis: unexpected reply")

// line reads one reply line without its CRLF. The slice is valid until the
// next read.
func (c *Conn) line() ([]byte, error) {
	b, err := c.rd.ReadSlice('\n')
	if err != nil {
		c.broken = true
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, fmt.Errorf("%w: reply line longer than %d bytes", errProtocol, c.rd.Size())
		}
		return nil, err
	}
	if len(b) < 3 || b[len(b)-2] != '\r' {
		c.broken = true
		return nil, fmt.Errorf("%w: %q", errProtocol, b)
	}
	return b[:len(b)-2], nil
}

// bulkBody reads a bulk string's body of n bytes; the slice is valid until the
// next read.
func (c *Conn) bulkBody(n int) ([]byte, error) {
	if n+2 <= c.rd.Size() {
		b, err := c.rd.Peek(n + 2)
		if err != nil {
			c.broken = true
			return nil, err
		}
		_, _ = c.rd.Discard(n + 2)
		return b[:n], nil
	}
	b := c.scratch
	switch {
	case n+2 > maxScratch:
		// Kept by nobody once read: one huge bulk must not stay
		// allocated for the connection's life.
		b = make([]byte, n+2)
	case cap(b) < n+2:
		c.scratch = make([]byte, n+2)
		b = c.scratch
	}
	b = b[:n+2]
	if _, err := io.ReadFull(c.rd, b); err != nil {
		c.broken = true
		return nil, err
	}
	return b[:n], nil
}

// maxScratch bounds the buffer a connection keeps for bulks longer than
// its reader's buffer.
const maxScratch = 1 << 20

// bulkTo reads one bulk string into w a reader's buffer at a time, never
// holding it whole: a slot-set member is only hashed, and one of 64 MB
// costs no more memory than one of 64 bytes.
func (c *Conn) bulkTo(w io.Writer) error {
	line, err := c.line()
	if err != nil {
		return err
	}
	if line[0] != '$' {
		return fmt.Errorf("%w: want a bulk string, got %q", errProtocol, line)
	}
	n, ok := parseInt(line[1:])
	if !ok || n < 0 {
		return fmt.Errorf("%w: bulk length %q", errProtocol, line)
	}
	for left := int(n) + 2; left > 0; {
		b, err := c.rd.Peek(min(left, c.rd.Size()))
		if err != nil {
			c.broken = true
			return err
		}
		// The last 2 of the left bytes are the CRLF.
		_, _ = w.Write(b[:max(0, min(len(b), left-2))])
		_, _ = c.rd.Discard(len(b))
		left -= len(b)
	}
	return nil
}

// parseInt reads a RESP integer (the text after the type byte).
func parseInt(b []byte) (int64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	neg := b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var n int64
	for _, ch := range b {
		if ch < '0' || ch > '9' {
			return 0, false
		}
		n = n*10 + int64(ch-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

// parseScore reads a score as Redis prints it (%.17g, "inf", "-inf").
// Whole numbers of up to 15 digits, which millisecond timestamps are, are
// converted exactly without strconv.
func parseScore(b []byte) (float64, error) {
	if len(b) > 0 && len(b) <= 15 {
		if n, ok := parseInt(b); ok {
			return float64(n), nil
		}
	}
	switch string(b) {
	case "inf", "+inf":
		return math.Inf(1), nil
	case "-inf":
		return math.Inf(-1), nil
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return 0, fmt.Errorf("%w: score %q", errProtocol, b)
	}
	return f, nil
}

// bulkReply reads one bulk string; the slice is valid until the next read.
func (c *Conn) bulkReply() ([]byte, error) {
	line, err := c.line()
	if err != nil {
		return nil, err
	}
	if line[0] != '$' {
		return nil, fmt.Errorf("%w: want a bulk string, got %q", errProtocol, line)
	}
	n, ok := parseInt(line[1:])
	if !ok || n < 0 {
		return nil, fmt.Errorf("%w: bulk length %q", errProtocol, line)
	}
	return c.bulkBody(int(n))
}

// ReadInt reads an integer reply; an error reply is returned as errMsg.
func (c *Conn) ReadInt() (n int64, errMsg []byte, err error) {
	line, err := c.line()
	if err != nil {
		return 0, nil, err
	}
	switch line[0] {
	case ':':
		if n, ok := parseInt(line[1:]); ok {
			return n, nil, nil
		}
	case '-':
		return 0, append([]byte(nil), line[1:]...), nil
	}
	return 0, nil, fmt.Errorf("%w: want an integer, got %q", errProtocol, line)
}
