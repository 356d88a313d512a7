// Command bench measures the exporter against a real redis-server and writes
// BENCH.md: sweep time, throughput, memory and /metrics cost for 10k, 100k
// and 1M slot sets, next to what Redis itself needs for the same reads (the
// "Redis floor", from redis-benchmark) and a naive client; memory across a
// churning keyspace; what the limiter's heartbeats and acquires cost Redis;
// and what a sweep does to the p99 latency of other Redis traffic, with and
// without sampling.max_keys_per_second. `make bench` runs it; it is not part
// of `make test`.
//
//	go run ./tools/bench -out BENCH.md [-sizes 10000,100000,1000000] [-runs 5]
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/slotexporter/slot_exporter/internal/gctarget"
)

type opts struct {
	notifyUnrelated, notifySets int
	out                         string
	sizes                       []int
	runs                        int
	churnSets                   int
	churnSweeps                 int
	churn                       float64
	budget                      int
	budgetRuns                  int
	hbHolders                   int
	cpuprofile                  string
	heapprofile                 string
	changesProfile              string
	trace                       string
	fracs                       string
	phase                       int
	peer                        bool
	outsideRate                 int
	outsidePhase                int
	outsideLog                  string
}

func main() {
	var o opts
	var w workerOpts
	var sizes string
	flag.StringVar(&o.out, "out", "BENCH.md", "report file")
	flag.StringVar(&sizes, "sizes", "10000,100000,1000000", "slot-set counts to measure, comma separated")
	flag.IntVar(&o.runs, "runs", 5, "measured runs per size; the report gives medians")
	flag.IntVar(&o.churnSets, "churn-sets", 100000, "slot sets in the churn run (0 skips it)")
	flag.IntVar(&o.churnSweeps, "churn-sweeps", 100, "sweeps in the churn run")
	flag.Float64Var(&o.churn, "churn", 0.1, "fraction of sets changed between two sweeps of the churn run")
	flag.IntVar(&o.budget, "budget", 100000, "sampling.max_keys_per_second of the budgeted sweep in the latency test (0 skips the test)")
	flag.IntVar(&o.budgetRuns, "budget-runs", 3, "redis-benchmark runs per latency scenario")
	flag.IntVar(&o.hbHolders, "hb-holders", 20000, "holders in the heartbeat/acquire cost test (0 skips it)")
	flag.IntVar(&o.notifyUnrelated, "notify-unrelated", 10000000, "unrelated keys in the discovery scan/notify comparison (0 skips it)")
	flag.IntVar(&o.notifySets, "notify-sets", 10000, "slot sets in the discovery scan/notify comparison")
	flag.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of the largest size's measured sweeps here")
	flag.StringVar(&o.heapprofile, "heapprofile", "", "write a heap profile of the change-driven exporter here, after its last phase, and one at the end of each phase (here.FRACTION)")
	flag.StringVar(&o.changesProfile, "changes-cpuprofile", "", "write a CPU profile of the change-driven exporter's phases here")
	flag.StringVar(&o.trace, "trace", "", "write an execution trace of one sweep of the largest size here")
	flag.StringVar(&o.fracs, "fracs", "0.01,0.1,0.25", "shares of sets written per interval in the change-driven run at the largest size (empty skips it)")
	flag.IntVar(&o.phase, "phase", 60, "seconds per phase of the change-driven run: long enough for the pace to settle after the application's load changes (it measures a baseline second every 5 s)")
	flag.IntVar(&o.outsideRate, "outside-rate", 20000, "sets a second the application writes in the outside measurement of the exporter binary at the largest size (0 skips it)")
	flag.IntVar(&o.outsidePhase, "outside-phase", 60, "seconds per phase of the outside measurement")
	flag.StringVar(&o.outsideLog, "outside-log", "", "keep the outside measurement's exporter log here, at --log.level=debug (the read pace logs each cost it measures)")
	flag.BoolVar(&o.peer, "peer", true, "time Debian's prometheus-redis-exporter --check-keys over the largest size's slot sets")
	flag.StringVar(&w.fracs, "worker-fracs", "", "internal")
	flag.IntVar(&w.phase, "worker-phase", 0, "internal")
	flag.BoolVar(&w.full, "worker-full", false, "internal")
	flag.IntVar(&w.probeMS, "probe-ms", 0, "internal")
	flag.Float64Var(&w.appFrac, "app-frac", 0, "internal")
	flag.StringVar(&w.heapprofile, "worker-heapprofile", "", "internal")
	// The exporter side runs in a child process; these flags are its.
	flag.StringVar(&w.role, "role", "", "internal: run as the worker with this role")
	flag.StringVar(&w.addr, "addr", "", "internal")
	flag.IntVar(&w.redisPID, "redis-pid", 0, "internal")
	flag.IntVar(&w.budget, "worker-budget", 0, "internal")
	flag.StringVar(&w.cpuprofile, "worker-cpuprofile", "", "internal")
	flag.StringVar(&w.trace, "worker-trace", "", "internal")
	flag.IntVar(&w.sets, "sets", 0, "internal")
	flag.IntVar(&w.members, "members", 0, "internal")
	flag.IntVar(&w.sweeps, "sweeps", 0, "internal")
	flag.Uint64Var(&w.seed, "seed", 1, "internal")
	flag.Parse()
	log.SetFlags(log.Ltime)
	log.SetPrefix("bench: ")
	if w.role != "" {
		// The exporter's garbage collector target, as the binary sets it.
		gctarget.Apply()
		if w.heapprofile != "" {
			profileEveryAllocation()
		}
		w.runs, w.churn = o.runs, o.churn
		if err := runWorker(&w); err != nil {
			log.Fatalf("worker %s: %v", w.role, err)
		}
		return
	}
	for _, f := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			log.Fatalf("-sizes: bad size %q", f)
		}
		o.sizes = append(o.sizes, n)
	}
	if o.runs < 1 {
		log.Fatal("-runs must be at least 1")
	}
	for _, tool := range []string{"redis-server", "redis-cli", "redis-benchmark"} {
		if _, err := exec.LookPath(tool); err != nil {
			log.Fatalf("%s not found: `make deps` installs it", tool)
		}
	}
	if *onlySection != "" {
		if err := runOnly(context.Background(), &o); err != nil {
			log.Fatal(err)
		}
		return
	}
	start := time.Now()
	rep, err := run(context.Background(), &o)
	if err != nil {
		log.Fatal(err)
	}
	var notifyMD string
	if o.notifyUnrelated > 0 {
		nr, err := runNotify(context.Background(), o.notifyUnrelated, o.notifySets, o.runs)
		if err != nil {
			log.Fatal(err)
		}
		notifyMD = nr.markdown()
	}
	km, err := kindsSection(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	// The whole run, the discovery comparison and the kinds included:
	// taken before them, the header said 40m36s of a run of 49m26s.
	rep.Took = time.Since(start)
	md := rep.markdown() + notifyMD + km
	if err := os.WriteFile(o.out, []byte(md), 0o644); err != nil {
		log.Fatal(err)
	}
	log.Printf("wrote %s in %s", o.out, rep.Took.Round(time.Second))
}

// sizeResult is everything measured at one keyspace size.
type sizeResult struct {
	N        int
	Load     loadStats
	LoadTime time.Duration
	Sweep    sweepResult
	Naive    []naiveRun
	Floor    []floorRun // ZRANGE key 0 -1 WITHSCORES
	FloorTTL []floorRun // PTTL key
}

type report struct {
	Changes *changesResult
	Cluster *clusterResult
	Outside *outsideResult
	Peer    *peerResult
	Opts    *opts
	Machine machine
	Sizes   []sizeResult
	Churn   *churnResult
	HB      *hbResult
	Latency []latencyScenario
	Took    time.Duration
}

func run(ctx context.Context, o *opts) (*report, error) {
	rep := &report{Opts: o, Machine: describeMachine()}
	largest := slices.Max(o.sizes)
	for _, n := range o.sizes {
		r, lat, err := runSize(ctx, o, n, n == largest)
		if err != nil {
			return nil, fmt.Errorf("%d sets: %w", n, err)
		}
		rep.Sizes = append(rep.Sizes, r)
		if lat != nil {
			rep.Latency = lat
		}
		if n == largest && o.fracs != "" {
			log.Printf("%d sets: change-driven reads at %s of sets written per interval", n, o.fracs)
			ch, err := runChanges(ctx, o, n)
			if err != nil {
				return nil, fmt.Errorf("change-driven run: %w", err)
			}
			rep.Changes = ch
		}
	}
	cl, err := runClusterChanges(ctx, o)
	if err != nil {
		return nil, fmt.Errorf("change-driven run on a cluster: %w", err)
	}
	rep.Cluster = cl
	if o.outsideRate > 0 {
		n := slices.Max(o.sizes)
		log.Printf("outside measurement: the exporter binary at %d sets, the application writing %d sets/s", n, o.outsideRate)
		rep.Outside = runOutside(ctx, n, o.outsideRate, time.Duration(o.outsidePhase)*time.Second, o.outsideLog)
	}
	if o.churnSets > 0 && o.churnSweeps > 0 {
		log.Printf("churn: %d sets, %d sweeps, %.0f%% of sets changed between sweeps", o.churnSets, o.churnSweeps, o.churn*100)
		c, err := runChurn(ctx, o)
		if err != nil {
			return nil, fmt.Errorf("churn: %w", err)
		}
		rep.Churn = c
	}
	if o.peer {
		n := slices.Max(o.sizes)
		log.Printf("peer: %s --check-keys at %d keys", peerBinary, n)
		rep.Peer = runPeer(ctx, n)
	}
	if o.hbHolders > 0 {
		log.Printf("heartbeat and acquire cost: %d holders", o.hbHolders)
		hb, err := measureHeartbeats(ctx, o.hbHolders)
		if err != nil {
			return nil, fmt.Errorf("heartbeats: %w", err)
		}
		rep.HB = &hb
	}
	return rep, nil
}

func runSize(ctx context.Context, o *opts, n int, largest bool) (sizeResult, []latencyScenario, error) {
	res := sizeResult{N: n}
	s, err := startServer()
	if err != nil {
		return res, nil, err
	}
	defer s.Stop()
	admin := s.client()
	defer admin.Close()
	now, err := admin.Time(ctx).Result()
	if err != nil {
		return res, nil, err
	}
	log.Printf("%d sets: loading", n)
	res.Load, res.LoadTime, err = load(s.Addr, newGen(uint64(n), now.UnixMilli(), benchTiming), 0, n)
	if err != nil {
		return res, nil, err
	}
	if got, err := admin.DBSize(ctx).Result(); err != nil || got != int64(n) {
		return res, nil, fmt.Errorf("DBSIZE %d after loading %d sets (%v)", got, n, err)
	}
	log.Printf("%d sets: loaded %d members in %s; exporter sweeps", n, res.Load.Members, res.LoadTime.Round(time.Millisecond))
	args := []string{"-role", "sweep", "-addr", s.Addr, "-redis-pid", strconv.Itoa(s.PID()), "-runs", strconv.Itoa(o.runs)}
	if largest && o.cpuprofile != "" {
		args = append(args, "-worker-cpuprofile", o.cpuprofile)
	}
	if largest && o.trace != "" {
		args = append(args, "-worker-trace", o.trace)
	}
	if err := runChild(ctx, args, &res.Sweep); err != nil {
		return res, nil, err
	}
	if err := runChild(ctx, []string{"-role", "trackers", "-sets", strconv.Itoa(res.Sweep.UsersTracked),
		"-members", strconv.Itoa(res.Sweep.MembersTracked)}, &res.Sweep.Trackers); err != nil {
		return res, nil, err
	}
	if res.Sweep.Sets != n || res.Sweep.Members != res.Load.Members {
		return res, nil, fmt.Errorf("the sweep saw %d sets and %d members, %d and %d were loaded",
			res.Sweep.Sets, res.Sweep.Members, n, res.Load.Members)
	}
	log.Printf("%d sets: naive client", n)
	for range o.runs {
		r, err := measureNaive(ctx, s)
		if err != nil {
			return res, nil, fmt.Errorf("naive: %w", err)
		}
		if r.Members != res.Load.Members {
			return res, nil, fmt.Errorf("naive client read %d members, %d were loaded", r.Members, res.Load.Members)
		}
		res.Naive = append(res.Naive, r)
	}
	log.Printf("%d sets: Redis floor (redis-benchmark -P 64)", n)
	for range o.runs {
		f, err := measureFloor(ctx, s, n, "ZRANGE", keyPattern, "0", "-1", "WITHSCORES")
		if err != nil {
			return res, nil, err
		}
		res.Floor = append(res.Floor, f)
		f, err = measureFloor(ctx, s, n, "PTTL", keyPattern)
		if err != nil {
			return res, nil, err
		}
		res.FloorTTL = append(res.FloorTTL, f)
	}
	var lat []latencyScenario
	if largest && o.budget > 0 {
		log.Printf("%d sets: p99 latency of other traffic during sweeps", n)
		if lat, err = measureLatency(ctx, s, o); err != nil {
			return res, nil, fmt.Errorf("latency: %w", err)
		}
	}
	return res, lat, nil
}

func runChurn(ctx context.Context, o *opts) (*churnResult, error) {
	s, err := startServer()
	if err != nil {
		return nil, err
	}
	defer s.Stop()
	var res churnResult
	err = runChild(ctx, []string{"-role", "churn", "-addr", s.Addr, "-redis-pid", strconv.Itoa(s.PID()),
		"-sets", strconv.Itoa(o.churnSets), "-sweeps", strconv.Itoa(o.churnSweeps),
		"-churn", strconv.FormatFloat(o.churn, 'f', -1, 64)}, &res)
	return &res, err
}

func self() (string, error) { return os.Executable() }

// runChild runs the worker with args and decodes its JSON result.
func runChild(ctx context.Context, args []string, out any) error {
	exe, err := self()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Stderr = os.Stderr
	b, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("worker %v: %w", args[:2], err)
	}
	return json.Unmarshal(b, out)
}

// latencyScenario is the latency other clients see in one situation.
type latencyScenario struct {
	Name      string
	Budget    int // keys/s; 0 = unbounded
	Sweep     bool
	GetP99    []float64
	SetP99    []float64
	GetP50    []float64
	SetP50    []float64
	RPS       []float64
	Sweeps    int
	SweepMean float64
}

// measureLatency runs redis-benchmark GET/SET traffic (20 clients, no
// pipelining, DB 1 so that its keys stay out of the sweep's SCAN) with no
// sweep, with back-to-back unbudgeted sweeps, and with back-to-back sweeps
// under sampling.max_keys_per_second.
func measureLatency(ctx context.Context, s *server, o *opts) ([]latencyScenario, error) {
	scen := []latencyScenario{
		{Name: "no sweep"},
		{Name: "sweeps back to back, no key budget", Sweep: true},
		{Name: fmt.Sprintf("sweeps back to back, max_keys_per_second %d", o.budget), Sweep: true, Budget: o.budget},
	}
	for i := range scen {
		sc := &scen[i]
		var child *exec.Cmd
		var stdin io.WriteCloser
		var stdout *bufio.Reader
		if sc.Sweep {
			exe, err := self()
			if err != nil {
				return nil, err
			}
			child = exec.CommandContext(ctx, exe, "-role", "loop", "-addr", s.Addr, "-worker-budget", strconv.Itoa(sc.Budget))
			child.Stderr = os.Stderr
			if stdin, err = child.StdinPipe(); err != nil {
				return nil, err
			}
			pipe, err := child.StdoutPipe()
			if err != nil {
				return nil, err
			}
			stdout = bufio.NewReader(pipe)
			if err := child.Start(); err != nil {
				return nil, err
			}
			line, err := stdout.ReadString('\n')
			if err != nil || strings.TrimSpace(line) != "ready" {
				_ = child.Process.Kill()
				_ = child.Wait()
				return nil, fmt.Errorf("sweep loop did not start: %q %v", line, err)
			}
		}
		for range o.budgetRuns {
			rows, err := redisBenchmark(ctx, s, "--dbnum", "1", "-t", "get,set", "-c", "20", "-n", "100000", "-r", "100000")
			if err != nil {
				if child != nil {
					_ = child.Process.Kill()
					_ = child.Wait()
				}
				return nil, err
			}
			sc.GetP99 = append(sc.GetP99, rows["GET"].P99)
			sc.SetP99 = append(sc.SetP99, rows["SET"].P99)
			sc.GetP50 = append(sc.GetP50, rows["GET"].P50)
			sc.SetP50 = append(sc.SetP50, rows["SET"].P50)
			sc.RPS = append(sc.RPS, (rows["GET"].RPS+rows["SET"].RPS)/2)
		}
		if child != nil {
			_ = stdin.Close()
			var lr loopResult
			b, _ := io.ReadAll(stdout)
			werr := child.Wait()
			if err := json.Unmarshal(b, &lr); err != nil {
				return nil, fmt.Errorf("sweep loop: %v %v", err, werr)
			}
			sc.Sweeps, sc.SweepMean = lr.Sweeps, lr.Mean
		}
	}
	return scen, nil
}

// runChanges loads n sets on a fresh server and runs the change-driven
// worker against it.
func runChanges(ctx context.Context, o *opts, n int) (*changesResult, error) {
	s, err := startServer()
	if err != nil {
		return nil, err
	}
	defer s.Stop()
	admin := s.client()
	defer admin.Close()
	now, err := admin.Time(ctx).Result()
	if err != nil {
		return nil, err
	}
	if _, _, err := load(s.Addr, newGen(uint64(n), now.UnixMilli(), benchTiming), 0, n); err != nil {
		return nil, err
	}
	var res changesResult
	err = runChild(ctx, []string{"-role", "changes", "-addr", s.Addr, "-redis-pid", strconv.Itoa(s.PID()),
		"-sets", strconv.Itoa(n), "-worker-fracs", o.fracs, "-worker-phase", strconv.Itoa(o.phase), "-worker-full",
		"-worker-heapprofile", o.heapprofile, "-worker-cpuprofile", o.changesProfile}, &res)
	return &res, err
}
