package main

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// The change-driven run's rows of the targets table and its own section.

// changeTargets are the rows of issue 14 in the targets table.
func (rep *report) changeTargets(p func(string, ...any)) {
	verdict := func(ok bool, miss string) string {
		if ok {
			return "met"
		}
		return "**missed**: " + miss
	}
	if big := rep.size(1000000); big != nil {
		md := big.medians()
		ratio := md.wall / (md.floor + md.floorTTL)
		p("| no regression > 5%% against %s's BENCH.md at 1M sets (full read %s, %.2f× the floor of ZRANGE + PTTL) | full read %s (%+.0f%%), %.2f× the floor of ZRANGE + PTTL (%+.0f%%), same run | %s |\n",
			baseCommit, secs(baseSweep), baseRatioFloors, secs(md.wall), (md.wall/baseSweep-1)*100, ratio, (ratio/baseRatioFloors-1)*100,
			verdict(ratio <= baseRatioFloors*1.05, fmt.Sprintf("the ratio to the Redis floor measured in the same run is %.0f%% above %s's; the machine is shared (load when the run started: %s), and the floor itself moved from 3.75 s to %s", (ratio/baseRatioFloors-1)*100, baseCommit, rep.Machine.Load, secs(md.floor+md.floorTTL))))
	}
	ch := rep.Changes
	if ch == nil {
		return
	}
	var worstShare, worstP99 float64
	exact, compared := true, 0
	var heap, rss uint64
	var shares, p99s []string
	readsOK := true
	var reads []string
	basis := ""
	for _, sc := range ch.Scenarios {
		if sc.Full {
			continue
		}
		basis = aloneBasis(&sc)
		share := sc.share()
		worstShare = max(worstShare, share)
		shares = append(shares, fmt.Sprintf("%g%%: %.1f%%", sc.Frac*100, share*100))
		worstP99 = max(worstP99, sc.p99Rise())
		p99s = append(p99s, fmt.Sprintf("%g%%: %.2f → %.2f ms", sc.Frac*100, sc.p99Alone(), sc.P99With))
		if len(sc.Mismatches) > 0 {
			exact = false
		}
		compared += sc.Compared
		heap, rss = max(heap, sc.Heap), max(rss, sc.RSS)
		perInterval := sc.KeysRead / sc.Phase * changeInterval.Seconds()
		reads = append(reads, fmt.Sprintf("%g%% written: %.0f keys read per interval", sc.Frac*100, perInterval))
		if perInterval > 0.5*float64(rep.changesN()) {
			readsOK = false
		}
	}
	p("| exporter's share of Redis CPU at steady state <= 10%% of one core, default settings, 1M sets, by share of sets written per interval | with the exporter less %s: %s | %s |\n", basis, strings.Join(shares, "; "),
		verdict(worstShare <= 0.10, fmt.Sprintf("%.1f%% at worst", worstShare*100)))
	p("| application p99 during sweeps within +0.5 ms of the application alone (same writes, no exporter) | %s → with the exporter: %s | %s |\n", basis, strings.Join(p99s, "; "),
		verdict(worstP99 <= 0.5, fmt.Sprintf("+%.2f ms at worst", worstP99)))
	p("| numbers exact: at checkpoints every gauge equals a full read of Redis at that moment | %d figures compared, %s | %s |\n", compared,
		map[bool]string{true: "all equal", false: "some differ (see below)"}[exact], verdict(exact, "see the change-driven table"))
	p("| live heap <= 150 MB / RSS <= 300 MB at 1M sets, default settings (the largest of the change-driven phases) | %s / %s | %s |\n", mb(heap), mb(rss),
		verdict(heap <= 150e6 && rss <= 300e6, "the tables the exporter keeps between sweeps, not the sweep in flight: a heap profile that counts every 4 KB (`-heapprofile`) at the end of a 10% phase summed to 133.0 MB, of which the member table 59.4 MB (2.6M members: the phases' writes add one to most sets; 20 B a slot, in 64 parts 80-90% full), the users 48.3 MB (32 B a record, 5.2 MB of index, 11.8 MB of names), the held keys 20.9 MB (what replaying a key takes, its expiry: 16 B and 5 B of index; its user is the key), the sweep's sums 3.1 MB and all else 0.9 MB, the changed key names included. A sweep that falls behind the writes holds more names (up to a quarter of the keys, about 28 B each, for it and the next), which is how a phase reaches 149 MB in some runs. Well under 150 MB in every run needs a denser member table (16 B a slot) or fewer bytes a changed name"))
	p("| keys that did not change are not read again each interval | %s | %s |\n", strings.Join(reads, "; "),
		verdict(readsOK, "more than half the keys read per interval"))
	for _, sc := range ch.Scenarios {
		if sc.Full {
			continue
		}
		n := float64(rep.changesN())
		reads := sc.FirstShare - sc.IdleShare
		perKey := sc.FirstRead * reads * 1e6 / n
		// The unpaced first read of the full-read row is of the same sets
		// (the sizes above are not: the application's writes here add a
		// member to nearly every set).
		unpaced := ""
		for _, full := range ch.Scenarios {
			if full.Full && full.FirstRead > 0 {
				u := full.FirstRead * (full.FirstShare - full.IdleShare) * 1e6 / n
				unpaced = fmt.Sprintf("; unpaced (the full-read row's first read, same sets): %.2f µs a key, %.2f× less", u, perKey/u)
			}
		}
		p("| first complete picture of %d slot sets within 40 s, default settings (sampling.timeout 30s, a tenth of a core) | %s; the reads at %.1f%% of a core above Redis's idle %.1f%%, %.2f µs a key (40 s needs 4)%s | %s |\n",
			rep.changesN(), secs(sc.FirstRead), reads*100, sc.IdleShare*100, perKey, unpaced,
			verdict(sc.FirstRead <= 40, fmt.Sprintf("%.0f%% over. "+
				"Paced, a key costs Redis more than in an unpaced deep pipeline (docs/design.md, Protecting Redis): each batch that wakes an idle Redis has a fixed price, and finds its keys' entries cold unless read right after their SCAN. "+
				"A first read goes in batches of 300, each right after its SCAN page, and reads members with ZSCAN, which gives scores as Redis stores them where ZRANGE prints them. "+
				"BenchmarkFirstPicture, 1M sets, in turn: ZSCAN 3.98, 3.99 and 5.00 µs a key against 4.13, 5.08 and 5.96 with ZRANGE; batches of 600 spent 1.20 µs a key outside Redis's commands against 1.31 at 300 (means of 5 and 3), less than the machine's drift between runs (4.3-5.2 µs a key in all), for twice the time other clients wait behind a batch. "+
				"`go test -bench FirstPicture ./internal/sweep -args -first-picture-unpaced` gives the unpaced cost on the same machine: 3.58-4.09 µs a key on the day of the batch figures, already near the 4 µs that 40 s needs",
				(sc.FirstRead/40-1)*100)))
		break
	}
}

// aloneBasis says what sc's phase with the exporter is set against
// (changeScenario.cpuAlone).
func aloneBasis(sc *changeScenario) string {
	if sc.bracketed() {
		return "the mean of the application alone before and after"
	}
	return "the application alone before"
}

func (rep *report) changesN() int {
	return slices.Max(rep.Opts.sizes)
}

func (rep *report) changesSection(p func(string, ...any)) {
	ch := rep.Changes
	if ch == nil {
		return
	}
	p("## Reading what changed: Redis CPU, keys read, application latency\n\n")
	p("%d slot sets on a fresh server. An application writes a share of the sets every %s (`ZADD key <now + ttl> hb` on random sets, in batches of 100 spread over the interval; ticks missed while a pipeline was out are made up, up to %d batches at once) while a probe sends a GET or SET every millisecond on a connection of its own (DB 1); the application, writes and probe, is a process of its own, apart from the exporter's. Phases of %d s: the application alone at each rate in turn; then the application at each rate with the exporter running as the binary runs it (`Start`, sampling.interval %s); then, the exporter stopped, the application alone again at each rate. The exporter's share is redis-server's CPU rate with it less the mean of the application alone before and after it (from /proc), which brackets the phase with it: on this machine Redis's CPU for the same application drifts by 1-4 points of a core between windows minutes apart, so one phase without it, set against one with it, measures the drift as much as the exporter. p99 alone, before and after, is the probe's in the phases without the exporter (same writes), and the rise is set against their mean. The full-read row has no phase after (its exporter runs last) and is set against the phase before. Keys read are the PTTL calls Redis counted during the phase (one a key read) (the application only writes), sets written its ZADDs; keys read include the slow reconciliation's share of every key (each key about every full_scan_interval). A sweep reads every set written since the one before, so when the reads fall short of the sets written the sweeps take longer than the interval: the sweeps that ended in the phase and the longest gap between two say by how much, and slot_exporter_sampling_period_seconds (its value at the end of the phase is the last column of the pair) is the exporter's own account of it. After each phase the writes pause, the exporter's next sweep is compared, gauge by gauge, with a full read by a fresh exporter. The full read runs with `track_changes: false` and no pace, as every sweep did before.\n\n",
		rep.changesN(), changeInterval, maxCatchUp, rep.Opts.phase, changeInterval)
	changeTable(p, ch.Scenarios)
	p("\n\nWhere the exporter's share went: Redis's own time inside each of the exporter's commands (INFO commandstats over the phase, as a share of a core, with calls per second; socket reads and writes, and sending invalidations, are not in it, which is why the total is below the share measured from /proc):\n\n")
	changeCommandShares(p, ch.Scenarios)
	p("\n\nHeap is the live heap after two forced GCs at the end of each phase, taken before the exactness check builds its reference exporter in the same process. The change-driven rows run first, in one exporter; the full read runs after them, so its RSS includes what they left to the Go runtime, which returns memory to the OS only lazily.\n\n")
	p("The first full read is paced like every read (10%% of a core by default, from an assumed 8 µs a key until INFO cpu has measured the real cost), with the default sampling.timeout of 30 s: a sweep cut off there goes on from where it stopped. It takes tens of seconds at 1M sets, and the sampling period says so while it runs. Before the exporter starts, Redis's CPU is measured for 10 s with nothing reading or writing (INFO cpu): what a Redis of a million keys with TTLs spends on its own, which the pace measures too and does not charge to the reads.\n\n")
}

// changeTable is the change-driven run's table, one row a situation, and
// the figures that differed from a full read.
func changeTable(p func(string, ...any), scens []changeScenario) {
	p("| situation | Redis CPU, application alone before | with the exporter | application alone after | exporter's share of a core | sets written per interval | keys read/s | keys read per interval | sweeps ended (longest gap) | sampling period at the end | p99 alone before | p99 with the exporter | p99 alone after | first full read | gauges compared | differing | heap | RSS |\n")
	p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, sc := range scens {
		cpuAfter, p99After := "-", "-"
		if sc.bracketed() {
			cpuAfter, p99After = fmt.Sprintf("%.1f%%", sc.CPUAloneAfter*100), fmt.Sprintf("%.2f ms", sc.P99AloneAfter)
		}
		p("| %s | %.1f%% | %.1f%% | %s | %.1f%% | %.0f | %.0f | %.0f | %d (%s) | %s | %.2f ms | %.2f ms | %s | %s | %d | %d | %s | %s |\n", sc.Name,
			sc.CPUAlone*100, sc.CPUWith*100, cpuAfter, sc.share()*100, float64(sc.Written)/sc.Phase*changeInterval.Seconds(), sc.KeysRead/sc.Phase,
			sc.KeysRead/sc.Phase*changeInterval.Seconds(), sc.Sweeps, secs(sc.LongestGap), secs(sc.Period), sc.P99Alone, sc.P99With, p99After, secs(sc.FirstRead),
			sc.Compared, len(sc.Mismatches), mb(sc.Heap), mb(sc.RSS))
	}
	for _, sc := range scens {
		for _, m := range sc.Mismatches {
			p("\n- %s: %s", sc.Name, m)
		}
	}
}

// changeCommandShares says, per situation, what Redis spent inside each of
// the exporter's commands.
func changeCommandShares(p func(string, ...any), scens []changeScenario) {
	for _, sc := range scens {
		if len(sc.Commands) == 0 {
			continue
		}
		names := slices.Collect(maps.Keys(sc.Commands))
		slices.SortFunc(names, func(a, b string) int { return cmp.Compare(sc.Commands[b].Usec, sc.Commands[a].Usec) })
		var parts []string
		total := 0.0
		for _, n := range names {
			c := sc.Commands[n]
			share := float64(c.Usec) / 1e6 / sc.Phase
			total += share
			if share >= 0.0005 {
				parts = append(parts, fmt.Sprintf("%s %.1f%% (%.0f/s)", n, share*100, float64(c.Calls)/sc.Phase))
			}
		}
		p("- %s: %.1f%% in all; %s\n", sc.Name, total*100, strings.Join(parts, ", "))
	}
}
