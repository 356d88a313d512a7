// Command soak runs slot_exporter for a long time against a real
// redis-server under slotsim traffic at fifty times the incident's rate
// (about 2,250 heartbeats per second), restarts Redis empty every
// --restart-every, records the exporter's RSS, goroutines, open file
// descriptors and sweep time every --sample-every, and writes a report
// saying whether each one stayed flat. `make soak` runs it; it is not part
// of CI.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/redisproc"
	"github.com/slotexporter/slot_exporter/simulator"
)

type sample struct {
	at         time.Duration
	rssMB      float64
	goroutines float64
	fds        float64
	sweepMS    float64
	members    float64
	hbPerSec   float64
	up         float64
	lost       float64
}

func main() {
	out := flag.String("out", "SOAK.md", "report file")
	dur := flag.Duration("duration", 30*time.Minute, "how long to run")
	every := flag.Duration("sample-every", time.Minute, "sampling period")
	restart := flag.Duration("restart-every", 10*time.Minute, "restart Redis (empty) this often")
	flag.Parse()
	if err := run(*out, *dur, *every, *restart); err != nil {
		log.Fatal(err)
	}
}

func run(out string, dur, every, restartEvery time.Duration) error {
	dir, err := os.MkdirTemp("", "slot-soak-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	bin := filepath.Join(dir, "slot_exporter")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("build: %w", err)
	}

	rp, err := redisproc.Start(redisproc.Options{Dir: dir})
	if err != nil {
		return err
	}
	defer rp.Stop()
	addr := rp.Addr

	slots, counters := redisproc.Slots(), redisproc.Counters()
	slots.TTL, slots.Heartbeat, slots.MaxHold = 10*time.Second, 2*time.Second, 5*time.Minute
	counters.Name = "streams_legacy"
	cfg := filepath.Join(dir, "soak.yml")
	if err := os.WriteFile(cfg, []byte(redisproc.Config{
		Addr:     addr,
		Sampling: []string{"interval: 5s"},
		Leaks:    []string{"floor_window: 5m"},
		Families: []redisproc.Family{slots, counters},
	}.YAML()), 0o600); err != nil {
		return err
	}
	webPort, err := redisproc.FreePort()
	if err != nil {
		return err
	}
	exp := exec.Command(bin, "--config.file="+cfg, fmt.Sprintf("--web.listen-address=127.0.0.1:%d", webPort), "--log.level=warn")
	logf, err := os.Create(filepath.Join(dir, "exporter.log"))
	if err != nil {
		return err
	}
	exp.Stdout, exp.Stderr = logf, logf
	if err := exp.Start(); err != nil {
		return err
	}
	defer func() { _ = exp.Process.Kill(); _ = exp.Wait() }()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := redis.NewClient(&redis.Options{Addr: addr, DisableIdentity: true})
	defer client.Close()
	// 50 x the incident's ~45 heartbeats/s: ~4,500 in-flight holders heartbeating
	// every 2 s.
	sim, err := simulator.Run(ctx, client, simulator.Options{
		Users: 3000, Limit: 3, KeyPrefix: redisproc.SlotPrefix, CounterPrefix: redisproc.CounterPrefix,
		StreamRate: 95, StreamDuration: 60 * time.Second, TTL: 10 * time.Second, HeartbeatInterval: 2 * time.Second,
		CrashRate: 0.05, ZombieRate: 0.001, FutureRate: 0.001, NoRefreshRate: 0.02, CounterLeakRate: 0.01, Seed: 42,
	})
	if err != nil {
		return err
	}
	defer sim.Stop()

	metricsURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", webPort)
	start := time.Now()
	var samples []sample
	var restarts []time.Duration
	nextRestart := start.Add(restartEvery)
	var lastHB float64
	lastAt := start
	tick := time.NewTicker(every)
	defer tick.Stop()
	for time.Since(start) < dur {
		now := <-tick.C
		if !now.Before(nextRestart) {
			log.Printf("restarting Redis (empty) at %s", time.Since(start).Round(time.Second))
			if err := rp.Restart(); err != nil {
				return err
			}
			restarts = append(restarts, time.Since(start))
			nextRestart = nextRestart.Add(restartEvery)
		}
		m, err := scrape(metricsURL)
		if err != nil {
			log.Printf("scrape: %v", err)
			continue
		}
		hb := m[`slot_heartbeats_total{family="streams"}`]
		s := sample{
			at:         time.Since(start).Round(time.Second),
			rssMB:      m["process_resident_memory_bytes"] / 1e6,
			goroutines: m["go_goroutines"],
			fds:        m["process_open_fds"],
			sweepMS:    m[`slot_exporter_sweep_duration_seconds{family="streams"}`] * 1000,
			members:    m[`slot_members{family="streams",state="live"}`],
			hbPerSec:   (hb - lastHB) / now.Sub(lastAt).Seconds(),
			up:         m["slot_exporter_up"],
			lost:       m[`slot_holds_ended_total{family="streams",outcome="lost"}`],
		}
		lastHB, lastAt = hb, now
		samples = append(samples, s)
		log.Printf("%+v", s)
	}
	truth := sim.Truth()
	return report(out, samples, restarts, dur, truth)
}

func scrape(url string) (map[string]float64, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	m := map[string]float64{}
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 64<<20))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err == nil {
			m[line[:i]] = v
		}
	}
	return m, sc.Err()
}

// flat compares the median of the first and the last third of the run
// (the first two samples are warm-up). A series is flat when the last third
// is within tol of the first, relatively, or within abs absolutely.
func flat(samples []sample, get func(sample) float64, tol, abs float64) (first, last float64, ok bool) {
	if len(samples) > 4 {
		samples = samples[2:]
	}
	n := len(samples) / 3
	if n == 0 {
		n = 1
	}
	var a, b []float64
	for _, s := range samples[:n] {
		a = append(a, get(s))
	}
	for _, s := range samples[len(samples)-n:] {
		b = append(b, get(s))
	}
	first, last = redisproc.Median(a), redisproc.Median(b)
	return first, last, last <= first*(1+tol) || last-first <= abs
}

func report(path string, samples []sample, restarts []time.Duration, dur time.Duration, truth simulator.Truth) error {
	var b strings.Builder
	host, _ := os.Hostname()
	_ = host
	cpu := ""
	if f, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(f), "\n") {
			if strings.HasPrefix(l, "model name") {
				cpu = strings.TrimSpace(strings.SplitN(l, ":", 2)[1])
				break
			}
		}
	}
	ver, _ := exec.Command("redis-server", "--version").Output()
	fmt.Fprintf(&b, "# Soak\n\nGenerated by `make soak` (`go run ./tools/soak`). Not part of CI.\n\n")
	fmt.Fprintf(&b, "* Run: %s of slotsim traffic at about 50x the incident's rate, Redis restarted empty every 10 minutes (at %v).\n", dur, restarts)
	fmt.Fprintf(&b, "* Machine: %d cores (%s), %s, %s.\n", runtime.NumCPU(), cpu, strings.TrimSpace(string(ver)), runtime.Version())
	fmt.Fprintf(&b, "* Simulator truth at the end: %d acquired, %d released, %d heartbeats sent, %d crashed, %d zombies, %d Redis errors (during restarts).\n\n",
		truth.Acquired, truth.Released, truth.Heartbeats, truth.Crashed, truth.Zombies, truth.Errors)
	fmt.Fprintf(&b, "| t | RSS MB | goroutines | open fds | sweep ms | live members | heartbeats/s seen | up | lost total |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range samples {
		fmt.Fprintf(&b, "| %s | %.1f | %.0f | %.0f | %.1f | %.0f | %.0f | %.0f | %.0f |\n", s.at, s.rssMB, s.goroutines, s.fds, s.sweepMS, s.members, s.hbPerSec, s.up, s.lost)
	}
	fmt.Fprintf(&b, "\n## Flat?\n\nMedian of the first third of the run (after two warm-up samples) against the last third.\n\n| figure | first third | last third | flat |\n|---|---|---|---|\n")
	for _, c := range []struct {
		name     string
		get      func(sample) float64
		tol, abs float64
	}{
		{"RSS MB", func(s sample) float64 { return s.rssMB }, 0.2, 5},
		{"goroutines", func(s sample) float64 { return s.goroutines }, 0.1, 3},
		{"open fds", func(s sample) float64 { return s.fds }, 0.1, 3},
		{"sweep ms", func(s sample) float64 { return s.sweepMS }, 0.5, 20},
	} {
		f, l, ok := flat(samples, c.get, c.tol, c.abs)
		verdict := "yes"
		if !ok {
			verdict = "**no**"
		}
		fmt.Fprintf(&b, "| %s | %.1f | %.1f | %s |\n", c.name, f, l, verdict)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
