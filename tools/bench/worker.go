package main

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/trace"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/collector"
	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/redisproc"
	"github.com/slotexporter/slot_exporter/internal/snapshot"
	"github.com/slotexporter/slot_exporter/internal/sweep"
	"github.com/slotexporter/slot_exporter/internal/track"
	"github.com/slotexporter/slot_exporter/redisconn"
)

// The exporter side of the bench runs in a child process of its own, so
// that its heap and RSS are the exporter's alone: not the loader's, the
// naive client's or the bench's bookkeeping.

type workerOpts struct {
	role       string
	addr       string
	redisPID   int
	runs       int
	budget     int
	timing     timing
	cpuprofile string
	trace      string
	sets       int
	members    int
	sweeps     int
	churn      float64
	seed       uint64
	// The change-driven run.
	fracs       string
	phase       int
	full        bool
	probeMS     int
	appFrac     float64
	heapprofile string
}

func benchConfig(addr string, budget int, t timing) string {
	return redisproc.Config{
		Addr: addr,
		Sampling: []string{"interval: " + t.interval.String(), "timeout: 5m", "window: " + t.window.String(),
			"scan_count: 1000", fmt.Sprintf("max_keys_per_second: %d", budget),
			// The full read, unpaced: the figures compared with the Redis
			// floor and with earlier BENCH.md runs.
			"track_changes: false", "redis_cpu_share: 0"},
		Families: []redisproc.Family{benchFamily(t)},
	}.YAML()
}

func newSweeper(o *workerOpts) (*sweep.Sweeper, redis.UniversalClient, error) {
	cfg, err := config.Parse([]byte(benchConfig(o.addr, o.budget, o.timing)))
	if err != nil {
		return nil, nil, fmt.Errorf("bench config: %w", err)
	}
	// The same client the exporter builds from the same config.
	client, err := redisconn.New(&cfg.Redis)
	if err != nil {
		return nil, nil, err
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	s, err := sweep.New(context.Background(), cfg, client, logger, nil)
	if err != nil {
		_ = client.Close()
		return nil, nil, err
	}
	return s, client, nil
}

// figures are what the bench reports of its family after a sweep, read
// from the published snapshot. Nothing is carried over in the bench (no
// oversized set, no unreadable key), so the members the tracker holds are
// exactly those acquired and not ended yet, and the users the floor
// tracker keeps are those with something to report: the ones the series
// cap shows and the ones it drops.
type figures struct {
	sets, withoutTTL, early          int
	states                           [numStates]int
	membersTracked, usersTracked     int
	acquires, heartbeats, holdsEnded uint64
}

func familyFigures(f *snapshot.Family) figures {
	g := figures{sets: f.Sets, usersTracked: len(f.Users) + f.SeriesDropped}
	for _, v := range append(slices.Clone(f.Gauges), f.Counters...) {
		switch v.Metric {
		case snapshot.Members:
			if i := slices.Index(stateNames[:], v.Labels[0]); i >= 0 {
				g.states[i] = int(v.V)
			}
		case snapshot.WithoutTTL:
			g.withoutTTL = int(v.V)
		case snapshot.ExpiringEarly:
			g.early = int(v.V)
		case snapshot.Acquires:
			g.acquires = uint64(v.V)
		case snapshot.Heartbeats:
			g.heartbeats = uint64(v.V)
		case snapshot.HoldsEnded:
			g.holdsEnded += uint64(v.V)
		}
	}
	g.membersTracked = int(g.acquires - g.holdsEnded)
	return g
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// sweepRun is one measured sweep.
type sweepRun struct {
	Wall     float64            `json:"wall_s"`
	RedisCPU float64            `json:"redis_cpu_s"`
	GoCPU    float64            `json:"go_cpu_s"`
	Cmd      map[string]cmdStat `json:"cmd"`
}

type memResult struct {
	HeapAlloc uint64 `json:"heap_alloc"`
	HeapInuse uint64 `json:"heap_inuse"`
	HeapSys   uint64 `json:"heap_sys"`
	Sys       uint64 `json:"sys"`
	RSS       uint64 `json:"rss"`
	HWM       uint64 `json:"hwm"`
}

type metricsResult struct {
	Median     float64 `json:"median_s"`
	Max        float64 `json:"max_s"`
	GzipBytes  int     `json:"gzip_bytes"`
	PlainBytes int     `json:"plain_bytes"`
	Series     int     `json:"series"`
	UserSeries int     `json:"user_series"`
	Dropped    int     `json:"dropped"`
}

type sweepResult struct {
	First          sweepRun       `json:"first"`
	Runs           []sweepRun     `json:"runs"`
	Sets           int            `json:"sets"`
	States         [numStates]int `json:"states"`
	Members        int            `json:"members"`
	MembersTracked int            `json:"members_tracked"`
	UsersTracked   int            `json:"users_tracked"`
	WithoutTTL     int            `json:"without_ttl"`
	Early          int            `json:"expiring_early"`
	Mem            memResult      `json:"mem"`
	// The two trackers built alone with the same counts, in a process of
	// their own: what each costs.
	Trackers trackerResult `json:"trackers"`
	Metrics  metricsResult `json:"metrics"`
}

func readMem() memResult {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memResult{
		HeapAlloc: ms.HeapAlloc, HeapInuse: ms.HeapInuse, HeapSys: ms.HeapSys, Sys: ms.Sys,
		RSS: procStatus("VmRSS"), HWM: procStatus("VmHWM"),
	}
}

// measuredSweep runs one sweep between CONFIG RESETSTAT and INFO
// commandstats, so the stats are the sweep's own.
func measuredSweep(ctx context.Context, s *sweep.Sweeper, admin *redis.Client, pid int) (sweepRun, error) {
	if err := admin.ConfigResetStat(ctx).Err(); err != nil {
		return sweepRun{}, err
	}
	rc0, gc0 := procCPU(pid), selfCPU()
	t0 := time.Now()
	if err := s.SweepOnce(ctx); err != nil {
		return sweepRun{}, err
	}
	wall := time.Since(t0)
	rc1, gc1 := procCPU(pid), selfCPU()
	st, err := commandStats(ctx, admin)
	if err != nil {
		return sweepRun{}, err
	}
	// The admin connection's own INFO and CONFIG are not the sweep's.
	delete(st, "info")
	delete(st, "config|resetstat")
	return sweepRun{Wall: wall.Seconds(), RedisCPU: (rc1 - rc0).Seconds(), GoCPU: (gc1 - gc0).Seconds(), Cmd: st}, nil
}

func runWorker(o *workerOpts) error {
	o.timing = benchTiming
	switch o.role {
	case "sweep":
		return workerSweep(o)
	case "churn":
		return workerChurn(o)
	case "app":
		return workerApp(o)
	case "changes":
		return workerChanges(o)
	case "loop":
		return workerLoop(o)
	case "trackers":
		var r trackerResult
		r.Members, r.Users = trackerHeaps(o.members, o.sets)
		return json.NewEncoder(os.Stdout).Encode(r)
	}
	return fmt.Errorf("unknown role %q", o.role)
}

func workerSweep(o *workerOpts) error {
	ctx := context.Background()
	var res sweepResult
	s, client, err := newSweeper(o)
	if err != nil {
		return err
	}
	defer client.Close()
	admin := redis.NewClient(&redis.Options{Addr: o.addr})
	defer admin.Close()

	// The first sweep meets every member for the first time: map inserts
	// and acquires. The measured ones are the steady state.
	if res.First, err = measuredSweep(ctx, s, admin, o.redisPID); err != nil {
		return err
	}
	stopProfile := func() {}
	if o.cpuprofile != "" {
		if stopProfile, err = startCPUProfile(o.cpuprofile); err != nil {
			return err
		}
	}
	if o.trace != "" {
		f, err := os.Create(o.trace)
		if err != nil {
			return err
		}
		if err := trace.Start(f); err != nil {
			return err
		}
		_, err = measuredSweep(ctx, s, admin, o.redisPID)
		trace.Stop()
		f.Close()
		if err != nil {
			return err
		}
	}
	for range o.runs {
		r, err := measuredSweep(ctx, s, admin, o.redisPID)
		if err != nil {
			return err
		}
		res.Runs = append(res.Runs, r)
	}
	stopProfile()
	g := familyFigures(s.Snapshot().Families[0])
	res.Sets, res.MembersTracked, res.UsersTracked = g.sets, g.membersTracked, g.usersTracked
	res.WithoutTTL, res.Early = g.withoutTTL, g.early
	for i := range numStates {
		res.States[i] = g.states[i]
		res.Members += g.states[i]
	}
	res.Mem = readMem()
	res.Metrics, err = measureMetrics(s, 30)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

type trackerResult struct {
	Members uint64 `json:"members"`
	Users   uint64 `json:"users"`
}

// trackerHeaps builds a MemberTracker with members members and a
// FloorTracker with users users on their own and returns the live heap
// each adds.
func trackerHeaps(members, users int) (uint64, uint64) {
	rules := track.Rules{TTL: 120e3, Heartbeat: 20e3, StaleAfter: 40e3, MaxHold: 900e3, Skew: 5e3, Unit: 1}
	bounds := rules.Bounds(1e12)
	h0 := readMem().HeapAlloc
	mt := track.NewMemberTracker()
	for i := range members {
		h := uint64(i+1) * 0x9E3779B97F4A7C15
		mt.Observe(h, h>>17, 2e12, 1e12, &bounds, &rules)
	}
	h1 := readMem().HeapAlloc
	ft := track.NewFloorTracker()
	ft.Begin()
	for i := range users {
		u := fmt.Sprintf("%012d", i)
		ft.Add(uint64(i+1)*0x9E3779B97F4A7C15, u, 1, 0)
	}
	ft.Commit(1e12, 60e3, 1800e3, track.Limits{Limit: 3, OverLimitIsAnomaly: true})
	h2 := readMem().HeapAlloc
	runtime.KeepAlive(mt)
	runtime.KeepAlive(ft)
	grew := func(a, b uint64) uint64 { return max(b, a) - a }
	return grew(h0, h1), grew(h1, h2)
}

// measureMetrics serves the exporter's registry, built as main.go builds it,
// through promhttp and times whole scrapes the way Prometheus asks for them
// (text format, gzip).
func measureMetrics(s *sweep.Sweeper, n int) (metricsResult, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		versioncollector.NewCollector("slot_exporter"),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collector.New(s.Snapshot, collector.Options{ReloadOK: func() bool { return true }}),
	)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError, MaxRequestsInFlight: 10, Timeout: 10 * time.Second,
	}))
	defer srv.Close()
	hc := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	get := func() (time.Duration, []byte, error) {
		req, _ := http.NewRequest("GET", srv.URL, nil)
		req.Header.Set("Accept", "text/plain;version=0.0.4;q=0.9,*/*;q=0.1")
		req.Header.Set("Accept-Encoding", "gzip")
		t0 := time.Now()
		resp, err := hc.Do(req)
		if err != nil {
			return 0, nil, err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		d := time.Since(t0)
		if resp.StatusCode != 200 {
			return 0, nil, fmt.Errorf("/metrics: %s", resp.Status)
		}
		return d, b, err
	}
	var res metricsResult
	var ds []float64
	var body []byte
	for i := 0; i < n+2; i++ {
		d, b, err := get()
		if err != nil {
			return res, err
		}
		if i >= 2 { // the first scrapes warm up the HTTP connection
			ds = append(ds, d.Seconds())
		}
		body = b
	}
	res.Median, res.Max = redisproc.Median(ds), slices.Max(ds)
	res.GzipBytes = len(body)
	zr, err := gzip.NewReader(strings.NewReader(string(body)))
	if err != nil {
		return res, fmt.Errorf("/metrics is not gzip: %w", err)
	}
	plain, err := io.ReadAll(zr)
	if err != nil {
		return res, err
	}
	res.PlainBytes = len(plain)
	for _, line := range strings.Split(string(plain), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		res.Series++
		if strings.HasPrefix(line, "slot_user_") {
			res.UserSeries++
		}
		if v, ok := strings.CutPrefix(line, `slot_exporter_user_series_dropped{family="streams"} `); ok {
			fmt.Sscan(v, &res.Dropped)
		}
	}
	return res, nil
}
