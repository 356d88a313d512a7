package topology

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// FailoverClient is a client of a Sentinel-managed Redis that says how it
// was made (redisconn's): the go-redis failover client and its options.
// go-redis's replica client (ReplicaOnly) dials a replica at random for
// every new connection, so one sweep's SCAN pages, its reads over the raw
// pool and its INFO identity check could each go to another replica: a
// SCAN cursor means something only on the server that issued it, and an
// identity check of one replica says nothing of what another returned.
// With read_from: replica the topology reaches one replica itself.
type FailoverClient interface {
	redis.UniversalClient
	Failover() (*redis.Client, *redis.FailoverOptions)
}

// sentinelReplicas picks the one server a sweep reads through Sentinel
// with read_from: replica.
type sentinelReplicas struct {
	base *redis.Client
	opt  *redis.FailoverOptions

	mu        sync.Mutex
	closed    bool
	last      string                   // the address read last
	clients   map[string]*redis.Client // by address
	sentinels map[string]*redis.SentinelClient
}

func newSentinelReplicas(base *redis.Client, opt *redis.FailoverOptions) *sentinelReplicas {
	return &sentinelReplicas{base: base, opt: opt, clients: map[string]*redis.Client{}, sentinels: map[string]*redis.SentinelClient{}}
}

// group names the servers a Sentinel picks among: they hold the same
// data, and the lost watch compares the one read now with the one read
// before (Node.Group).
func (s *sentinelReplicas) group() string { return "sentinel master " + s.opt.MasterName }

// node picks the server to read: the replica read last while it stays
// usable (so that the identity check compares a server with itself),
// else the usable replica furthest along; with none, the master, as a
// cluster reads a shard without a usable replica.
func (s *sentinelReplicas) node(ctx context.Context) (Node, error) {
	addr, err := s.pick(ctx)
	if err != nil {
		return Node{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return Node{}, redis.ErrClosed
	}
	c := s.clients[addr]
	if c == nil {
		c = redis.NewClient(s.options(addr))
		s.clients[addr] = c
	}
	s.last = addr
	return Node{Addr: addr, C: c, Group: s.group()}, nil
}

// options are the failover client's own, for one address: credentials,
// TLS (its server name, when not configured, is the address's host, as
// go-redis's Sentinel dialer has it), database, timeouts and retries.
func (s *sentinelReplicas) options(addr string) *redis.Options {
	o := *s.base.Options()
	o.Addr, o.Dialer = addr, s.opt.Dialer // nil: go-redis's own, as the failover client's
	return &o
}

// pick asks the Sentinels, in the configured order, for the master's
// replicas; the first that answers decides.
func (s *sentinelReplicas) pick(ctx context.Context) (string, error) {
	var errs []error
	for _, a := range s.opt.SentinelAddrs {
		sc := s.sentinel(a)
		if sc == nil {
			return "", redis.ErrClosed
		}
		rs, err := sc.Replicas(ctx, s.opt.MasterName).Result()
		if err != nil {
			errs = append(errs, fmt.Errorf("sentinel %s: SENTINEL REPLICAS %s: %w", a, s.opt.MasterName, err))
			if ctx.Err() != nil {
				break
			}
			continue
		}
		s.mu.Lock()
		last := s.last
		s.mu.Unlock()
		if addr := chooseReplica(rs, last); addr != "" {
			return addr, nil
		}
		m, err := sc.GetMasterAddrByName(ctx, s.opt.MasterName).Result()
		if err != nil || len(m) != 2 {
			errs = append(errs, fmt.Errorf("sentinel %s: no usable replica, and GET-MASTER-ADDR-BY-NAME %s: %v %w", a, s.opt.MasterName, m, err))
			continue
		}
		return net.JoinHostPort(m[0], m[1]), nil
	}
	if len(errs) == 0 {
		return "", errors.New("no sentinel address")
	}
	return "", errors.Join(errs...)
}

func (s *sentinelReplicas) sentinel(addr string) *redis.SentinelClient {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	sc := s.sentinels[addr]
	if sc == nil {
		o := *s.base.Options()
		o.Addr, o.Dialer, o.DB = addr, s.opt.Dialer, 0
		o.CredentialsProvider, o.CredentialsProviderContext, o.StreamingCredentialsProvider = nil, nil, nil
		o.Username, o.Password = s.opt.SentinelUsername, s.opt.SentinelPassword
		sc = redis.NewSentinelClient(&o)
		s.sentinels[addr] = sc
	}
	return sc
}

func (s *sentinelReplicas) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, c := range s.clients {
		_ = c.Close()
	}
	for _, c := range s.sentinels {
		_ = c.Close()
	}
}

// current is the client of the server read last; nil before any pick.
func (s *sentinelReplicas) current() *redis.Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.clients[s.last]
}

// chooseReplica picks among SENTINEL REPLICAS's answer: last while it is
// usable, else the usable one furthest along; "" when none is usable.
func chooseReplica(rs []map[string]string, last string) string {
	best, bestOffset := "", int64(-1)
	for _, r := range rs {
		if !usableReplica(r) {
			continue
		}
		addr := net.JoinHostPort(r["ip"], r["port"])
		if addr == last {
			return addr
		}
		if off, _ := strconv.ParseInt(r["slave-repl-offset"], 10, 64); off > bestOffset {
			best, bestOffset = addr, off
		}
	}
	return best
}

// usableReplica is the one place that decides whether a replica Sentinel
// lists may be read: reachable by Sentinel (not down, not disconnected)
// and linked to its master. A replica restarted without its data has its
// link down until its sync is over; Sentinel sees that at its next INFO
// (every 10 s), and until then the sweep's own check (Identity.Unsynced)
// refuses it.
func usableReplica(r map[string]string) bool {
	for f := range strings.SplitSeq(r["flags"], ",") {
		switch f {
		case "s_down", "o_down", "disconnected":
			return false
		}
	}
	return r["ip"] != "" && r["port"] != "" && r["master-link-status"] == "ok"
}
