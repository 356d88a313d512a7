package release

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/resp"
)

// A slot-set member and a queue's next element can be of any size, and
// go-redis reads a reply whole before it can be cut: five 100 MB heads
// read by ten page views at once took the exporter from 22 MB to 1.4 GB,
// and 150 members of 1 MiB made one page of 157 MB. No command the
// sampling and release users hold reads part of a member or of a list
// element, so both are read over a raw connection (package resp), where a
// reply streams through a resp.Capped: what a page shows is kept, the
// rest is only counted.

// rawPools keep the raw connections of live reads between the keys of
// one read and across page views, by whether they read cluster replicas
// (and so send READONLY). Idle ones close after a couple of seconds.
var rawPools = [2]*resp.Pool{resp.NewPool(false), resp.NewPool(true)}

// errNoRaw: the client's connections cannot be reproduced raw. Reading
// through go-redis instead would hold a reply whole, so the key is not
// read.
var errNoRaw = errors.New("not read: this Redis client's connections cannot be opened raw (an OnConnect hook or a streaming credentials provider), and through go-redis a member or a queue's element would be held whole whatever its size")

// rawConn is a raw connection to the server that holds key: c itself, or
// in a cluster the key's master (its replica when c reads replicas).
type rawConn struct {
	*resp.Conn
	cl   *redis.Client
	pool *resp.Pool
	// done: every reply was read and the connection can be reused.
	done bool
}

func dialFor(ctx context.Context, c redis.Cmdable, key string) (*rawConn, error) {
	cl, readOnly := resp.Client(c), false
	if cc, ok := c.(*redis.ClusterClient); ok {
		var n *redis.Client
		var err error
		if readOnly = cc.Options().ReadOnly; readOnly {
			n, err = cc.SlaveForKey(ctx, key)
		} else {
			n, err = cc.MasterForKey(ctx, key)
		}
		if err != nil {
			return nil, fmt.Errorf("the cluster node of %q: %w", key, err)
		}
		cl = resp.Client(n)
	}
	if cl == nil {
		return nil, errNoRaw
	}
	p := rawPools[0]
	if readOnly {
		p = rawPools[1]
	}
	conn, err := p.Get(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", cl.Options().Addr, err)
	}
	return &rawConn{Conn: conn, cl: cl, pool: p}, nil
}

// put returns the connection to its pool, or closes it when a reply was
// left unread.
func (r *rawConn) put() {
	if !r.done {
		r.MarkBroken()
	}
	r.pool.Put(r.cl, r.Conn)
}

// moved tells the cluster client that a key's slot has moved, when an
// error reply says so: the raw connection follows no redirection, and the
// next read should go to the slot's new node.
func moved(c redis.Cmdable, errMsg []byte) {
	if cc, ok := c.(*redis.ClusterClient); ok && isRedirect(string(errMsg)) {
		cc.ReloadState(context.Background())
	}
}

func isRedirect(msg string) bool {
	return strings.HasPrefix(msg, "MOVED ") || strings.HasPrefix(msg, "ASK ")
}
