package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/slotexporter/slot_exporter/internal/redisproc"
)

// The peer anchor: oliver006/redis_exporter, built from the Go module proxy
// in a temporary directory outside this module (never vendored), with
// --check-keys over the same slot sets. It reads the keys at scrape time;
// what one scrape costs is its sweep.

const peerModule = "github.com/oliver006/redis_exporter"

type peerResult struct {
	Built    bool
	Err      string
	Version  string
	Keys     int
	Scrape   []float64 // seconds per scrape
	RedisCPU []float64 // redis-server CPU seconds per scrape
	Series   int
}

func runPeer(ctx context.Context, n int) *peerResult {
	res := &peerResult{Keys: n}
	bin, version, err := buildPeer(ctx)
	if err != nil {
		res.Err = err.Error()
		log.Printf("peer: %v", err)
		return res
	}
	res.Built, res.Version = true, version
	defer os.RemoveAll(filepath.Dir(bin))
	s, err := startServer()
	if err != nil {
		res.Err = err.Error()
		return res
	}
	defer s.Stop()
	admin := s.client()
	defer admin.Close()
	now, err := admin.Time(ctx).Result()
	if err != nil {
		res.Err = err.Error()
		return res
	}
	if _, _, err := load(s.Addr, newGen(uint64(n), now.UnixMilli(), benchTiming), 0, n); err != nil {
		res.Err = err.Error()
		return res
	}
	port, err := freePort()
	if err != nil {
		res.Err = err.Error()
		return res
	}
	listen := fmt.Sprintf("127.0.0.1:%d", port)
	cmd := exec.CommandContext(ctx, bin, "--redis.addr", "redis://"+s.Addr, "--check-keys", keyMatch,
		"--web.listen-address", listen, "--check-keys-batch-size", "1000")
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		res.Err = err.Error()
		return res
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	hc := &http.Client{Timeout: 5 * time.Minute}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if r, err := hc.Get("http://" + listen + "/health"); err == nil {
			r.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			res.Err = "redis_exporter did not start listening"
			return res
		}
		time.Sleep(100 * time.Millisecond)
	}
	for range 3 {
		c0, t0 := procCPU(s.PID()), time.Now()
		r, err := hc.Get("http://" + listen + "/metrics")
		if err != nil {
			res.Err = err.Error()
			return res
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		res.Scrape = append(res.Scrape, time.Since(t0).Seconds())
		res.RedisCPU = append(res.RedisCPU, (procCPU(s.PID()) - c0).Seconds())
		res.Series = strings.Count(string(b), "\nredis_key_size{")
	}
	return res
}

// buildPeer builds redis_exporter at its latest version in a fresh module
// in a temp dir, and returns the binary and the version.
func buildPeer(ctx context.Context) (string, string, error) {
	dir, err := os.MkdirTemp("", "bench-peer-")
	if err != nil {
		return "", "", err
	}
	run := func(args ...string) (string, error) {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(cctx, "go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("go %s: %w: %s", strings.Join(args, " "), err, withoutURLs(lastLines(string(out), 5)))
		}
		return string(out), nil
	}
	if _, err := run("mod", "init", "benchpeer"); err != nil {
		return "", "", err
	}
	if _, err := run("get", peerModule+"@latest"); err != nil {
		return "", "", err
	}
	bin := filepath.Join(dir, "redis_exporter")
	if _, err := run("build", "-o", bin, peerModule); err != nil {
		return "", "", err
	}
	v, _ := run("list", "-m", "-f", "{{.Version}}", peerModule)
	return bin, strings.TrimSpace(v), nil
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, " | ")
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (p *peerResult) median(v []float64) float64 { return redisproc.Median(v) }

// withoutURLs drops the addresses from go's messages: the report names no
// registry host.
func withoutURLs(s string) string {
	var out []string
	for _, f := range strings.Fields(s) {
		if strings.Contains(f, "://") {
			f = "<module proxy>"
		}
		out = append(out, f)
	}
	return strings.Join(out, " ")
}
