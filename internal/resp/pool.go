package resp

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Pool keeps idle raw connections per client. A redisread.Reader owns
// one: it goes away with the sweeper that made it, and with it the
// clients it was keyed by.
type Pool struct {
	mu   sync.Mutex
	idle map[*redis.Client][]*idleConn
	// readOnly: connections send READONLY, as go-redis does for the node
	// clients of a cluster client that reads from replicas.
	readOnly bool
}

// NewPool returns an empty pool. readOnly is set when the connections
// read from cluster replicas.
func NewPool(readOnly bool) *Pool { return &Pool{readOnly: readOnly} }

// Idle is how many idle connections the pool keeps for cl.
func (p *Pool) Idle(cl *redis.Client) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle[cl])
}

type idleConn struct {
	c *Conn
	t *time.Timer
}

// Get returns an idle connection to cl's server, or dials one.
func (p *Pool) Get(ctx context.Context, cl *redis.Client) (*Conn, error) {
	p.mu.Lock()
	for list := p.idle[cl]; len(list) > 0; list = p.idle[cl] {
		ic := list[len(list)-1]
		p.idle[cl] = list[:len(list)-1]
		if len(list) == 1 {
			delete(p.idle, cl)
		}
		if !ic.t.Stop() {
			continue
		}
		if ic.c.closed() {
			// Closed while idle (CLIENT KILL, Redis's timeout for idle
			// clients, a restart): dialing anew beats failing the sweep
			// on its first write, as 3 of 10 kills between sweeps did.
			_ = ic.c.nc.Close()
			continue
		}
		p.mu.Unlock()
		return ic.c, nil
	}
	p.mu.Unlock()
	return Dial(ctx, cl, p.readOnly)
}

// Put returns a connection for reuse, or closes it when a read left it
// in an unknown state.
func (p *Pool) Put(cl *redis.Client, c *Conn) {
	if c.broken {
		_ = c.nc.Close()
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.idle == nil {
		p.idle = map[*redis.Client][]*idleConn{}
	}
	ic := &idleConn{c: c}
	ic.t = time.AfterFunc(respIdle, func() {
		p.mu.Lock()
		list := p.idle[cl]
		for i, x := range list {
			if x == ic {
				list = append(list[:i], list[i+1:]...)
				break
			}
		}
		if len(list) == 0 {
			delete(p.idle, cl)
		} else {
			p.idle[cl] = list
		}
		p.mu.Unlock()
		_ = c.nc.Close()
	})
	p.idle[cl] = append(p.idle[cl], ic)
}

// Close closes every idle connection.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for cl, list := range p.idle {
		for _, ic := range list {
			if ic.t.Stop() {
				_ = ic.c.nc.Close()
			}
		}
		delete(p.idle, cl)
	}
}
