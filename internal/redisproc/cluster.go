package redisproc

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ClusterSlots is the number of hash slots of a Redis Cluster.
const ClusterSlots = 16384

// Cluster is a Redis Cluster of redis-server processes, built the way an
// operator builds one: cluster-enabled servers joined by
// `redis-cli --cluster create`. internal/redistest's cluster is this one,
// owned by a test; the bench uses it directly.
type Cluster struct {
	// Nodes are every server of the cluster in start order (AddNode
	// appends). Roles change with failovers.
	Nodes   []*Server
	started []*Server // by StartNode, joined or not: what Stop stops
	clients map[string]*redis.Client
	extra   []string // every redis-server's extra args, for StartNode
}

// StartCluster starts masters x (1 + replicas) cluster-enabled servers on
// free loopback ports, joins them with redis-cli (replicas per master),
// and waits until every node reports a healthy cluster with all slots
// covered. Extra args go to every redis-server. On an error nothing is
// left running.
func StartCluster(masters, replicas int, extra ...string) (_ *Cluster, err error) {
	if masters < 3 {
		return nil, fmt.Errorf("redis-cli --cluster create needs at least 3 masters, got %d", masters)
	}
	cli, err := Binary("redis-cli")
	if err != nil {
		return nil, err
	}
	// c, not the named result, which every error return sets to nil
	// before this deferred Stop runs.
	c := &Cluster{clients: map[string]*redis.Client{}, extra: extra}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	for range masters * (1 + replicas) {
		s, err := c.StartNode()
		if err != nil {
			return nil, err
		}
		c.Nodes = append(c.Nodes, s)
	}
	args := []string{"--cluster", "create"}
	args = append(args, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("redis-cli %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	if err := c.WaitHealthy(20 * time.Second); err != nil {
		return nil, err
	}
	return c, nil
}

// StartNode starts one cluster-enabled server on free loopback ports,
// with a client of its own (NodeClient). It is not part of the cluster,
// nor in Nodes, until AddNode joins it.
func (c *Cluster) StartNode() (*Server, error) { return pickingPorts(c.startNodeOnce) }

func (c *Cluster) startNodeOnce() (*Server, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	bus := port
	for bus == port {
		if bus, err = FreePort(); err != nil {
			return nil, err
		}
	}
	// The default bus port (port + 10000) may be taken or past 65535
	// for a kernel-picked port, so the bus gets its own free port.
	args := append([]string{
		"--cluster-enabled", "yes",
		// Relative to --dir, the server's own scratch directory.
		"--cluster-config-file", "nodes.conf",
		// No test or bench waits for a failure to be detected (their
		// failovers are CLUSTER FAILOVER): a timeout of a second let a
		// node that answered pings late on a loaded machine (the race
		// detector, several packages at once on two cores) be flagged
		// failing, and the cluster answered CLUSTERDOWN for a moment in
		// the middle of TestClusterFailover.
		"--cluster-node-timeout", "5000",
		"--cluster-port", strconv.Itoa(bus),
		// A diskless full sync otherwise waits 5s for more replicas.
		"--repl-diskless-sync-delay", "0",
		// Redis 7.0 leaves a replica out of CLUSTER SLOTS (and calls it
		// "loading" in CLUSTER SHARDS) until its replication offset,
		// carried by gossip, is above 0; on an idle cluster only the
		// master's replication pings move it.
		"--repl-ping-replica-period", "1",
	}, c.extra...)
	s, err := Start(Options{Port: port, Args: args})
	if err != nil {
		return nil, err
	}
	c.started = append(c.started, s)
	c.clients[s.Addr] = redis.NewClient(&redis.Options{Addr: s.Addr, DisableIdentity: true})
	return s, nil
}

// AddNode joins s, started by StartNode, to the cluster as a master
// without slots, the way an operator does (`redis-cli --cluster
// add-node` through the node at via), and waits until every node knows every node and says the
// cluster is ok. Moving slots to it is the caller's; until it has one it
// is not in CLUSTER SLOTS, so WaitHealthy waits for that.
func (c *Cluster) AddNode(ctx context.Context, s *Server, via string) error {
	cli, err := Binary("redis-cli")
	if err != nil {
		return err
	}
	jctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	args := []string{"--cluster", "add-node", s.Addr, via}
	if out, err := exec.CommandContext(jctx, cli, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("redis-cli %s: %w\n%s", strings.Join(args, " "), err, out)
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
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after add-node, %d of %d nodes know all %d nodes", known, len(c.Nodes), len(c.Nodes))
		}
		time.Sleep(50 * time.Millisecond)
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

// NodeClient is a plain client of the node at addr (no redirections
// followed), nil for an address not started by StartNode.
func (c *Cluster) NodeClient(addr string) *redis.Client { return c.clients[addr] }

// Stop stops every node StartNode started and closes their clients.
func (c *Cluster) Stop() {
	for _, cl := range c.clients {
		_ = cl.Close()
	}
	for _, s := range c.started {
		s.Stop()
	}
}

// ClusterNode is one line of CLUSTER NODES.
type ClusterNode struct {
	ID, Addr, Master string
	Flags            []string
	Link             string
	Slots            []string // ranges as printed, without migration markers
}

// Has reports whether the node carries flag ("master", "myself", "fail").
func (n ClusterNode) Has(flag string) bool { return slices.Contains(n.Flags, flag) }

// ParseClusterNodes reads the reply of CLUSTER NODES.
func ParseClusterNodes(s string) []ClusterNode {
	var out []ClusterNode
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		addr := f[1]
		if i := strings.IndexAny(addr, "@,"); i >= 0 {
			addr = addr[:i]
		}
		n := ClusterNode{ID: f[0], Addr: addr, Flags: strings.Split(f[2], ","), Master: f[3], Link: f[7]}
		for _, sl := range f[8:] {
			if !strings.HasPrefix(sl, "[") {
				n.Slots = append(n.Slots, sl)
			}
		}
		out = append(out, n)
	}
	return out
}

// ClusterNodes is CLUSTER NODES as the node at addr sees it.
func (c *Cluster) ClusterNodes(ctx context.Context, addr string) ([]ClusterNode, error) {
	out, err := c.clients[addr].ClusterNodes(ctx).Result()
	if err != nil {
		return nil, err
	}
	return ParseClusterNodes(out), nil
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
	ns, err := c.ClusterNodes(ctx, s.Addr)
	if err != nil {
		return "", "CLUSTER NODES: " + err.Error()
	}
	var lines []string
	for _, n := range ns {
		for _, bad := range []string{"fail", "fail?", "handshake", "noaddr"} {
			if n.Has(bad) {
				return "", fmt.Sprintf("sees %s as %s", n.Addr, bad)
			}
		}
		if n.Link != "connected" {
			return "", fmt.Sprintf("link to %s is %s", n.Addr, n.Link)
		}
		role := "master"
		if n.Has("slave") {
			role = "replica-of-" + n.Master
		}
		lines = append(lines, n.ID+" "+n.Addr+" "+role+" "+strings.Join(n.Slots, " "))
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
// same, current map. After d it returns what was still wrong.
func (c *Cluster) WaitHealthy(d time.Duration) error {
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
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster not healthy after %s: %s", d, problem)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
