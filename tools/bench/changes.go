package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/redisproc"
	"github.com/slotexporter/slot_exporter/internal/snapshot"
	"github.com/slotexporter/slot_exporter/internal/sweep"
	"github.com/slotexporter/slot_exporter/redisconn"
)

// The change-driven run: the exporter with its defaults, client tracking
// on and the pace (10% of a Redis core, sampling.interval 5s) against the
// 1M-set server while an application writes a share of the sets every
// interval, next to the full read of every key every interval as it was
// before (track_changes: false, no pace). For each situation, phases of
// equal length: the application alone, then the application and the
// exporter, then (the change-driven situations) the application alone
// again once the exporter has stopped. The exporter's share of Redis CPU
// is redis-server's CPU rate with it less the mean of the rates without
// it before and after (from /proc; changeScenario.cpuAlone); application
// latency is a GET or SET every 1 ms on a connection of its own, p99 per
// phase.

// changeScenario is one situation of the change-driven run.
type changeScenario struct {
	Name     string  `json:"name"`
	Frac     float64 `json:"frac"` // of sets written per interval
	Full     bool    `json:"full"` // every key read every interval
	Phase    float64 `json:"phase_s"`
	CPUAlone float64 `json:"cpu_alone"` // redis-server CPU s/s, application alone
	CPUWith  float64 `json:"cpu_with"`  // the same with the exporter
	// CPUAloneAfter is the application alone again, once the exporter
	// has stopped; with CPUAlone it brackets the phase with the
	// exporter, which is set against their mean (cpuAlone). Zero where
	// it was not measured: the full-read row, a JSON of an older run.
	CPUAloneAfter float64 `json:"cpu_alone_after"`
	// The same per redis-server process: a cluster's nodes, in the
	// order of its addresses.
	NodesAlone      []float64 `json:"nodes_alone"`
	NodesWith       []float64 `json:"nodes_with"`
	NodesAloneAfter []float64 `json:"nodes_alone_after"`
	Writes          int       `json:"writes"`       // application writes per phase
	KeysRead        float64   `json:"keys_read"`    // keys the exporter read in its phase
	P99Alone        float64   `json:"p99_alone_ms"` // the application alone, same writes
	P99With         float64   `json:"p99_with_ms"`
	P99AloneAfter   float64   `json:"p99_alone_after_ms"` // the application alone after the exporter
	Period          float64   `json:"period_s"`           // slot_exporter_sampling_period_seconds at the end
	// Sweeps is how many sweeps ended in the phase; LongestGap the longest
	// time without one (the phase's start and end count as ends).
	Sweeps     int     `json:"sweeps"`
	LongestGap float64 `json:"longest_gap_s"`
	// Exactness: the exporter's gauges against a full read of Redis at
	// the same moment (writes paused), by a second exporter.
	Compared   int      `json:"compared"`
	Mismatches []string `json:"mismatches"`
	Heap       uint64   `json:"heap"`
	RSS        uint64   `json:"rss"`
	FirstRead  float64  `json:"first_read_s"` // the initial full read, paced
	// FirstShare is Redis's CPU over the first read, as a share of a
	// core: the application is not writing yet, so it is the exporter's
	// (plus Redis's own idle work).
	FirstShare float64 `json:"first_read_share"`
	// IdleShare is Redis's CPU in the seconds before the exporter
	// starts, nothing reading or writing (INFO cpu, for its
	// microseconds): its own work on a million keys with TTLs, which
	// FirstShare includes and the pace does not charge to the reads.
	IdleShare float64 `json:"idle_share"`
	// Commands is what Redis counted of each of the exporter's commands
	// in its phase (INFO commandstats: calls and µs inside the command,
	// socket work not included); the application's ZADDs and the
	// probe's GET/SET are left out.
	Commands map[string]redisproc.CommandStat `json:"commands"`
	// Written is the application's ZADDs in the exporter's phase, as
	// Redis counted them.
	Written int64 `json:"written"`
}

// bracketed says whether the application ran alone after the exporter's
// phase as well as before it. Not in the full-read row, whose exporter
// runs last, nor in a JSON of an older run.
func (sc *changeScenario) bracketed() bool {
	return sc.CPUAloneAfter > 0
}

// cpuAlone is Redis's CPU under the application alone as the phase with
// the exporter is set against: the mean of the phases before and after
// it, or the one before where there was none after. nodesAlone and
// p99Alone are the same of each node's CPU and of the probe's p99.
func (sc *changeScenario) cpuAlone() float64 {
	return bracketMean(sc.CPUAlone, sc.CPUAloneAfter, sc.bracketed())
}

func (sc *changeScenario) nodesAlone() []float64 {
	if !sc.bracketed() || len(sc.NodesAloneAfter) != len(sc.NodesAlone) {
		return sc.NodesAlone
	}
	out := make([]float64, len(sc.NodesAlone))
	for i := range out {
		out[i] = bracketMean(sc.NodesAlone[i], sc.NodesAloneAfter[i], true)
	}
	return out
}

func (sc *changeScenario) p99Alone() float64 {
	return bracketMean(sc.P99Alone, sc.P99AloneAfter, sc.bracketed())
}

// bracketMean is what a phase with the exporter is set against: the mean
// of the application alone before and after it, or the phase before where
// none after was measured. The change-driven phases and the outside
// measurement both judge by it.
func bracketMean(before, after float64, measuredAfter bool) float64 {
	if !measuredAfter {
		return before
	}
	return (before + after) / 2
}

// share is the exporter's share of Redis's CPU (of a core, all nodes
// together): with it less the application alone.
func (sc *changeScenario) share() float64 {
	return max(sc.CPUWith-sc.cpuAlone(), 0)
}

// p99Rise is what the exporter added to the probe's p99, in ms.
func (sc *changeScenario) p99Rise() float64 {
	return sc.P99With - sc.p99Alone()
}

type changesResult struct {
	Scenarios []changeScenario `json:"scenarios"`
}

const changeInterval = 5 * time.Second

// changeConfig is the exporter's config; redis is its redis block
// (redisTarget.redisBlock).
func changeConfig(redis []string, full bool) string {
	samp := []string{"interval: " + changeInterval.String(), "window: 1m"}
	// Otherwise the defaults: track_changes on, the pace at 10% of a core,
	// sampling.timeout 30s (the first read goes on across its cut-offs).
	if full {
		// The timeout too: a full read of 1M sets unpaced takes 6 s on a
		// quiet machine, and more than the default 30 s on a busy one,
		// which failed the exactness check's reference read.
		samp = append(samp, "track_changes: false", "redis_cpu_share: 0", "timeout: 5m")
	}
	return redisproc.Config{
		Redis:    redis,
		Sampling: samp,
		Families: []redisproc.Family{benchFamily(benchTiming)},
	}.YAML()
}

func sweeperFor(yaml string) (*sweep.Sweeper, redis.UniversalClient, error) {
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		return nil, nil, err
	}
	client, err := redisconn.New(&cfg.Redis)
	if err != nil {
		return nil, nil, err
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s, err := sweep.New(context.Background(), cfg, client, logger, nil)
	if err != nil {
		_ = client.Close()
		return nil, nil, err
	}
	return s, client, nil
}

// gaugeFigures are the gauges a full read must agree on.
func gaugeFigures(f *snapshot.Family) map[string]float64 {
	out := map[string]float64{"sets": float64(f.Sets), "users_active": float64(f.Aggregates.Active),
		"users_at_limit": float64(f.Aggregates.AtLimit), "users_over_limit": float64(f.Aggregates.OverLimit),
		"users_floor_nonzero": float64(f.Aggregates.FloorNonzero)}
	for _, v := range f.Gauges {
		if v.Metric == snapshot.SamplingPeriod {
			continue
		}
		out[v.Metric.Name+"{"+strings.Join(v.Labels, ",")+"}"] = v.V
	}
	return out
}

func workerChanges(o *workerOpts) error {
	ctx := context.Background()
	var res changesResult
	var fracs []float64
	for _, f := range strings.Split(o.fracs, ",") {
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return fmt.Errorf("-fracs: %w", err)
		}
		fracs = append(fracs, v)
	}
	phase := time.Duration(o.phase) * time.Second
	target, c, done, err := openApplication(o)
	if err != nil {
		return err
	}
	defer done()
	writerFor := func(f float64) *writer { return &writer{target: target, n: o.sets, frac: f, c: c} }

	// The application alone, at each rate, before any exporter runs.
	var scen []changeScenario
	full := changeScenario{Name: "full read every interval, as before (track_changes: false, unpaced)", Frac: 0.1, Full: true}
	if o.full {
		scen = append(scen, full)
	}
	for _, f := range fracs {
		scen = append(scen, changeScenario{Name: fmt.Sprintf("default settings (track_changes on, paced to 10%% of a core), %g%% of sets written per interval", f*100), Frac: f})
	}
	// alonePhase runs the application alone at frac for a phase: Redis's
	// CPU, per node too, the writes made and the probe's p99.
	alonePhase := func(frac float64) (cpu float64, nodes []float64, writes int, p99 float64, err error) {
		actx, cancel := context.WithTimeout(ctx, phase)
		defer cancel()
		c0 := target.cpu()
		writes, p99, err = writerFor(frac).run(actx)
		if err != nil {
			return 0, nil, 0, 0, err
		}
		cpu, nodes = target.cpuRate(c0)
		return cpu, nodes, writes, p99, nil
	}
	for i := range scen {
		sc := &scen[i]
		var err error
		sc.CPUAlone, sc.NodesAlone, sc.Writes, sc.P99Alone, err = alonePhase(sc.Frac)
		if err != nil {
			return err
		}
	}

	// One exporter per mode, running as the binary runs it (Start), with
	// the application writing at each rate in turn.
	runMode := func(fullRead bool, idx []int) error {
		s, client, err := sweeperFor(changeConfig(target.redisBlock(), fullRead))
		if err != nil {
			return err
		}
		defer client.Close()
		idle, err := target.idleCPU(ctx, idleSpan)
		if err != nil {
			return err
		}
		c0 := target.cpu()
		s.Start()
		defer s.Stop()
		for s.Snapshot().Families[0].LastSuccess.IsZero() {
			time.Sleep(50 * time.Millisecond)
		}
		first := time.Since(c0.at).Seconds()
		firstShare, _ := target.cpuRate(c0)
		if o.cpuprofile != "" && !fullRead {
			stop, err := startCPUProfile(o.cpuprofile)
			if err != nil {
				return err
			}
			defer stop()
		}
		for _, i := range idx {
			sc := &scen[i]
			sc.FirstRead, sc.FirstShare, sc.IdleShare = first, firstShare, idle
			w := writerFor(sc.Frac)
			// Keys read are PTTL calls, one a key whatever reads its
			// members (the application only writes):
			// counted by Redis as they happen, not when a sweep ends.
			cs0, err := target.commandStats(ctx)
			if err != nil {
				return err
			}
			actx, cancel := context.WithTimeout(ctx, phase)
			c0, self0 := target.cpu(), selfCPU()
			ended := watchSweeps(actx, s)
			_, sc.P99With, err = w.run(actx)
			cancel()
			sc.Sweeps, sc.LongestGap = (<-ended)()
			if err != nil {
				return err
			}
			sc.CPUWith, sc.NodesWith = target.cpuRate(c0)
			cs1, err := target.commandStats(ctx)
			if err != nil {
				return err
			}
			sc.KeysRead = float64(cs1["pttl"].Calls - cs0["pttl"].Calls)
			sc.Commands = exporterCommands(cs0, cs1)
			sc.Written = cs1["zadd"].Calls - cs0["zadd"].Calls
			sc.Phase = phase.Seconds()
			fam := s.Snapshot().Families[0]
			if v, ok := fam.Lookup(snapshot.SamplingPeriod); ok {
				sc.Period = v
			}
			// Memory before the exactness check builds a second exporter
			// in this process.
			self := (selfCPU() - self0).Seconds() / time.Since(c0.at).Seconds()
			m := readMem()
			sc.Heap, sc.RSS = m.HeapAlloc, m.RSS
			// The phase as it ends, for whoever watches the run: the
			// report comes only at the end of make bench.
			log.Printf("%g%% written (first read %.1f s): Redis %.1f%% of a core over the application's alone before, p99 %.2f -> %.2f ms, exporter CPU %.1f%% of a core, live heap %s, RSS %s",
				sc.Frac*100, sc.FirstRead, (sc.CPUWith-sc.CPUAlone)*100, sc.P99Alone, sc.P99With, self*100, mb(sc.Heap), mb(sc.RSS))
			if o.heapprofile != "" && !fullRead {
				// This phase's live heap, the sweep in flight included.
				if err := writeHeapProfile(fmt.Sprintf("%s.%g", o.heapprofile, sc.Frac)); err != nil {
					return err
				}
			}
			// Exactness, writes paused: a sweep that began after the
			// pause against a full read by a fresh exporter.
			awaitSweepBegunAfter(s, time.Now())
			got := gaugeFigures(s.Snapshot().Families[0])
			ref, rc, err := sweeperFor(changeConfig(target.redisBlock(), true))
			if err != nil {
				return err
			}
			err = ref.SweepOnce(ctx)
			want := gaugeFigures(ref.Snapshot().Families[0])
			ref.Stop()
			_ = rc.Close()
			if err != nil {
				return err
			}
			for k, v := range want {
				sc.Compared++
				if got[k] != v {
					sc.Mismatches = append(sc.Mismatches, fmt.Sprintf("%s: %v, full read %v", k, got[k], v))
				}
			}
		}
		if o.heapprofile != "" && !fullRead {
			// At rest: the reference exporters of the exactness checks
			// are gone by the collection writeHeapProfile makes.
			return writeHeapProfile(o.heapprofile)
		}
		return nil
	}
	var changed []int
	for i := range scen {
		if !scen[i].Full {
			changed = append(changed, i)
		}
	}
	// The change-driven exporter first, so that its RSS is its own: the
	// Go runtime returns freed memory to the OS only lazily.
	if err := runMode(false, changed); err != nil {
		return err
	}
	// The application alone again at each rate, the exporter stopped
	// (runMode's deferred Stop: its connections, and so its change
	// tracking, gone): with the phases before, the bracket its phases are
	// set against. Redis's CPU for the same application drifts by points
	// of a core between windows minutes apart on a shared machine.
	for _, i := range changed {
		sc := &scen[i]
		var err error
		sc.CPUAloneAfter, sc.NodesAloneAfter, _, sc.P99AloneAfter, err = alonePhase(sc.Frac)
		if err != nil {
			return err
		}
		log.Printf("%g%% written, the application alone after the exporter: Redis %.1f%% of a core (before %.1f%%, with the exporter %.1f%%), p99 %.2f ms (before %.2f); against their mean the exporter's share %.1f%% of a core, p99 %+.2f ms",
			sc.Frac*100, sc.CPUAloneAfter*100, sc.CPUAlone*100, sc.CPUWith*100, sc.P99AloneAfter, sc.P99Alone, sc.share()*100, sc.p99Rise())
	}
	if o.full {
		if err := runMode(true, []int{0}); err != nil {
			return err
		}
	}
	res.Scenarios = scen
	return json.NewEncoder(os.Stdout).Encode(res)
}
