package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/redisinfo"
	"github.com/slotexporter/slot_exporter/internal/redisproc"
)

// The Redis the change-driven run measures: one server (-addr,
// -redis-pid) or a cluster's nodes (-worker-nodes, -redis-pids). The run
// is the same for both; what differs is how the exporter, the application
// and the probe reach it, and that Redis's CPU and INFO commandstats are
// summed over every node.

var (
	workerNodes = flag.String("worker-nodes", "", "internal: a cluster's node addresses, comma separated")
	workerPIDs  = flag.String("redis-pids", "", "internal: their redis-server processes, same order")
)

type redisTarget struct {
	addrs     []string // one server's address, or every node of a cluster
	pids      []int
	isCluster bool
	nodes     []*redis.Client // one each, for INFO commandstats
}

func newRedisTarget(o *workerOpts) (*redisTarget, error) {
	if *workerNodes == "" {
		return &redisTarget{addrs: []string{o.addr}, pids: []int{o.redisPID}}, nil
	}
	t := &redisTarget{addrs: strings.Split(*workerNodes, ","), isCluster: true}
	for _, p := range strings.Split(*workerPIDs, ",") {
		pid, err := strconv.Atoi(p)
		if err != nil {
			return nil, fmt.Errorf("-redis-pids: %w", err)
		}
		t.pids = append(t.pids, pid)
	}
	if len(t.pids) != len(t.addrs) {
		return nil, fmt.Errorf("%d nodes but %d redis-server pids", len(t.addrs), len(t.pids))
	}
	return t, nil
}

// clusterTarget is c as the worker reaches it.
func clusterTarget(c *redisproc.Cluster) *redisTarget {
	t := &redisTarget{addrs: c.Addrs(), isCluster: true}
	for _, s := range c.Nodes {
		t.pids = append(t.pids, s.PID())
	}
	return t
}

// args are the flags a child process needs to reach the same Redis.
func (t *redisTarget) args() []string {
	if !t.isCluster {
		return []string{"-addr", t.addrs[0], "-redis-pid", strconv.Itoa(t.pids[0])}
	}
	pids := make([]string, len(t.pids))
	for i, p := range t.pids {
		pids[i] = strconv.Itoa(p)
	}
	return []string{"-worker-nodes", strings.Join(t.addrs, ","), "-redis-pids", strings.Join(pids, ",")}
}

// redisBlock is the exporter config's redis block: whatever config/
// accepts for one server or a cluster.
func (t *redisTarget) redisBlock() []string {
	if !t.isCluster {
		return []string{fmt.Sprintf("addr: %q", t.addrs[0])}
	}
	lines := []string{"mode: cluster", "addrs:"}
	for _, a := range t.addrs {
		lines = append(lines, fmt.Sprintf("  - %q", a))
	}
	return lines
}

// openApplication is the Redis the application writes to and its client;
// done closes both.
func openApplication(o *workerOpts) (*redisTarget, redis.UniversalClient, func(), error) {
	target, err := newRedisTarget(o)
	if err != nil {
		return nil, nil, nil, err
	}
	c := target.client()
	return target, c, func() { _ = c.Close(); target.close() }, nil
}

// client is the application's: a cluster client sends each write to the
// key's node.
func (t *redisTarget) client() redis.UniversalClient {
	if !t.isCluster {
		return redis.NewClient(&redis.Options{Addr: t.addrs[0], ReadTimeout: time.Minute})
	}
	return redis.NewClusterClient(&redis.ClusterOptions{Addrs: t.addrs, ReadTimeout: time.Minute})
}

// probeClient is the probe's: one connection (per node). On a single
// server it uses DB 1, out of the sweep's SCAN; a cluster has only DB 0,
// where its thousand keys are beside the million slot sets, and outside
// the family's match.
func (t *redisTarget) probeClient() redis.UniversalClient {
	if !t.isCluster {
		return redis.NewClient(&redis.Options{Addr: t.addrs[0], DB: 1, PoolSize: 1})
	}
	return redis.NewClusterClient(&redis.ClusterOptions{Addrs: t.addrs, PoolSize: 1})
}

// cpuReading is every redis-server's CPU time at one moment.
type cpuReading struct {
	at  time.Time
	cpu []time.Duration
}

func (t *redisTarget) cpu() cpuReading {
	r := cpuReading{at: time.Now()}
	for _, p := range t.pids {
		r.cpu = append(r.cpu, procCPU(p))
	}
	return r
}

// cpuRate is Redis's CPU rate since from (CPU seconds per second): over
// every node, and node by node.
func (t *redisTarget) cpuRate(from cpuReading) (float64, []float64) {
	now := t.cpu()
	dt := now.at.Sub(from.at).Seconds()
	var total float64
	per := make([]float64, len(now.cpu))
	for i := range now.cpu {
		per[i] = (now.cpu[i] - from.cpu[i]).Seconds() / dt
		total += per[i]
	}
	return total, per
}

// commandStats is INFO commandstats summed over every node.
func (t *redisTarget) commandStats(ctx context.Context) (map[string]cmdStat, error) {
	t.connectNodes()
	out := map[string]cmdStat{}
	for _, c := range t.nodes {
		st, err := commandStats(ctx, c)
		if err != nil {
			return nil, err
		}
		for name, v := range st {
			o := out[name]
			o.Calls += v.Calls
			o.Usec += v.Usec
			out[name] = o
		}
	}
	for name, v := range out {
		if v.Calls > 0 {
			v.Per = float64(v.Usec) / float64(v.Calls)
			out[name] = v
		}
	}
	return out, nil
}

// idleSpan is how long Redis's own work is measured before an exporter
// starts: an idle Redis of a million keys uses a few tenths of a percent
// of a core, which /proc's 10 ms ticks could not tell over seconds.
const idleSpan = 10 * time.Second

// idleCPU is Redis's CPU rate over the next span (CPU seconds per
// second, summed over every node), from INFO cpu.
func (t *redisTarget) idleCPU(ctx context.Context, span time.Duration) (float64, error) {
	t.connectNodes()
	read := func() (float64, error) {
		var total float64
		for _, c := range t.nodes {
			info, err := c.Info(ctx, "cpu").Result()
			if err != nil {
				return 0, err
			}
			total += redisinfo.CPU(info)
		}
		return total, nil
	}
	c0, err := read()
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(span):
	}
	c1, err := read()
	if err != nil {
		return 0, err
	}
	return (c1 - c0) / time.Since(t0).Seconds(), nil
}

// connectNodes opens a client to each node, once.
func (t *redisTarget) connectNodes() {
	if t.nodes == nil {
		for _, a := range t.addrs {
			t.nodes = append(t.nodes, redis.NewClient(&redis.Options{Addr: a}))
		}
	}
}

func (t *redisTarget) close() {
	for _, c := range t.nodes {
		_ = c.Close()
	}
}
