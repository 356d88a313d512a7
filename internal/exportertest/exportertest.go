// Package exportertest wires a config to a real Redis through a sweeper and
// the collector, the way main does, with sweeps stepped by hand, and reads
// the result back as plain values. Tests of every package use it; none
// copies it.
package exportertest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/collector"
	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/redistest"
	"github.com/slotexporter/slot_exporter/internal/sweep"
	"github.com/slotexporter/slot_exporter/redisconn"
)

// Harness is a sweeper and a registry over one config.
type Harness struct {
	t        testing.TB
	Sweeper  *sweep.Sweeper
	Registry *prometheus.Registry
}

// Quiet is a logger that discards everything.
func Quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// New parses yaml and builds a harness over client; logger may be nil.
func New(t testing.TB, client redis.UniversalClient, yaml string, logger ...*slog.Logger) *Harness {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return NewFromConfig(t, client, cfg, logger...)
}

// NewFromConfig is New for a parsed config.
func NewFromConfig(t testing.TB, client redis.UniversalClient, cfg *config.Config, logger ...*slog.Logger) *Harness {
	t.Helper()
	l := Quiet()
	if len(logger) > 0 && logger[0] != nil {
		l = logger[0]
	}
	s, err := sweep.New(context.Background(), cfg, client, l, nil)
	if err != nil {
		t.Fatalf("sweeper: %v", err)
	}
	t.Cleanup(s.Stop)
	return ForSweeper(t, s)
}

// ForSweeper is a harness over a sweeper built elsewhere (a reload's).
func ForSweeper(t testing.TB, s *sweep.Sweeper) *Harness {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collector.New(s.Snapshot, collector.Options{}))
	return &Harness{t: t, Sweeper: s, Registry: reg}
}

// Dial is New with the client main builds from the config's redis block
// (redisconn), so that the mode, timeouts, credentials and read_from are
// the exporter's own; the client closes with the test.
func Dial(t testing.TB, yaml string, logger ...*slog.Logger) *Harness {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatalf("config: %v\n%s", err, yaml)
	}
	client, err := redisconn.New(&cfg.Redis)
	if err != nil {
		t.Fatalf("redisconn: %v", err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return NewFromConfig(t, client, cfg, logger...)
}

// Sweep runs one sweep of every family and fails the test on an error.
func (h *Harness) Sweep() {
	h.t.Helper()
	if err := h.Sweeper.SweepOnce(context.Background()); err != nil {
		h.t.Fatalf("sweep: %v", err)
	}
}

// Metrics gathers the registry into `name{l1="v1",l2="v2"}` -> value, with
// labels sorted by name. Histograms contribute _count and _sum.
func (h *Harness) Metrics() map[string]float64 {
	h.t.Helper()
	return Gather(h.t, h.Registry)
}

// Gather is Metrics for any gatherer.
func Gather(t testing.TB, g prometheus.Gatherer) map[string]float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			sort.Strings(ls)
			key := mf.GetName()
			if len(ls) > 0 {
				key += "{" + strings.Join(ls, ",") + "}"
			}
			switch {
			case m.Gauge != nil:
				out[key] = m.GetGauge().GetValue()
			case m.Counter != nil:
				out[key] = m.GetCounter().GetValue()
			case m.Histogram != nil:
				out[strings.Replace(key, mf.GetName(), mf.GetName()+"_count", 1)] = float64(m.GetHistogram().GetSampleCount())
				out[strings.Replace(key, mf.GetName(), mf.GetName()+"_sum", 1)] = m.GetHistogram().GetSampleSum()
			}
		}
	}
	return out
}

// Expect compares exact values; a missing series counts as a mismatch.
func Expect(t testing.TB, got, want map[string]float64) {
	t.Helper()
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v, ok := got[k]
		if !ok {
			t.Errorf("%s: missing, want %v", k, want[k])
			continue
		}
		if v != want[k] {
			t.Errorf("%s = %v, want %v", k, v, want[k])
		}
	}
}

// Series lists the entries of got whose metric name is name.
func Series(got map[string]float64, name string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range got {
		if k == name || strings.HasPrefix(k, name+"{") {
			out[k] = v
		}
	}
	return out
}

// Must fails the test at once on a non-nil error: for the setup steps whose
// failure leaves nothing to test.
func Must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// HangAfter is the least time WaitFor waits. Its deadline only ends a
// hung test: a busy two-core machine (the CI's, a laptop doing other work)
// once took 35 s for what takes 2 s on a quiet one, and a wait that cond
// ends returns as soon as it holds, so a long deadline costs a passing
// test nothing.
const HangAfter = 3 * time.Minute

// WaitFor polls cond until it holds, failing the test after d or
// HangAfter, whichever is longer.
func WaitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	d = max(d, HangAfter)
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Calls is redistest.Calls, for the tests that have this package at hand.
func Calls(t testing.TB, c redis.Cmdable, cmd string) int64 {
	t.Helper()
	return redistest.Calls(t, c, cmd)
}
