package topology_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/redistest"
	"github.com/slotexporter/slot_exporter/internal/topology"
)

// TestNodesPastANodeWithoutSlots: a node taken out of the cluster
// (CLUSTER RESET after del-node, and still running) answers CLUSTER SLOTS
// with no slots, and go-redis reloads its slot map from a node it picks
// at random among the addresses it knows: a listing from that node has no
// master, and sweeps failed "no Redis node to sweep" on and off for a
// minute. One node of four is such a node here, so 40 listings would
// meet it about ten times.
func TestNodesPastANodeWithoutSlots(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 0)
	lonely := redistest.Start(t, "--cluster-enabled", "yes")
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: append(cl.Addrs(), lonely.Addr)})
	t.Cleanup(func() { _ = cc.Close() })
	topo := topology.New(cc, false)
	for i := range 40 {
		nodes, err := topo.Nodes(context.Background())
		if err != nil || len(nodes) != 3 {
			t.Fatalf("listing %d: %d nodes, %v; want the 3 masters", i, len(nodes), err)
		}
	}
}
