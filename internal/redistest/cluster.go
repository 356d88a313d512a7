package redistest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/redisproc"
)

// ClusterSlots is the number of hash slots of a Redis Cluster.
const ClusterSlots = redisproc.ClusterSlots

// Cluster is a Redis Cluster of real redis-server processes owned by a
// test, built the way an operator builds one: cluster-enabled servers
// joined by `redis-cli --cluster create` (redisproc.Cluster, which the
// tools use too).
type Cluster struct {
	t testing.TB
	// Nodes are every server of the cluster in start order. Roles change
	// with failovers; ask Masters and Replicas for the current ones.
	Nodes []*Server
	proc  *redisproc.Cluster

	idMu sync.Mutex
	ids  map[string]string // node ids never change: cached by address
}

// StartCluster starts masters x (1 + replicas) cluster-enabled servers on
// free loopback ports, joins them with redis-cli (replicas per master), and
// waits until every node reports a healthy cluster with all slots covered.
// Extra args go to every redis-server.
func StartCluster(t testing.TB, masters, replicas int, extra ...string) *Cluster {
	t.Helper()
	// Fails with the install hint when redis-cli is missing.
	Binary(t, "redis-cli")
	pc, err := redisproc.StartCluster(masters, replicas, extra...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pc.Stop)
	c := &Cluster{t: t, proc: pc, ids: map[string]string{}}
	for _, s := range pc.Nodes {
		c.Nodes = append(c.Nodes, &Server{Server: s, t: t})
	}
	return c
}

// AddMaster starts one more server, joins it to the cluster as a master
// the way an operator does (`redis-cli --cluster add-node`), and migrates
// slots to it from their owners; it returns once the cluster is healthy
// again. A master needs a slot to be healthy here: one without any is not
// in CLUSTER SLOTS. prepare (if not nil) runs on the new node before it
// joins: what an operator sets up on every node, such as ACL users.
func (c *Cluster) AddMaster(ctx context.Context, prepare func(*redis.Client) error, slots ...int) *Server {
	c.t.Helper()
	if len(slots) == 0 {
		c.t.Fatal("AddMaster: give the new master a slot at least")
	}
	ps, err := c.proc.StartNode()
	if err != nil {
		c.t.Fatal(err)
	}
	s := &Server{Server: ps, t: c.t}
	if prepare != nil {
		if err := prepare(c.NodeClient(s)); err != nil {
			c.t.Fatalf("preparing the new master %s: %v", s.Addr, err)
		}
	}
	if err := c.proc.AddNode(ctx, ps, c.Masters()[0].Addr); err != nil {
		c.t.Fatal(err)
	}
	c.Nodes = append(c.Nodes, s)
	for _, slot := range slots {
		if err := c.MigrateSlot(ctx, slot, c.SlotOwner(slot), s); err != nil {
			c.t.Fatalf("moving slot %d to the new master %s: %v", slot, s.Addr, err)
		}
	}
	c.WaitHealthy(2 * time.Minute)
	return s
}

// WaitHealthy blocks until the cluster is healthy (redisproc's
// Cluster.WaitHealthy says what that takes); it fails the test after d.
func (c *Cluster) WaitHealthy(d time.Duration) {
	c.t.Helper()
	if err := c.proc.WaitHealthy(d); err != nil {
		c.t.Fatal(err)
	}
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
func (c *Cluster) NodeClient(s *Server) *redis.Client { return c.proc.NodeClient(s.Addr) }

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
	id, err := c.NodeClient(s).ClusterMyID(context.Background()).Result()
	if err != nil {
		c.t.Fatalf("CLUSTER MYID on %s: %v", s.Addr, err)
	}
	c.ids[s.Addr] = id
	return id
}
