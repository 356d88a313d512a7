package sweep_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/collector"
	"github.com/slotexporter/slot_exporter/config"
)

// harness wires a config to a real Redis through a Sweeper and a Collector,
// the way main.go does, with sweeps stepped by hand.
type harness struct {
	t   testing.TB
	s   *collector.Sweeper
	reg *prometheus.Registry
}

func newHarness(t testing.TB, client redis.UniversalClient, yaml string) *harness {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	s := collector.NewSweeper(cfg, client, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collector.New(s.Snapshot, nil))
	return &harness{t: t, s: s, reg: reg}
}

func (h *harness) sweep() {
	h.t.Helper()
	if err := h.s.SweepOnce(context.Background()); err != nil {
		h.t.Fatalf("sweep: %v", err)
	}
}

// metrics gathers the registry into "name{l1="v1",l2="v2"}" -> value, with
// labels sorted by name. Histograms contribute _count and _sum.
func (h *harness) metrics() map[string]float64 {
	h.t.Helper()
	mfs, err := h.reg.Gather()
	if err != nil {
		h.t.Fatalf("gather: %v", err)
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

// expect compares exact values; a missing series counts as a mismatch.
func expect(t testing.TB, got map[string]float64, want map[string]float64) {
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

// series lists the keys of got whose name is name.
func series(got map[string]float64, name string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range got {
		if k == name || strings.HasPrefix(k, name+"{") {
			out[k] = v
		}
	}
	return out
}
