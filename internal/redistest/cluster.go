package redistest

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
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

// clusterNode is one line of CLUSTER NODES.
type clusterNode struct {
	id, addr, master string
	flags            []string
	link             string
	slots            []string // ranges as printed, without migration markers
}

func (n clusterNode) has(flag string) bool { return slices.Contains(n.flags, flag) }

func parseClusterNodes(s string) []clusterNode {
	var out []clusterNode
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		addr := f[1]
		if i := strings.IndexAny(addr, "@,"); i >= 0 {
			addr = addr[:i]
		}
		n := clusterNode{id: f[0], addr: addr, flags: strings.Split(f[2], ","), master: f[3], link: f[7]}
		for _, sl := range f[8:] {
			if !strings.HasPrefix(sl, "[") {
				n.slots = append(n.slots, sl)
			}
		}
		out = append(out, n)
	}
	return out
}

func (c *Cluster) nodes(ctx context.Context, s *Server) ([]clusterNode, error) {
	out, err := c.clients[s.Addr].ClusterNodes(ctx).Result()
	if err != nil {
		return nil, err
	}
	return parseClusterNodes(out), nil
}

// health returns "" when s sees a settled, fully covered cluster of every
// node, and otherwise what is still wrong; sig summarises s's view so that
// views can be compared across nodes.
func (c *Cluster) health(ctx context.Context, s *Server) (sig, problem string) {
	cl := c.clients[s.Addr]
	info, err := cl.ClusterInfo(ctx).Result()
	if err != nil {
		return "", "CLUSTER INFO: " + err.Error()
	}
	for _, want := range []string{
		"cluster_state:ok",
		"cluster_slots_assigned:" + strconv.Itoa(ClusterSlots),
		"cluster_slots_ok:" + strconv.Itoa(ClusterSlots),
		"cluster_known_nodes:" + strconv.Itoa(len(c.Nodes)),
	} {
		if !strings.Contains(info, want+"\r\n") && !strings.HasSuffix(strings.TrimSpace(info), want) {
			return "", "CLUSTER INFO lacks " + want
		}
	}
	ns, err := c.nodes(ctx, s)
	if err != nil {
		return "", "CLUSTER NODES: " + err.Error()
	}
	var lines []string
	for _, n := range ns {
		for _, bad := range []string{"fail", "fail?", "handshake", "noaddr"} {
			if n.has(bad) {
				return "", fmt.Sprintf("sees %s as %s", n.addr, bad)
			}
		}
		if n.link != "connected" {
			return "", fmt.Sprintf("link to %s is %s", n.addr, n.link)
		}
		role := "master"
		if n.has("slave") {
			role = "replica-of-" + n.master
		}
		lines = append(lines, n.id+" "+n.addr+" "+role+" "+strings.Join(n.slots, " "))
	}
	slices.Sort(lines)
	repl, err := cl.Info(ctx, "replication").Result()
	if err != nil {
		return "", "INFO replication: " + err.Error()
	}
	if strings.Contains(repl, "role:slave") &&
		(!strings.Contains(repl, "master_link_status:up") || strings.Contains(repl, "master_sync_in_progress:1")) {
		return "", "replica not in sync with its master"
	}
	slots, err := cl.ClusterSlots(ctx).Result()
	if err != nil {
		return "", "CLUSTER SLOTS: " + err.Error()
	}
	listed := map[string]bool{}
	for _, sl := range slots {
		for _, n := range sl.Nodes {
			listed[n.Addr] = true
		}
	}
	if len(listed) != len(c.Nodes) {
		return "", fmt.Sprintf("CLUSTER SLOTS lists %d of %d nodes", len(listed), len(c.Nodes))
	}
	return strings.Join(lines, "\n"), ""
}

// WaitHealthy blocks until every node says cluster_state:ok with all slots
// assigned and ok, knows every node, sees no failure flag, every replica is
// in sync and listed in CLUSTER SLOTS, and all nodes agree on roles and
// slot ownership, so that any node's CLUSTER SLOTS gives a client the
// same, current map. It fails the test after d.
func (c *Cluster) WaitHealthy(d time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for {
		problem := ""
		first := ""
		for i, s := range c.Nodes {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			sig, p := c.health(ctx, s)
			cancel()
			if p != "" {
				problem = s.Addr + ": " + p
				break
			}
			if i == 0 {
				first = sig
			} else if sig != first {
				problem = fmt.Sprintf("%s and %s disagree on the topology", c.Nodes[0].Addr, s.Addr)
				break
			}
		}
		if problem == "" {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("cluster not healthy after %s: %s", d, problem)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// roles lists the current masters (those owning slots) and replicas as
// the first node sees them.
func (c *Cluster) roles() (masters, replicas []*Server) {
	c.t.Helper()
	ns, err := c.nodes(context.Background(), c.Nodes[0])
	if err != nil {
		c.t.Fatalf("CLUSTER NODES: %v", err)
	}
	for _, n := range ns {
		s := c.Node(n.addr)
		if s == nil {
			c.t.Fatalf("CLUSTER NODES names unknown node %s", n.addr)
		}
		switch {
		case n.has("slave"):
			replicas = append(replicas, s)
		case n.has("master") && len(n.slots) > 0:
			masters = append(masters, s)
		}
	}
	return masters, replicas
}

// Masters are the nodes that currently own slots.
func (c *Cluster) Masters() []*Server { m, _ := c.roles(); return m }

// Replicas are the nodes that currently replicate a master.
func (c *Cluster) Replicas() []*Server { _, r := c.roles(); return r }

// MasterOf returns the master a replica currently replicates.
func (c *Cluster) MasterOf(replica *Server) *Server {
	c.t.Helper()
	ns, err := c.nodes(context.Background(), replica)
	if err != nil {
		c.t.Fatalf("CLUSTER NODES on %s: %v", replica.Addr, err)
	}
	var masterID string
	for _, n := range ns {
		if n.has("myself") {
			masterID = n.master
		}
	}
	for _, n := range ns {
		if n.id == masterID {
			return c.Node(n.addr)
		}
	}
	c.t.Fatalf("%s replicates no known master", replica.Addr)
	return nil
}

// SlotOwners returns the master of every slot, as the first node sees it.
func (c *Cluster) SlotOwners() []*Server {
	c.t.Helper()
	ns, err := c.nodes(context.Background(), c.Nodes[0])
	if err != nil {
		c.t.Fatalf("CLUSTER NODES: %v", err)
	}
	out := make([]*Server, ClusterSlots)
	for _, n := range ns {
		if !n.has("master") {
			continue
		}
		for _, r := range n.slots {
			lo, hi, ok := strings.Cut(r, "-")
			if !ok {
				hi = lo
			}
			a, _ := strconv.Atoi(lo)
			b, _ := strconv.Atoi(hi)
			for sl := a; sl <= b && sl < ClusterSlots; sl++ {
				out[sl] = c.Node(n.addr)
			}
		}
	}
	return out
}

// SlotOwner returns the master that owns slot, as the first node sees it.
func (c *Cluster) SlotOwner(slot int) *Server {
	c.t.Helper()
	s := c.SlotOwners()[slot]
	if s == nil {
		c.t.Fatalf("no master owns slot %d", slot)
	}
	return s
}

// WaitReplicated blocks until every master's replicas have acknowledged
// its writes so far.
func (c *Cluster) WaitReplicated() {
	c.t.Helper()
	masters, replicas := c.roles()
	per := len(replicas) / len(masters)
	for _, m := range masters {
		n, err := c.clients[m.Addr].Wait(context.Background(), per, 10*time.Second).Result()
		if err != nil || n < int64(per) {
			c.t.Fatalf("WAIT %d on %s: %d acknowledged, %v", per, m.Addr, n, err)
		}
	}
}

// The slot migration steps below are what `redis-cli --cluster reshard`
// does, split up so that a test can stop in the middle of a migration or
// run sweeps while one is under way.

// BeginMigration marks slot as importing on to and migrating on from.
func (c *Cluster) BeginMigration(ctx context.Context, slot int, from, to *Server) error {
	fromID, toID := c.ID(from), c.ID(to)
	if err := c.clients[to.Addr].Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", fromID).Err(); err != nil {
		return fmt.Errorf("SETSLOT %d IMPORTING on %s: %w", slot, to.Addr, err)
	}
	if err := c.clients[from.Addr].Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", toID).Err(); err != nil {
		return fmt.Errorf("SETSLOT %d MIGRATING on %s: %w", slot, from.Addr, err)
	}
	return nil
}

// MoveKeys MIGRATEs up to max keys (all when max <= 0) of slot from from
// to to, batch keys per MIGRATE, and returns how many it moved.
func (c *Cluster) MoveKeys(ctx context.Context, slot int, from, to *Server, batch, max int) (int, error) {
	if batch <= 0 {
		batch = 100
	}
	moved := 0
	for max <= 0 || moved < max {
		n := batch
		if max > 0 {
			n = min(n, max-moved)
		}
		keys, err := c.clients[from.Addr].ClusterGetKeysInSlot(ctx, slot, n).Result()
		if err != nil {
			return moved, fmt.Errorf("GETKEYSINSLOT %d on %s: %w", slot, from.Addr, err)
		}
		if len(keys) == 0 {
			return moved, nil
		}
		args := []any{"MIGRATE", "127.0.0.1", to.Port, "", 0, 5000, "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		if err := c.clients[from.Addr].Do(ctx, args...).Err(); err != nil {
			return moved, fmt.Errorf("MIGRATE %d keys of slot %d from %s to %s: %w", len(keys), slot, from.Addr, to.Addr, err)
		}
		moved += len(keys)
	}
	return moved, nil
}

// FinishMigration hands slot to to: the importing side first, then the
// migrating side, as the Redis docs prescribe. The other nodes learn it
// by gossip (the config epoch of to goes up); WaitHealthy waits for that.
func (c *Cluster) FinishMigration(ctx context.Context, slot int, from, to *Server) error {
	toID := c.ID(to)
	for _, s := range []*Server{to, from} {
		if err := c.clients[s.Addr].Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", toID).Err(); err != nil {
			return fmt.Errorf("SETSLOT %d NODE on %s: %w", slot, s.Addr, err)
		}
	}
	return nil
}

// MigrateSlot moves slot and all its keys from from to to.
func (c *Cluster) MigrateSlot(ctx context.Context, slot int, from, to *Server) error {
	if err := c.BeginMigration(ctx, slot, from, to); err != nil {
		return err
	}
	if _, err := c.MoveKeys(ctx, slot, from, to, 100, 0); err != nil {
		return err
	}
	return c.FinishMigration(ctx, slot, from, to)
}

// Failover runs CLUSTER FAILOVER on replica (a coordinated, lossless
// manual failover) and waits until every node agrees that it is a master
// and the cluster is healthy again. It returns the former master.
func (c *Cluster) Failover(replica *Server, d time.Duration) *Server {
	c.t.Helper()
	old := c.MasterOf(replica)
	if err := c.clients[replica.Addr].ClusterFailover(context.Background()).Err(); err != nil {
		c.t.Fatalf("CLUSTER FAILOVER on %s: %v", replica.Addr, err)
	}
	deadline := time.Now().Add(d)
	for {
		role, err := c.clients[replica.Addr].Do(context.Background(), "ROLE").Slice()
		if err == nil && len(role) > 0 && role[0] == "master" {
			break
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s not master %s after CLUSTER FAILOVER: %v %v", replica.Addr, d, role, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.WaitHealthy(time.Until(deadline) + time.Second)
	return old
}
