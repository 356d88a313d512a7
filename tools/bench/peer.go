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
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/redisproc"
)

// The peer anchor: Debian's prometheus-redis-exporter (oliver006's
// redis_exporter, packaged; `make deps-bench` installs it), with
// --check-keys over the same slot sets. It reads the keys at scrape time:
// what one scrape costs is its sweep.

const peerBinary = "prometheus-redis-exporter"

type peerResult struct {
	Ran      bool
	Err      string
	Version  string
	Keys     int
	Scrape   []float64 // seconds per scrape
	RedisCPU []float64 // redis-server CPU seconds per scrape
	RSS      uint64    // the peer's VmRSS after its scrapes
	HWM      uint64    // the peer's peak RSS
	Series   int
	// One slot set holding 1 live, 1 future and 2 expired members: what
	// the peer says of it, beside what the exporter's state rules say.
	Anomalous anomalousSet
}

type anomalousSet struct {
	Key      string
	PeerSize float64 // redis_key_size
	Live     int
	Future   int // expiry beyond now + ttl: a unit bug; never expires
	Expired  int // dead, waiting for the next acquire to prune them
}

func runPeer(ctx context.Context, n int) *peerResult {
	res := &peerResult{Keys: n}
	bin, err := exec.LookPath(peerBinary)
	if err != nil {
		res.Err = fmt.Sprintf("%s not found: `apt-get install prometheus-redis-exporter` (make bench installs it)", peerBinary)
		log.Printf("peer: %s", res.Err)
		return res
	}
	res.Version = peerVersion(ctx, bin)
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
	as, err := writeAnomalousSet(ctx, admin, now.UnixMilli())
	if err != nil {
		res.Err = err.Error()
		return res
	}
	res.Anomalous = as
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
	hc := &http.Client{Timeout: 10 * time.Minute}
	if err := waitListening(ctx, hc, "http://"+listen+"/health"); err != nil {
		res.Err = err.Error()
		return res
	}
	sizeRE := regexp.MustCompile(`(?m)^redis_key_size\{[^}]*key="` + regexp.QuoteMeta(as.Key) + `"[^}]*\} (\S+)$`)
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
		if m := sizeRE.FindSubmatch(b); m != nil {
			res.Anomalous.PeerSize, _ = strconv.ParseFloat(string(m[1]), 64)
		}
	}
	res.RSS = pidStatus(cmd.Process.Pid, "VmRSS")
	res.HWM = pidStatus(cmd.Process.Pid, "VmHWM")
	res.Ran = true
	return res
}

// writeAnomalousSet writes one slot set under the bench's pattern whose
// ZCARD overstates what is held: the peer reports ZCARD.
func writeAnomalousSet(ctx context.Context, c *redis.Client, now int64) (anomalousSet, error) {
	as := anomalousSet{Key: "joishi:streams:peer-anomalous", Live: 1, Future: 1, Expired: 2}
	ttl := int64(benchTiming.ttl)
	err := c.ZAdd(ctx, as.Key,
		redis.Z{Score: float64(now + ttl), Member: "live"}, // just heartbeated
		// An expiry written in microseconds where milliseconds were meant.
		redis.Z{Score: float64((now + ttl) * 1000), Member: "future"},
		redis.Z{Score: float64(now - 60_000), Member: "dead-1"},
		redis.Z{Score: float64(now - 3_600_000), Member: "dead-2"},
	).Err()
	return as, err
}

func waitListening(ctx context.Context, hc *http.Client, url string) error {
	deadline := time.Now().Add(time.Minute)
	for {
		if r, err := hc.Get(url); err == nil {
			r.Body.Close()
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s did not start listening", peerBinary)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func peerVersion(ctx context.Context, bin string) string {
	out, _ := exec.CommandContext(ctx, bin, "--version").CombinedOutput()
	if m := regexp.MustCompile(`Exporter (\S+)`).FindSubmatch(out); m != nil {
		return string(m[1])
	}
	return "unknown"
}

// pidStatus reads a "kB" field of /proc/PID/status (VmRSS, VmHWM) in bytes.
func pidStatus(pid int, field string) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		name, rest, ok := strings.Cut(line, ":")
		if !ok || name != field {
			continue
		}
		n, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		return n << 10
	}
	return 0
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
