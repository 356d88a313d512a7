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
	extra   []string // every redis-server's extra args, for AddMaster

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
	c := &Cluster{t: t, clients: map[string]*redis.Client{}, ids: map[string]string{}, extra: extra}
	n := masters * (1 + replicas)
	for range n {
		c.Nodes = append(c.Nodes, c.startNode())
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

// startNode starts one cluster-enabled server on free loopback ports; it
// is not part of the cluster until joined.
func (c *Cluster) startNode() *Server {
	c.t.Helper()
	port := FreePort(c.t)
	bus := FreePort(c.t)
	for bus == port {
		bus = FreePort(c.t)
	}
	// The default bus port (port + 10000) may be taken or past 65535
	// for a kernel-picked port, so the bus gets its own free port.
	args := append([]string{
		"--cluster-enabled", "yes",
		// Relative to --dir, the server's own scratch directory.
		"--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", "1000",
		"--cluster-port", strconv.Itoa(bus),
		// A diskless full sync otherwise waits 5s for more replicas.
		"--repl-diskless-sync-delay", "0",
		// Redis 7.0 leaves a replica out of CLUSTER SLOTS (and calls it
		// "loading" in CLUSTER SHARDS) until its replication offset,
		// carried by gossip, is above 0; on an idle cluster only the
		// master's replication pings move it.
		"--repl-ping-replica-period", "1",
	}, c.extra...)
	s := StartPort(c.t, port, args...)
	cl := redis.NewClient(&redis.Options{Addr: s.Addr, DisableIdentity: true})
	c.clients[s.Addr] = cl
	c.t.Cleanup(func() { _ = cl.Close() })
	return s
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
	s := c.startNode()
	if prepare != nil {
		if err := prepare(c.clients[s.Addr]); err != nil {
			c.t.Fatalf("preparing the new master %s: %v", s.Addr, err)
		}
	}
	cli := Binary(c.t, "redis-cli")
	jctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	args := []string{"--cluster", "add-node", s.Addr, c.Masters()[0].Addr}
	if out, err := exec.CommandContext(jctx, cli, args...).CombinedOutput(); err != nil {
		c.t.Fatalf("redis-cli %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	c.Nodes = append(c.Nodes, s)
	// add-node returns once the new node has met one node; SETSLOT on it
	// names the others, and MIGRATE to it needs it to see the cluster up,
	// which it learns by gossip.
	want := "cluster_known_nodes:" + strconv.Itoa(len(c.Nodes))
	for deadline := time.Now().Add(2 * time.Minute); ; {
		known := 0
		for _, n := range c.Nodes {
			info, err := c.clients[n.Addr].ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, want+"\r\n") && strings.Contains(info, "cluster_state:ok\r\n") {
				known++
			}
		}
		if known == len(c.Nodes) {
			break
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("after add-node, %d of %d nodes know all %d nodes", known, len(c.Nodes), len(c.Nodes))
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, slot := range slots {
		if err := c.MigrateSlot(ctx, slot, c.SlotOwner(slot), s); err != nil {
			c.t.Fatalf("moving slot %d to the new master %s: %v", slot, s.Addr, err)
		}
	}
	c.WaitHealthy(2 * time.Minute)
	return s
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
