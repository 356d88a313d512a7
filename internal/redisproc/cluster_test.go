package redisproc

import (
	"context"
	"os"
	"testing"
)

// TestClusterLifecycle: StartCluster returns a healthy cluster whose
// masters split every slot, a node started later joins it, and Stop
// leaves no server running and no scratch directory behind.
func TestClusterLifecycle(t *testing.T) {
	c, err := StartCluster(3, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	ctx := context.Background()
	ns, err := c.ClusterNodes(ctx, c.Nodes[0].Addr)
	if err != nil {
		t.Fatal(err)
	}
	masters := 0
	for _, n := range ns {
		if n.Has("master") && len(n.Slots) > 0 {
			masters++
		}
	}
	if len(ns) != 3 || masters != 3 {
		t.Fatalf("CLUSTER NODES: %d nodes, %d masters with slots, want 3 and 3: %+v", len(ns), masters, ns)
	}
	s, err := c.StartNode()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddNode(ctx, s, c.Nodes[0].Addr); err != nil {
		t.Fatal(err)
	}
	if ns, err = c.ClusterNodes(ctx, s.Addr); err != nil || len(ns) != 4 {
		t.Fatalf("the new node sees %d nodes (%v), want 4", len(ns), err)
	}
	servers := append([]*Server(nil), c.Nodes...)
	c.Stop()
	for _, s := range servers {
		if s.Running() {
			t.Errorf("%s still running after Stop", s.Addr)
		}
		if _, err := os.Stat(s.Dir); !os.IsNotExist(err) {
			t.Errorf("%s's directory %s left behind (%v)", s.Addr, s.Dir, err)
		}
	}
}
