package main

import (
	"fmt"
	"strings"
)

// The change-driven run on Redis Cluster: its rows of the targets table
// and its own section.

// nodeShares is the exporter's share of each node's core in a situation
// (with it less the node's CPU under the application alone, nodesAlone),
// and the busiest node's.
func (sc *changeScenario) nodeShares() (per []float64, busiest float64) {
	alone := sc.nodesAlone()
	for i := range sc.NodesWith {
		s := max(sc.NodesWith[i]-alone[i], 0)
		per = append(per, s)
		busiest = max(busiest, s)
	}
	return per, busiest
}

func pcts(v []float64) string {
	out := make([]string, len(v))
	for i, x := range v {
		out[i] = fmt.Sprintf("%.1f%%", x*100)
	}
	return strings.Join(out, " / ")
}

func (rep *report) clusterTargets(p func(string, ...any)) {
	verdict := func(ok bool, miss string) string {
		if ok {
			return "met"
		}
		return "**missed**: " + miss
	}
	const equality = "`TestClusterChangesSameAsFullRead` (every `make test`)"
	cl := rep.Cluster
	if cl == nil {
		p("| the change-driven phases on Redis Cluster, equal to a full read through a reshard, a failover and a node added | equality: %s; cost: not run (-cluster-fracs is empty) | - |\n", equality)
		return
	}
	what := fmt.Sprintf("Redis Cluster (%d masters, no replicas, %d sets, default settings)", cl.Masters, cl.Sets)
	var shares, totals, p99s []string
	var busiest, worstP99 float64
	basis := ""
	var heap, rss uint64
	compared, exact := 0, true
	for _, sc := range cl.Changes.Scenarios {
		per, b := sc.nodeShares()
		busiest = max(busiest, b)
		shares = append(shares, fmt.Sprintf("%g%%: %s", sc.Frac*100, pcts(per)))
		totals = append(totals, fmt.Sprintf("%.1f%%", sc.share()*100))
		worstP99 = max(worstP99, sc.p99Rise())
		p99s = append(p99s, fmt.Sprintf("%g%%: %.2f → %.2f ms", sc.Frac*100, sc.p99Alone(), sc.P99With))
		basis = aloneBasis(&sc)
		heap, rss = max(heap, sc.Heap), max(rss, sc.RSS)
		compared += sc.Compared
		exact = exact && len(sc.Mismatches) == 0
	}
	p("| the change-driven phases on Redis Cluster, equal to a full read through a reshard, a failover and a node added | equality: %s; in this run, %s: %d figures compared with a full read, %s | %s |\n", equality, what, compared,
		map[bool]string{true: "all equal", false: "some differ (see the cluster section)"}[exact], verdict(exact, "see the cluster section"))
	p("| %s: exporter's share of Redis CPU <= 10%% of one core on each node (the busiest node judged) | with the exporter less %s, per node, by share of sets written per interval: %s; over all nodes together %s | %s |\n", what,
		basis, strings.Join(shares, "; "), strings.Join(totals, "; "), verdict(busiest <= 0.10, fmt.Sprintf("%.1f%% of a core on the busiest node", busiest*100)))
	p("| %s: application p99 within +0.5 ms of the application alone | %s → with the exporter: %s | %s |\n", what, basis, strings.Join(p99s, "; "),
		verdict(worstP99 <= 0.5, fmt.Sprintf("+%.2f ms at worst", worstP99)))
	p("| %s: live heap <= 150 MB / RSS <= 300 MB | %s / %s | %s |\n", what, mb(heap), mb(rss),
		verdict(heap <= 150e6 && rss <= 300e6, fmt.Sprintf("%.1f MB over: the tables of one server (what they hold: the change-driven live heap row), and per node a change feed of its own, its connections and its reads in flight (not measured apart)", float64(heap)/1e6-150)))
}

func (rep *report) clusterSection(p func(string, ...any)) {
	cl := rep.Cluster
	if cl == nil {
		return
	}
	p("## Reading what changed on Redis Cluster\n\n")
	p("The change-driven run of the previous section, on a Redis Cluster: %d masters and no replicas (the exporter reads the masters, `read_from: primary` by default; a replica would add replication's CPU, not the reads'), each its own redis-server on this machine, started as an operator starts one (`redis-cli --cluster create`, internal/redisproc). %d slot sets, the same generator as above, each loaded on the master that owns its slot (%s keys a master, in %s). The exporter runs with `mode: cluster` and the three addresses as seeds, otherwise the defaults: tracking on every node, the pace at 10%% of a core. The application writes through a cluster client; the probe is a cluster client too, one connection a node, in DB 0 (a cluster has no other; its thousand `probe:*` keys are outside the family's match). Redis CPU is the sum over the three redis-server processes (from /proc), keys read and the commands below are summed over the nodes' INFO commandstats. Phases of %d s, as above; no full-read row. The three servers, the application, the probe and the exporter share this machine's %d cores (load average as the run began: %s), so a busy machine shows in p99 and in commandstats, which counts wall time inside a command, preemption included.\n\n",
		cl.Masters, cl.Sets, joinInts(cl.KeysPerNode), secs(cl.LoadTime.Seconds()), rep.Opts.phase, rep.Machine.NProc, cl.Load)
	changeTable(p, cl.Changes.Scenarios)
	p("\n\nThe exporter's share of each node's core (with it less the mean of the application alone before and after it, node by node in the order of the keys above), and whether the pace's tenth of a core (sampling.redis_cpu_share) held per node or for the cluster in total:\n\n")
	for _, sc := range cl.Changes.Scenarios {
		per, busiest := sc.nodeShares()
		total := sc.share()
		held := "for the cluster in total, and so on every node"
		switch {
		case busiest > 0.10:
			held = "on no node: the busiest went past it"
		case total > 0.10:
			held = "on each node, not in total"
		}
		after := "not measured"
		if sc.bracketed() {
			after = pcts(sc.NodesAloneAfter)
		}
		p("- %s: %s (Redis CPU alone before %s, with the exporter %s, alone after %s); %.1f%% over all nodes together: held %s\n",
			sc.Name, pcts(per), pcts(sc.NodesAlone), pcts(sc.NodesWith), after, total*100, held)
	}
	p("\nWhere the reads fall short of the sets written, the sampling period stretches past the interval (the table says by how much).\n")
	p("\nWhere the exporter's share went, summed over the nodes (as above):\n\n")
	changeCommandShares(p, cl.Changes.Scenarios)
	p("\n")
}

func joinInts(v []int64) string {
	out := make([]string, len(v))
	for i, x := range v {
		out[i] = fmt.Sprint(x)
	}
	return strings.Join(out, " / ")
}
