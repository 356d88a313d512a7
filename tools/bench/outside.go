package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/slotexporter/slot_exporter/internal/redisproc"
)

// The outside measurement: the exporter as a user runs it, the binary
// with its defaults in a process of its own, measured only from outside
// (/proc, its /metrics, Redis), beside an application writing at a fixed
// rate while a probe times a GET or SET every millisecond. Everything
// else in the bench runs the sweeper inside a worker process, where the
// application's writer shares the exporter's runtime and cores; this is
// the figure an operator would see.

type outsideResult struct {
	Ran   bool
	Err   string
	Sets  int
	Rate  int     // sets written per second by the application
	Phase float64 // seconds per phase
	Alone outsidePhase
	With  outsidePhase
	// AloneAfter is the application alone again, once the exporter has
	// stopped. With Alone it brackets the phase with the exporter: this
	// machine's Redis ran the same application at 10.0% of a core in one
	// run and 13.8% in the next (20.9% and 20.7% with the exporter), so
	// one phase without it, set against one with it, measures the
	// machine's drift as much as the exporter.
	AloneAfter outsidePhase
	// FirstRead is from the exporter's start to its first complete
	// picture (slot_sets exposed), the application writing throughout.
	FirstRead float64
	// FirstRedisCPU is redis-server's CPU over the first read, as a share
	// of a core, and WriterAlone its CPU under the writer alone (no
	// probe, as during the first read) for a phase just before it: what
	// the first read took of Redis, its interference with the writes
	// included, is their difference.
	FirstRedisCPU, WriterAlone float64
	// FirstHeap and FirstRSS are the largest sampled during the first
	// read; Heap and RSS the largest in the measured phase after it.
	FirstHeap, FirstRSS uint64
	Heap, RSS           uint64
	// ExporterCPU is the exporter process's own CPU over the measured
	// phase, as a share of a core.
	ExporterCPU float64
	KeysRead    float64 // PTTL calls (one a key read) per second in the measured phase
}

type outsidePhase struct {
	RedisCPU float64 // redis-server's CPU, share of a core
	P99      float64 // ms
	Written  int     // the application's ZADDs in the phase
	Read     int     // PTTL calls in the phase: the exporter's reads, one a key (the application only writes)
}

// runOutside measures the binary; keepLog, if not empty, is where its
// log is kept, at debug level.
func runOutside(ctx context.Context, n, perSecond int, phase time.Duration, keepLog string) *outsideResult {
	res := &outsideResult{Sets: n, Rate: perSecond, Phase: phase.Seconds()}
	if err := measureOutside(ctx, res, phase, keepLog); err != nil {
		res.Err = err.Error()
		log.Printf("outside: %v", err)
		return res
	}
	res.Ran = true
	return res
}

func measureOutside(ctx context.Context, res *outsideResult, phase time.Duration, keepLog string) error {
	dir, err := os.MkdirTemp("", "slot-exporter-outside-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "slot_exporter")
	// The module's root package is the exporter: the bench runs from the
	// module (make bench).
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/slotexporter/slot_exporter").CombinedOutput(); err != nil {
		return fmt.Errorf("building the exporter: %v\n%s", err, out)
	}
	s, err := startServer()
	if err != nil {
		return err
	}
	defer s.Stop()
	admin := s.client()
	defer admin.Close()
	now, err := admin.Time(ctx).Result()
	if err != nil {
		return err
	}
	if _, _, err := load(s.Addr, newGen(uint64(res.Sets), now.UnixMilli(), benchTiming), 0, res.Sets); err != nil {
		return err
	}
	// The writer spreads a share of the sets over each changeInterval; at
	// that share it writes perSecond sets a second.
	frac := float64(res.Rate) * changeInterval.Seconds() / float64(res.Sets)
	app := &writer{target: &redisTarget{addrs: []string{s.Addr}, pids: []int{s.PID()}}, n: res.Sets, frac: frac, c: admin}

	// The application alone, in a process of its own (writer.run).
	res.Alone, err = outsidePhaseRun(ctx, s, app, phase, nil)
	if err != nil {
		return err
	}

	// The exporter, started as a user starts it: a config file naming
	// Redis and the family, every setting at its default.
	cfg := filepath.Join(dir, "slot_exporter.yml")
	if err := os.WriteFile(cfg, []byte(outsideConfig(s.Addr)), 0o600); err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	listen := fmt.Sprintf("127.0.0.1:%d", port)
	logPath, args := filepath.Join(dir, "exporter.log"), []string{"--config.file", cfg, "--web.listen-address", listen}
	if keepLog != "" {
		logPath, args = keepLog, append(args, "--log.level=debug")
	}
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf

	// Its first read, the application writing throughout (from this
	// process: its latency is not measured here), after a phase of the
	// writes alone that measures Redis without the exporter the same way.
	wctx, stopWrites := context.WithCancel(ctx)
	wrote := make(chan struct{})
	go func() { app.write(wctx); close(wrote) }()
	c0, w0 := procCPU(s.PID()), time.Now()
	select {
	case <-time.After(writerAlonePhase):
	case <-ctx.Done():
	}
	c1, t0 := procCPU(s.PID()), time.Now()
	res.WriterAlone = (c1 - c0).Seconds() / t0.Sub(w0).Seconds()
	if err := cmd.Start(); err != nil {
		stopWrites()
		<-wrote
		return err
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	exp := &exporterProc{pid: cmd.Process.Pid, url: "http://" + listen + "/metrics", hc: &http.Client{Timeout: 30 * time.Second}}
	err = exp.waitFirstPicture(ctx, 15*time.Minute, func() {
		res.FirstHeap = max(res.FirstHeap, exp.heapLive())
		res.FirstRSS = max(res.FirstRSS, pidStatus(exp.pid, "VmRSS"))
	})
	res.FirstRead = time.Since(t0).Seconds()
	res.FirstRedisCPU = (procCPU(s.PID()) - c1).Seconds() / res.FirstRead
	stopWrites()
	<-wrote
	if err != nil {
		return fmt.Errorf("%w (exporter log: %s)", err, tail(logf.Name()))
	}

	// The measured phase with it.
	e0 := procCPU(exp.pid)
	res.With, err = outsidePhaseRun(ctx, s, app, phase, func() {
		res.Heap = max(res.Heap, exp.heapLive())
		res.RSS = max(res.RSS, pidStatus(exp.pid, "VmRSS"))
	})
	if err != nil {
		return err
	}
	res.ExporterCPU = (procCPU(exp.pid) - e0).Seconds() / phase.Seconds()
	res.KeysRead = float64(res.With.Read) / phase.Seconds()
	if _, ok, err := exp.metric("slot_sets"); err != nil || !ok {
		return fmt.Errorf("the exporter no longer answers with slot_sets (%v): %s", err, tail(logf.Name()))
	}

	// The application alone again, the exporter stopped as an operator
	// stops it (its connections, and so its change tracking, gone).
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()
	res.AloneAfter, err = outsidePhaseRun(ctx, s, app, phase, nil)
	return err
}

// alone is the application alone, as the phase with the exporter is set
// against: the mean of the phases before and after it (Alone alone where
// the one after was not measured).
func (x *outsideResult) alone() outsidePhase {
	a, b := x.Alone, x.AloneAfter
	if b.RedisCPU == 0 {
		return a
	}
	return outsidePhase{RedisCPU: bracketMean(a.RedisCPU, b.RedisCPU, true), P99: bracketMean(a.P99, b.P99, true), Written: (a.Written + b.Written) / 2}
}

// writerAlonePhase is how long the writes run alone before the exporter
// starts: Redis's CPU over it is the first read's reference.
const writerAlonePhase = 20 * time.Second

// outsidePhaseRun runs the application for d and measures Redis's CPU and
// the probe's p99; sample, if not nil, is called every second meanwhile.
func outsidePhaseRun(ctx context.Context, s *server, app *writer, d time.Duration, sample func()) (outsidePhase, error) {
	var ph outsidePhase
	cs0, err := commandStats(ctx, app.c)
	if err != nil {
		return ph, err
	}
	actx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		if sample == nil {
			return
		}
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			sample()
			select {
			case <-actx.Done():
				return
			case <-t.C:
			}
		}
	}()
	c0, t0 := procCPU(s.PID()), time.Now()
	_, ph.P99, err = app.run(actx)
	ph.RedisCPU = (procCPU(s.PID()) - c0).Seconds() / time.Since(t0).Seconds()
	<-sampled
	if err != nil {
		return ph, err
	}
	cs1, err := commandStats(ctx, app.c)
	if err != nil {
		return ph, err
	}
	ph.Written = int(cs1["zadd"].Calls - cs0["zadd"].Calls)
	ph.Read = int(cs1["pttl"].Calls - cs0["pttl"].Calls)
	return ph, nil
}

// outsideConfig is the family the bench loads, and nothing else: every
// sampling setting is the default a user gets.
func outsideConfig(addr string) string {
	return redisproc.Config{
		Addr:     addr,
		Families: []redisproc.Family{benchFamily(benchTiming)},
	}.YAML()
}

// exporterProc is the exporter binary as the bench sees it from outside.
type exporterProc struct {
	pid int
	url string
	hc  *http.Client
}

// metric returns the first sample of name (with no labels, or the first
// series) in the exporter's /metrics, and whether it was there.
func (e *exporterProc) metric(name string) (float64, bool, error) {
	r, err := e.hc.Get(e.url)
	if err != nil {
		return 0, false, err
	}
	defer r.Body.Close()
	sc := bufio.NewScanner(r.Body)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		f := strings.Fields(rest[strings.LastIndexByte(rest, '}')+1:])
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return 0, false, fmt.Errorf("%s: %w", line, err)
		}
		_, _ = io.Copy(io.Discard, r.Body)
		return v, true, nil
	}
	return 0, false, sc.Err()
}

// heapLive is go_gc_heap_live_bytes: the heap the last collection kept.
func (e *exporterProc) heapLive() uint64 {
	v, _, _ := e.metric("go_gc_heap_live_bytes")
	return uint64(v)
}

// waitFirstPicture waits until the exporter exposes slot_sets: the first
// complete read of every key. sample is called every second meanwhile.
func (e *exporterProc) waitFirstPicture(ctx context.Context, limit time.Duration, sample func()) error {
	deadline := time.Now().Add(limit)
	for {
		sample()
		if _, ok, err := e.metric("slot_sets"); err == nil && ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no slot_sets after %s", limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// tail is the end of a log file, for an error message.
func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}
