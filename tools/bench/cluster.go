package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"strconv"
	"time"

	"github.com/slotexporter/slot_exporter/internal/redisproc"
	"github.com/slotexporter/slot_exporter/internal/topology"
)

// The change-driven run on Redis Cluster: the same application, probe and
// exporter as on one server (workerChanges), against a cluster of
// clusterMasters masters started the way an operator starts one
// (redisproc.StartCluster), with the exporter in cluster mode. No
// replicas: the exporter reads the masters (read_from: primary, the
// default), and a replica's CPU would be replication's, not the reads'.

// clusterMasters is the smallest cluster redis-cli --cluster create makes.
const clusterMasters = 3

// The run's own flags, kept here so that main only calls in.
var (
	clusterFracs = flag.String("cluster-fracs", "0.1", "shares of sets written per interval in the change-driven run on a Redis Cluster of 3 masters (empty skips it)")
	clusterSets  = flag.Int("cluster-sets", 1000000, "slot sets in the change-driven run on Redis Cluster")
)

// clusterResult is the change-driven run on a cluster.
type clusterResult struct {
	Masters int
	Sets    int
	// KeysPerNode is each master's DBSIZE after loading, in the order of
	// the scenarios' per-node CPU.
	KeysPerNode []int64
	LoadTime    time.Duration
	// Load is the machine's load average as the run began: the cluster's
	// three servers share the machine's cores with everything else.
	Load    string
	Changes changesResult
}

// runClusterChanges starts the cluster, loads the sets across it and runs
// the change-driven worker against it; nil when -cluster-fracs is empty.
func runClusterChanges(ctx context.Context, o *opts) (*clusterResult, error) {
	if *clusterFracs == "" || *clusterSets <= 0 {
		return nil, nil
	}
	n := *clusterSets
	log.Printf("cluster: %d masters, %d sets, change-driven reads at %s of sets written per interval", clusterMasters, n, *clusterFracs)
	c, err := redisproc.StartCluster(clusterMasters, 0)
	if err != nil {
		return nil, err
	}
	defer c.Stop()
	res := &clusterResult{Masters: clusterMasters, Sets: n, Load: describeMachine().Load}
	addrs := c.Addrs()
	first := c.NodeClient(addrs[0])
	owners, err := slotOwners(ctx, c)
	if err != nil {
		return nil, err
	}
	now, err := first.Time(ctx).Result()
	if err != nil {
		return nil, err
	}
	_, res.LoadTime, err = loadTo(addrs, func(key string) int { return owners[topology.HashSlot(key)] },
		newGen(uint64(n), now.UnixMilli(), benchTiming), 0, n)
	if err != nil {
		return nil, err
	}
	var total int64
	for _, a := range addrs {
		k, err := c.NodeClient(a).DBSize(ctx).Result()
		if err != nil {
			return nil, err
		}
		res.KeysPerNode = append(res.KeysPerNode, k)
		total += k
	}
	if total != int64(n) {
		return nil, fmt.Errorf("DBSIZE over the masters %d after loading %d sets", total, n)
	}
	log.Printf("cluster: loaded in %s (%v keys a master)", res.LoadTime.Round(time.Millisecond), res.KeysPerNode)
	args := append([]string{"-role", "changes", "-sets", strconv.Itoa(n), "-worker-fracs", *clusterFracs,
		"-worker-phase", strconv.Itoa(o.phase)}, clusterTarget(c).args()...)
	if o.heapprofile != "" {
		args = append(args, "-worker-heapprofile", o.heapprofile+".cluster")
	}
	if err := runChild(ctx, args, &res.Changes); err != nil {
		return nil, err
	}
	return res, nil
}

// slotOwners is the index in c.Addrs of every slot's master, from CLUSTER
// SLOTS.
func slotOwners(ctx context.Context, c *redisproc.Cluster) ([]int, error) {
	index := map[string]int{}
	for i, a := range c.Addrs() {
		index[a] = i
	}
	slots, err := c.NodeClient(c.Nodes[0].Addr).ClusterSlots(ctx).Result()
	if err != nil {
		return nil, err
	}
	owners := make([]int, redisproc.ClusterSlots)
	for i := range owners {
		owners[i] = -1
	}
	for _, r := range slots {
		i, ok := index[r.Nodes[0].Addr]
		if !ok {
			return nil, fmt.Errorf("CLUSTER SLOTS names %s, not a node started here", r.Nodes[0].Addr)
		}
		for s := r.Start; s <= r.End; s++ {
			owners[s] = i
		}
	}
	for s, i := range owners {
		if i < 0 {
			return nil, fmt.Errorf("slot %d has no master", s)
		}
	}
	return owners, nil
}
