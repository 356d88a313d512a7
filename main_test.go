package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/redisproc"
	"github.com/slotexporter/slot_exporter/internal/redistest"
)

// exporterProc is the whole program, run in-process on a free port.
type exporterProc struct {
	base string
	logs *exportertest.Buffer
	done chan int
	stop context.CancelFunc
}

func startExporter(t *testing.T, args ...string) *exporterProc {
	t.Helper()
	return startExporterAt(t, "http", func(base string) bool {
		resp, err := http.Get(base + "/-/healthy")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}, args...)
}

// startExporterAt runs the program on a free port and waits until
// healthy says it answers at base (scheme://127.0.0.1:port).
func startExporterAt(t *testing.T, scheme string, healthy func(base string) bool, args ...string) *exporterProc {
	t.Helper()
	port := redistest.FreePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	p := &exporterProc{
		base: fmt.Sprintf("%s://127.0.0.1:%d", scheme, port),
		logs: &exportertest.Buffer{}, done: make(chan int, 1), stop: cancel,
	}
	args = append([]string{fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port)}, args...)
	go func() { p.done <- run(ctx, args, io.Discard, p.logs) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-p.done:
		case <-time.After(2 * time.Minute):
			t.Error("exporter did not stop")
		}
		if t.Failed() {
			t.Logf("exporter log:\n%s", p.logs.String())
		}
	})
	exportertest.WaitFor(t, 10*time.Second, "exporter listening", func() bool { return healthy(p.base) })
	return p
}

func (p *exporterProc) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(p.base + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (p *exporterProc) post(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := http.Post(p.base+path, "text/plain", nil)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// metric returns the value of one exposition line (name with labels, as
// printed), or "" if it is absent.
func metric(page, series string) string {
	for _, line := range strings.Split(page, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	return ""
}

// testConfig is the common families, the slot family under the name
// family, swept every 200ms.
func testConfig(addr, family string) string {
	slots := redisproc.Slots()
	slots.Name = family
	return redisproc.Config{
		Addr:     addr,
		Sampling: []string{"interval: 200ms", "window: 1s"},
		Families: []redisproc.Family{slots, redisproc.Counters()},
	}.YAML()
}

func writeConfig(t *testing.T, path, addr, family string) {
	t.Helper()
	exportertest.WriteFile(t, path, testConfig(addr, family))
}

// seed writes five live slot sets, one with a future-dated score (µs
// written as ms), and two counters, one of them negative.
func seed(t *testing.T, c *redis.Client) {
	t.Helper()
	ctx := context.Background()
	now := time.Now()
	for i := 0; i < 5; i++ {
		k := redisproc.SlotKey(fmt.Sprintf("u%d", i))
		c.ZAdd(ctx, k, redis.Z{Score: float64(now.Add(119 * time.Second).UnixMilli()), Member: "a"})
		c.PExpire(ctx, k, 240*time.Second)
	}
	c.ZAdd(ctx, redisproc.SlotKey("leak"), redis.Z{Score: float64(now.UnixMilli()) * 1000, Member: "bug"})
	c.Set(ctx, redisproc.CounterKey("u1"), 2, 0)
	c.Set(ctx, redisproc.CounterKey("u2"), -1, 0)
}

// TestMetricsPagePassesPromtool: a real /metrics page, from a real sweep of a
// real Redis, is clean under `promtool check metrics`.
func TestMetricsPagePassesPromtool(t *testing.T) {
	promtool := redistest.Binary(t, "promtool")
	srv := redistest.Start(t)
	seed(t, srv.Client())
	cfg := filepath.Join(t.TempDir(), "slot_exporter.yml")
	writeConfig(t, cfg, srv.Addr, "streams")
	p := startExporter(t, "--config.file="+cfg)
	exportertest.WaitFor(t, 10*time.Second, "ready", func() bool { c, _ := p.get(t, "/-/ready"); return c == 200 })
	_, page := p.get(t, "/metrics")
	for _, want := range []string{
		`slot_members{family="streams",state="future"} 1`,
		`slot_counters_negative{family="legacy"} 1`,
		`slot_exporter_up 1`,
		`slot_exporter_build_info{`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(page)
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
	if c, body := p.get(t, "/"); c != 200 || !strings.Contains(body, "slot_exporter") {
		t.Errorf("landing page: %d %q", c, body)
	}
}

// TestReadyOnlyAfterFirstSweep: with Redis down the exporter runs, answers
// /-/healthy and /metrics, reports up=0, and is not ready until a sweep
// succeeds.
func TestReadyOnlyAfterFirstSweep(t *testing.T) {
	port := redistest.FreePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cfg := filepath.Join(t.TempDir(), "slot_exporter.yml")
	writeConfig(t, cfg, addr, "streams")
	p := startExporter(t, "--config.file="+cfg)
	exportertest.WaitFor(t, 10*time.Second, "a failed sweep", func() bool {
		_, page := p.get(t, "/metrics")
		v := metric(page, `slot_exporter_sweep_errors_total{family="streams"}`)
		return v != "" && v != "0"
	})
	if c, _ := p.get(t, "/-/ready"); c != http.StatusServiceUnavailable {
		t.Fatalf("/-/ready with Redis down: %d, want 503", c)
	}
	_, page := p.get(t, "/metrics")
	if metric(page, "slot_exporter_up") != "0" {
		t.Errorf("slot_exporter_up = %q with Redis down, want 0", metric(page, "slot_exporter_up"))
	}
	redistest.StartPort(t, port)
	exportertest.WaitFor(t, 10*time.Second, "ready after Redis came up", func() bool { c, _ := p.get(t, "/-/ready"); return c == 200 })
}

// TestReloadRefusesBadConfigs: every kind of bad file is refused, the old
// config keeps running, and the reload gauge says so until a good one.
func TestReloadRefusesBadConfigs(t *testing.T) {
	srv := redistest.Start(t)
	seed(t, srv.Client())
	dir := t.TempDir()
	cfg := filepath.Join(dir, "slot_exporter.yml")
	writeConfig(t, cfg, srv.Addr, "streams")
	p := startExporter(t, "--config.file="+cfg)
	exportertest.WaitFor(t, 10*time.Second, "ready", func() bool { c, _ := p.get(t, "/-/ready"); return c == 200 })

	bad := map[string]string{
		"not yaml":         "redis: [",
		"unknown field":    "redis: {addr: x}\nfamiles: []\n",
		"invalid value":    testConfig(srv.Addr, "streams") + "sampling: {interval: -1s}\n",
		"semantic":         strings.Replace(testConfig(srv.Addr, "streams"), "heartbeat_interval: 20s", "heartbeat_interval: 200s", 1),
		"password in yaml": strings.Replace(testConfig(srv.Addr, "streams"), "redis:\n", "redis:\n  password: hunter2\n", 1),
		"empty":            "",
	}
	for name, body := range bad {
		exportertest.WriteFile(t, cfg, body)
		code, msg := p.post(t, "/-/reload")
		if code != http.StatusBadRequest || !strings.Contains(msg, "refused") {
			t.Errorf("%s: reload answered %d %q, want 400 refused", name, code, msg)
		}
		if strings.Contains(msg, "hunter2") {
			t.Errorf("%s: the reload error echoes the password", name)
		}
		_, page := p.get(t, "/metrics")
		if v := metric(page, "slot_exporter_config_last_reload_successful"); v != "0" {
			t.Errorf("%s: reload gauge = %q, want 0", name, v)
		}
		// The old config still sweeps: its family is there and fresh.
		if metric(page, `slot_sets{family="streams"}`) != "6" || metric(page, "slot_exporter_up") != "1" {
			t.Errorf("%s: old config no longer served:\n%s", name, page)
		}
	}
	if c, _ := p.get(t, "/-/reload"); c != http.StatusMethodNotAllowed {
		t.Errorf("GET /-/reload: %d, want 405", c)
	}

	// A good config through SIGHUP: the new family name appears, the
	// gauge recovers.
	writeConfig(t, cfg, srv.Addr, "streams2")
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	exportertest.WaitFor(t, 10*time.Second, "reload via SIGHUP", func() bool {
		_, page := p.get(t, "/metrics")
		return metric(page, "slot_exporter_config_last_reload_successful") == "1" &&
			metric(page, `slot_sets{family="streams2"}`) == "6"
	})
}

// TestConfigCheck: --config.check validates and exits, 0 for good, 1 with the
// field path for bad.
func TestConfigCheck(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yml")
	writeConfig(t, good, "127.0.0.1:1", "streams")
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"--config.file=" + good, "--config.check"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "OK") {
		t.Fatalf("good config: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
	bad := filepath.Join(dir, "bad.yml")
	exportertest.WriteFile(t, bad, strings.Replace(testConfig("x:1", "streams"), "heartbeat_interval: 20s", "heartbeat_interval: 200s", 1))
	out.Reset()
	errb.Reset()
	code := run(context.Background(), []string{"--config.file=" + bad, "--config.check"}, &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), "families[0].heartbeat_interval: must be shorter than ttl") {
		t.Fatalf("bad config: exit %d, stderr %q", code, errb.String())
	}
}
