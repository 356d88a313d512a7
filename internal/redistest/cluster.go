package redistest

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// ClusterSlots is the number of hash slots of a Redis Cluster.
const ClusterSlots = 16384

// Cluster is a Redis Cluster of real redis-server processes owned by a
// test, built the way an operator builds one: cluster-enabled servers
// joined by `redis-cli --cluster create`.
type Cluster struct {
	t testing.TB
	// Nodes are every server of the cluster in start order. Roles change
	// with failovers; ask Masters and Replicas for the current ones.
	Nodes   []*Server
	clients map[string]*redis.Client

	idMu sync.Mutex
	ids  map[string]string // node ids never change: cached by address
}

// StartCluster starts masters x (1 + replicas) cluster-enabled servers on
// free loopback ports, joins them with redis-cli (replicas per master), and
// waits until every node reports a healthy cluster with all slots covered.
// Extra args go to every redis-server.
func StartCluster(t testing.TB, masters, replicas int, extra ...string) *Cluster {
	t.Helper()
	if masters < 3 {
		t.Fatalf("redis-cli --cluster create needs at least 3 masters, got %d", masters)
	}
	cli := Binary(t, "redis-cli")
	c := &Cluster{t: t, clients: map[string]*redis.Client{}, ids: map[string]string{}}
	used := map[int]bool{}
	free := func() int {
		for {
			if p := FreePort(t); !used[p] {
				used[p] = true
				return p
			}
		}
	}
	n := masters * (1 + replicas)
	for range n {
		port := free()
		// The default bus port (port + 10000) may be taken or past 65535
		// for a kernel-picked port, so the bus gets its own free port.
		args := append([]string{
			"--cluster-enabled", "yes",
			// Relative to --dir, the server's own scratch directory.
			"--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "1000",
			"--cluster-port", strconv.Itoa(free()),
			// A diskless full sync otherwise waits 5s for more replicas.
			"--repl-diskless-sync-delay", "0",
			// Redis 7.0 leaves a replica out of CLUSTER SLOTS (and calls it
			// "loading" in CLUSTER SHARDS) until its replication offset,
			// carried by gossip, is above 0; on an idle cluster only the
			// master's replication pings move it.
			"--repl-ping-replica-period", "1",
		}, extra...)
		s := StartPort(t, port, args...)
		c.Nodes = append(c.Nodes, s)
		cl := redis.NewClient(&redis.Options{Addr: s.Addr, DisableIdentity: true})
		c.clients[s.Addr] = cl
		t.Cleanup(func() { _ = cl.Close() })
	}
	args := []string{"--cluster", "create"}
	for _, s := range c.Nodes {
		args = append(args, s.Addr)
	}
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	c.WaitHealthy(20 * time.Second)
	return c
}

// Addrs are the addresses of every node, seeds for a cluster client.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, s := range c.Nodes {
		out[i] = s.Addr
	}
	return out
}

// Client returns a cluster client for the test's own reads and writes,
// closed at test end.
func (c *Cluster) Client() *redis.ClusterClient {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), DisableIdentity: true})
	c.t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// NodeClient is a plain client of one node (no redirections followed).
func (c *Cluster) NodeClient(s *Server) *redis.Client { return c.clients[s.Addr] }

// Node returns the server listening on addr, or nil.
func (c *Cluster) Node(addr string) *Server {
	for _, s := range c.Nodes {
		if s.Addr == addr {
			return s
		}
	}
	return nil
}

// ID returns a node's cluster node id.
func (c *Cluster) ID(s *Server) string {
	c.t.Helper()
	c.idMu.Lock()
	defer c.idMu.Unlock()
	if id, ok := c.ids[s.Addr]; ok {
		return id
	}
	id, err := c.clients[s.Addr].ClusterMyID(context.Background()).Result()
	if err != nil {
		c.t.Fatalf("CLUSTER MYID on %s: %v", s.Addr, err)
	}
	c.ids[s.Addr] = id
	return id
}
