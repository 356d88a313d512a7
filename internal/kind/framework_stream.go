package kind

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/resp"
)

// A queue framework's reads that may bring any number of bytes (a queue's
// next job, a process's work hash, the first scheduled jobs, Celery's
// unacked messages: each a job's JSON with all its arguments) go over raw
// connections (internal/resp) and are streamed into what keeps the little
// the layout uses of them. Through go-redis each was read whole every
// sweep: one 100 MB job took the exporter's peak RSS to 415 MB at the
// head of a Sidekiq queue, 320 MB at a Celery queue's, 627 MB in a work
// hash, 523 MB in `unacked`; streamed, 24 MB in each. They are the
// framework's own commands (LINDEX, HGETALL, ZRANGE, HMGET, SMEMBERS),
// which the documented ACL grants, sent to the node each key lives on:
// the discovery key's client when it is one server, the cluster client's
// node for the key otherwise. What cannot go raw is read through go-redis
// and held whole for a moment, as before: a client the raw path cannot
// dial (resp.Client), and a key that answers MOVED or ASK (a slot moving,
// a cluster read from replicas through a node's client, whose raw
// connection sends no READONLY), which go-redis follows or reports.

// streamedRead is one such read.
type streamedRead struct {
	args []string // the command; args[1] is the key
	// raw reads the reply off a raw connection, streaming the large
	// parts; an error reply is returned as errMsg.
	raw func(c *resp.Conn) (errMsg []byte, err error)
	// whole queues the command on a go-redis pipeline, and returns what
	// reads its reply, held whole, once the pipeline ran.
	whole func(ctx context.Context, p redis.Pipeliner) func() error
	// Err is the read's error once read (a Redis error reply; redis.Nil
	// for LINDEX's nil), for partJudge.
	Err error
}

// streamSink takes one reply element at a time.
type streamSink interface {
	io.Writer
	Reset()
}

// streamLIndex is LINDEX key index, the element streamed into w; got is
// called once it is read.
func streamLIndex(key string, index int64, w streamSink, got func()) *streamedRead {
	r := &streamedRead{args: []string{"LINDEX", key, strconv.FormatInt(index, 10)}}
	r.raw = func(c *resp.Conn) ([]byte, error) {
		w.Reset()
		none, errMsg, err := c.ReadBulkTo(w)
		switch {
		case err != nil || errMsg != nil:
			return errMsg, err
		case none:
			r.Err = redis.Nil
		default:
			got()
		}
		return nil, nil
	}
	r.whole = func(ctx context.Context, p redis.Pipeliner) func() error {
		cmd := p.LIndex(ctx, key, index)
		return func() error {
			v, err := cmd.Result()
			if err != nil {
				return err
			}
			w.Reset()
			_, _ = io.WriteString(w, v)
			got()
			return nil
		}
	}
	return r
}

// readElementTo streams one string element of an array reply into w. The
// resp package's errors do not say which command's reply broke them, and
// a connection runs several: command and key do, what names the element.
func readElementTo(c *resp.Conn, w io.Writer, command, key, what string) error {
	none, msg, err := c.ReadBulkTo(w)
	switch {
	case err != nil:
		return fmt.Errorf("%s %s: %w", command, key, err)
	case none || msg != nil:
		return fmt.Errorf("%s %s: %s that is not a string", command, key, what)
	}
	return nil
}

// streamHGetAll is HGETALL key, each field streamed into f and its value
// into v; pair is called after each.
func streamHGetAll(key string, f, v streamSink, pair func()) *streamedRead {
	r := &streamedRead{args: []string{"HGETALL", key}}
	r.raw = func(c *resp.Conn) ([]byte, error) {
		// A RESP2 HGETALL reply is an array of field, value, field, ...
		n, errMsg, err := c.ReadArrayHead()
		switch {
		case err != nil:
			// The resp package's errors do not say which command's reply
			// broke them, and a connection runs several.
			return nil, fmt.Errorf("HGETALL %s: %w", key, err)
		case errMsg != nil:
			return errMsg, nil
		case n%2 != 0:
			return nil, fmt.Errorf("HGETALL %s: %d elements, not field and value pairs", key, n)
		}
		for range n / 2 {
			f.Reset()
			v.Reset()
			for _, w := range []io.Writer{f, v} {
				if err := readElementTo(c, w, "HGETALL", key, "a field or value"); err != nil {
					return nil, err
				}
			}
			pair()
		}
		return nil, nil
	}
	r.whole = func(ctx context.Context, p redis.Pipeliner) func() error {
		cmd := p.HGetAll(ctx, key)
		return func() error {
			m, err := cmd.Result()
			if err != nil {
				return err
			}
			for field, value := range m {
				f.Reset()
				v.Reset()
				_, _ = io.WriteString(f, field)
				_, _ = io.WriteString(v, value)
				pair()
			}
			return nil
		}
	}
	return r
}

// streamZRange is ZRANGE key 0 n-1 WITHSCORES, each member streamed into
// m; member is called with its score after each.
func streamZRange(key string, n int64, m streamSink, member func(score float64)) *streamedRead {
	r := &streamedRead{args: []string{"ZRANGE", key, "0", strconv.FormatInt(n-1, 10), "WITHSCORES"}}
	r.raw = func(c *resp.Conn) ([]byte, error) {
		count, _, errMsg, err := c.ReadSlotHead(true)
		if err != nil || errMsg != nil {
			return errMsg, err
		}
		for range count {
			m.Reset()
			score, err := c.ReadScored(m)
			if err != nil {
				return nil, err
			}
			member(score)
		}
		return nil, nil
	}
	r.whole = func(ctx context.Context, p redis.Pipeliner) func() error {
		cmd := p.ZRangeWithScores(ctx, key, 0, n-1)
		return func() error {
			zs, err := cmd.Result()
			if err != nil {
				return err
			}
			for _, z := range zs {
				m.Reset()
				s, _ := z.Member.(string)
				_, _ = io.WriteString(m, s)
				member(z.Score)
			}
			return nil
		}
	}
	return r
}

// streamHMGet is HMGET key fields..., each value streamed into v; value
// is called after each with the field's index and whether the hash has
// it.
func streamHMGet(key string, fields []string, v streamSink, value func(i int, found bool)) *streamedRead {
	r := &streamedRead{args: append([]string{"HMGET", key}, fields...)}
	r.raw = func(c *resp.Conn) ([]byte, error) {
		n, errMsg, err := c.ReadArrayHead()
		switch {
		case err != nil || errMsg != nil:
			return errMsg, err
		case n != len(fields):
			return nil, fmt.Errorf("HMGET %s: %d values for %d fields", key, n, len(fields))
		}
		for i := range n {
			v.Reset()
			none, msg, err := c.ReadBulkTo(v)
			if err != nil {
				return nil, err
			}
			if msg != nil {
				return nil, fmt.Errorf("HMGET %s: a value that is not a string", key)
			}
			value(i, !none)
		}
		return nil, nil
	}
	r.whole = func(ctx context.Context, p redis.Pipeliner) func() error {
		cmd := p.HMGet(ctx, key, fields...)
		return func() error {
			vals, err := cmd.Result()
			if err != nil {
				return err
			}
			for i, val := range vals {
				v.Reset()
				s, found := val.(string)
				_, _ = io.WriteString(v, s)
				value(i, found)
			}
			return nil
		}
	}
	return r
}

// streamSMembers is SMEMBERS key, each member streamed into m; member is
// called after each.
func streamSMembers(key string, m streamSink, member func()) *streamedRead {
	r := &streamedRead{args: []string{"SMEMBERS", key}}
	r.raw = func(c *resp.Conn) ([]byte, error) {
		n, errMsg, err := c.ReadArrayHead()
		switch {
		case err != nil:
			return nil, fmt.Errorf("SMEMBERS %s: %w", key, err)
		case errMsg != nil:
			return errMsg, nil
		}
		for range n {
			m.Reset()
			if err := readElementTo(c, m, "SMEMBERS", key, "a member"); err != nil {
				return nil, err
			}
			member()
		}
		return nil, nil
	}
	r.whole = func(ctx context.Context, p redis.Pipeliner) func() error {
		cmd := p.SMembers(ctx, key)
		return func() error {
			ms, err := cmd.Result()
			if err != nil {
				return err
			}
			for _, s := range ms {
				m.Reset()
				_, _ = io.WriteString(m, s)
				member()
			}
			return nil
		}
	}
	return r
}

// streamReader sends streamedReads over raw connections of its own,
// kept idle between a sweep's batches (resp.Pool), by whether they read
// a cluster's replicas.
type streamReader struct {
	pools [2]*resp.Pool
}

func newStreamReader() *streamReader {
	return &streamReader{pools: [2]*resp.Pool{resp.NewPool(false), resp.NewPool(true)}}
}

// read runs reads with c's servers, each on its key's node, and sets each
// one's Err. A returned error is about a connection or a server and fails
// the sweep, as partJudge's are.
func (sr *streamReader) read(ctx context.Context, c redis.Cmdable, reads []*streamedRead) error {
	return sr.readNodes(ctx, c, reads, false)
}

// readApart is read with the nodes read at once, as go-redis's pipeline
// reads a cluster's: a round of reads over several nodes then takes one
// round trip, not one a node. The reads' sinks and callbacks must share
// nothing, as read's may (one digest for every queue's head).
func (sr *streamReader) readApart(ctx context.Context, c redis.Cmdable, reads []*streamedRead) error {
	return sr.readNodes(ctx, c, reads, true)
}

func (sr *streamReader) readNodes(ctx context.Context, c redis.Cmdable, reads []*streamedRead, apart bool) error {
	if len(reads) == 0 {
		return nil
	}
	var whole []*streamedRead
	type node struct {
		cl    *redis.Client
		reads []*streamedRead
	}
	var nodes []*node
	readOnly := false
	if cc, ok := c.(*redis.ClusterClient); ok {
		readOnly = cc.Options().ReadOnly
		byClient := map[*redis.Client]*node{}
		for _, r := range reads {
			var n *redis.Client
			var err error
			if readOnly {
				n, err = cc.SlaveForKey(ctx, r.args[1])
			} else {
				n, err = cc.MasterForKey(ctx, r.args[1])
			}
			if err != nil || resp.Client(n) == nil {
				whole = append(whole, r)
				continue
			}
			if byClient[n] == nil {
				byClient[n] = &node{cl: n}
				nodes = append(nodes, byClient[n])
			}
			byClient[n].reads = append(byClient[n].reads, r)
		}
	} else if cl := resp.Client(c); cl != nil {
		nodes = []*node{{cl: cl, reads: reads}}
	} else {
		whole = reads
	}
	pool := sr.pools[0]
	if readOnly {
		pool = sr.pools[1]
	}
	moved := make([][]*streamedRead, len(nodes))
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		if apart && len(nodes) > 1 {
			wg.Go(func() { moved[i], errs[i] = sr.readRaw(ctx, pool, n.cl, n.reads) })
		} else if moved[i], errs[i] = sr.readRaw(ctx, pool, n.cl, n.reads); errs[i] != nil {
			break
		}
	}
	wg.Wait()
	for i, n := range nodes {
		if errs[i] != nil {
			return fmt.Errorf("node %s: %w", n.cl.Options().Addr, errs[i])
		}
		whole = append(whole, moved[i]...)
	}
	if len(whole) == 0 {
		return nil
	}
	pipe := c.Pipeline()
	done := make([]func() error, len(whole))
	for i, r := range whole {
		done[i] = r.whole(ctx, pipe)
	}
	_, _ = pipe.Exec(ctx)
	for i, r := range whole {
		r.Err = done[i]()
	}
	return nil
}

// readRaw runs reads over one raw connection to cl, and returns those
// that answered MOVED or ASK.
func (sr *streamReader) readRaw(ctx context.Context, pool *resp.Pool, cl *redis.Client, reads []*streamedRead) ([]*streamedRead, error) {
	conn, err := pool.Get(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("stream connection: %w", err)
	}
	defer pool.Put(cl, conn)
	for _, r := range reads {
		conn.Queue(r.args...)
	}
	if err := conn.Flush(ctx); err != nil {
		return nil, err
	}
	stop, err := conn.Deadline(ctx)
	defer stop()
	if err != nil {
		conn.MarkBroken()
		return nil, err
	}
	var moved []*streamedRead
	for _, r := range reads {
		errMsg, err := r.raw(conn)
		if err != nil {
			return nil, conn.Fail(ctx, err)
		}
		switch msg := string(errMsg); {
		case errMsg == nil:
		case strings.HasPrefix(msg, "MOVED "), strings.HasPrefix(msg, "ASK "):
			moved = append(moved, r)
		default:
			r.Err = resp.ReplyError(msg)
		}
	}
	return moved, nil
}

// cappedText is what c kept, "..." after it when it kept less than it
// was given.
func cappedText(c *resp.Capped) string {
	if c.Cut() {
		return string(c.Kept()) + "..."
	}
	return string(c.Kept())
}
