package redistest

import (
	"context"
	"strconv"
	"strings"
	"time"
)

// roles lists the current masters (those owning slots) and replicas as
// the first node sees them.
func (c *Cluster) roles() (masters, replicas []*Server) {
	c.t.Helper()
	ns, err := c.proc.ClusterNodes(context.Background(), c.Nodes[0].Addr)
	if err != nil {
		c.t.Fatalf("CLUSTER NODES: %v", err)
	}
	for _, n := range ns {
		s := c.Node(n.Addr)
		if s == nil {
			c.t.Fatalf("CLUSTER NODES names unknown node %s", n.Addr)
		}
		switch {
		case n.Has("slave"):
			replicas = append(replicas, s)
		case n.Has("master") && len(n.Slots) > 0:
			masters = append(masters, s)
		}
	}
	return masters, replicas
}

// Masters are the nodes that currently own slots.
func (c *Cluster) Masters() []*Server { m, _ := c.roles(); return m }

// OtherMaster returns a current master other than s: a migration's
// target.
func (c *Cluster) OtherMaster(s *Server) *Server {
	c.t.Helper()
	for _, m := range c.Masters() {
		if m != s {
			return m
		}
	}
	c.t.Fatalf("no master other than %s", s.Addr)
	return nil
}

// Replicas are the nodes that currently replicate a master.
func (c *Cluster) Replicas() []*Server { _, r := c.roles(); return r }

// MasterOf returns the master a replica currently replicates.
func (c *Cluster) MasterOf(replica *Server) *Server {
	c.t.Helper()
	ns, err := c.proc.ClusterNodes(context.Background(), replica.Addr)
	if err != nil {
		c.t.Fatalf("CLUSTER NODES on %s: %v", replica.Addr, err)
	}
	var masterID string
	for _, n := range ns {
		if n.Has("myself") {
			masterID = n.Master
		}
	}
	for _, n := range ns {
		if n.ID == masterID {
			return c.Node(n.Addr)
		}
	}
	c.t.Fatalf("%s replicates no known master", replica.Addr)
	return nil
}

// SlotOwners returns the master of every slot, as the first node sees it.
func (c *Cluster) SlotOwners() []*Server {
	c.t.Helper()
	ns, err := c.proc.ClusterNodes(context.Background(), c.Nodes[0].Addr)
	if err != nil {
		c.t.Fatalf("CLUSTER NODES: %v", err)
	}
	out := make([]*Server, ClusterSlots)
	for _, n := range ns {
		if !n.Has("master") {
			continue
		}
		for _, r := range n.Slots {
			lo, hi, ok := strings.Cut(r, "-")
			if !ok {
				hi = lo
			}
			a, _ := strconv.Atoi(lo)
			b, _ := strconv.Atoi(hi)
			for sl := a; sl <= b && sl < ClusterSlots; sl++ {
				out[sl] = c.Node(n.Addr)
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
		n, err := c.NodeClient(m).Wait(context.Background(), per, 10*time.Second).Result()
		if err != nil || n < int64(per) {
			c.t.Fatalf("WAIT %d on %s: %d acknowledged, %v", per, m.Addr, n, err)
		}
	}
}

// Failover runs CLUSTER FAILOVER on replica (a coordinated, lossless
// manual failover) and waits until every node agrees that it is a master
// and the cluster is healthy again. It returns the former master.
func (c *Cluster) Failover(replica *Server, d time.Duration) *Server {
	c.t.Helper()
	old := c.MasterOf(replica)
	if err := c.NodeClient(replica).ClusterFailover(context.Background()).Err(); err != nil {
		c.t.Fatalf("CLUSTER FAILOVER on %s: %v", replica.Addr, err)
	}
	deadline := time.Now().Add(d)
	for {
		role, err := c.NodeClient(replica).Do(context.Background(), "ROLE").Slice()
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
