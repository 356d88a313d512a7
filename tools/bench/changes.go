package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
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
// before (track_changes: false, no pace). For each situation, two phases of
// equal length: the application alone, then the application and the
// exporter. The exporter's share of Redis CPU is the difference of
// redis-server's CPU rate between the two (from /proc); application
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
	// The same per redis-server process: a cluster's nodes, in the
	// order of its addresses.
	NodesAlone []float64 `json:"nodes_alone"`
	NodesWith  []float64 `json:"nodes_with"`
	Writes     int       `json:"writes"`       // application writes per phase
	KeysRead   float64   `json:"keys_read"`    // keys the exporter read in its phase
	P99Alone   float64   `json:"p99_alone_ms"` // the application alone, same writes
	P99With    float64   `json:"p99_with_ms"`
	Period     float64   `json:"period_s"` // slot_exporter_sampling_period_seconds at the end
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

// writer is the application: ZADD of a heartbeat member on random sets,
// spread evenly over each interval, and a latency probe. run starts both
// in a process of their own: in the exporter's process the probe measured
// the exporter's garbage collection and scheduling rather than Redis, and
// the writes slowed while the exporter worked, which lowered the
// application's load in the seconds the pacer attributes to its reads and
// so its measured cost per key. An application does not share the
// exporter's runtime.
type writer struct {
	target *redisTarget
	n      int
	frac   float64
	c      redis.UniversalClient // for write, in the calling process
}

// maxCatchUp is the most batches the application sends at once to make
// up for ticks it missed.
const maxCatchUp = 4

// appResult is what the application process prints.
type appResult struct {
	P99    float64 `json:"p99_ms"`
	N      int     `json:"n"`
	Writes int     `json:"writes"`
}

// run runs the application in a child process until ctx's deadline and
// returns the writes made and the probe's p99 latency (ms).
func (w *writer) run(ctx context.Context) (int, float64, error) {
	deadline, _ := ctx.Deadline()
	exe, err := os.Executable()
	if err != nil {
		return 0, 0, err
	}
	// The child ends at the deadline by itself.
	args := append([]string{"-role", "app", "-sets", strconv.Itoa(w.n), "-app-frac", strconv.FormatFloat(w.frac, 'g', -1, 64),
		"-probe-ms", strconv.FormatInt(time.Until(deadline).Milliseconds(), 10)}, w.target.args()...)
	cmd := exec.Command(exe, args...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err != nil {
		return 0, 0, fmt.Errorf("application: %w", err)
	}
	var r appResult
	if err := json.Unmarshal([]byte(out.String()), &r); err != nil {
		return 0, 0, fmt.Errorf("application: %w: %q", err, out.String())
	}
	if r.N == 0 {
		return 0, 0, fmt.Errorf("application: no reply from Redis to the probe")
	}
	return r.Writes, r.P99, nil
}

// write writes until ctx ends and returns the writes made.
func (w *writer) write(ctx context.Context) int {
	writes := 0
	if w.frac <= 0 {
		<-ctx.Done()
		return 0
	}
	perInterval := int(float64(w.n) * w.frac)
	// Batches of 100 every tick, as many ticks as it takes.
	batches := max(perInterval/100, 1)
	tick := changeInterval / time.Duration(batches)
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	t := time.NewTicker(tick)
	defer t.Stop()
	start, sent := time.Now(), 0
	for {
		select {
		case <-ctx.Done():
			return writes
		case <-t.C:
		}
		// The batches due by now, up to maxCatchUp at once: a ticker
		// drops the ticks that pass while a pipeline is out, and on a
		// cluster, where a pipeline waits on every node, a busy machine
		// wrote two thirds of the sets it should have.
		due := min(int(time.Since(start)/tick)-sent, maxCatchUp)
		if due <= 0 {
			continue
		}
		sent += due
		pipe := w.c.Pipeline()
		score := float64(time.Now().UnixMilli() + benchTiming.ttl)
		for range due * min(100, perInterval) {
			pipe.ZAdd(ctx, keyName(r.IntN(w.n)), redis.Z{Score: score, Member: "hb"})
		}
		if _, err := pipe.Exec(ctx); err == nil {
			writes += due * min(100, perInterval)
		}
	}
}

// workerApp is the application's process: the writes, and a GET or SET
// every millisecond on a connection of its own (to each node of a
// cluster; DB 1 on a single server), for o.probeMS.
func workerApp(o *workerOpts) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(o.probeMS)*time.Millisecond)
	defer cancel()
	target, err := newRedisTarget(o)
	if err != nil {
		return err
	}
	defer target.close()
	c := target.client()
	defer c.Close()
	wrote := make(chan int, 1)
	go func() { wrote <- (&writer{target: target, n: o.sets, frac: o.appFrac, c: c}).write(ctx) }()
	probe := target.probeClient()
	defer probe.Close()
	var lat []float64
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return json.NewEncoder(os.Stdout).Encode(appResult{P99: p99(lat), N: len(lat), Writes: <-wrote})
		case <-t.C:
		}
		t0 := time.Now()
		var err error
		if i%2 == 0 {
			err = probe.Set(ctx, "probe:"+strconv.Itoa(i%1000), i, 0).Err()
		} else {
			err = probe.Get(ctx, "probe:"+strconv.Itoa((i-1)%1000)).Err()
		}
		if err == nil || err == redis.Nil {
			lat = append(lat, float64(time.Since(t0).Microseconds())/1000)
		}
	}
}

func p99(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[int(float64(len(s)-1)*0.99)]
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
	target, err := newRedisTarget(o)
	if err != nil {
		return err
	}
	defer target.close()
	c := target.client()
	defer c.Close()
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
	for i := range scen {
		sc := &scen[i]
		actx, cancel := context.WithTimeout(ctx, phase)
		c0 := target.cpu()
		var err error
		sc.Writes, sc.P99Alone, err = writerFor(sc.Frac).run(actx)
		cancel()
		if err != nil {
			return err
		}
		sc.CPUAlone, sc.NodesAlone = target.cpuRate(c0)
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
			log.Printf("%g%% written (first read %.1f s): Redis %.1f%% of a core over the application's, p99 %.2f -> %.2f ms, exporter CPU %.1f%% of a core, live heap %s, RSS %s",
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
	if o.full {
		if err := runMode(true, []int{0}); err != nil {
			return err
		}
	}
	res.Scenarios = scen
	return json.NewEncoder(os.Stdout).Encode(res)
}
