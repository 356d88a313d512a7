package redistest

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

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
