package demo_test

import (
	"context"
	"log/slog"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/demo"
	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/snapshot"
	"github.com/slotexporter/slot_exporter/redisconn"
)

// signals are the series of the catalog that must be non-zero at least
// once in the demo's first minute: every domain metric, every state and
// outcome, and the exporter's skipped keys and dropped series.
func signals() []string {
	var out []string
	for _, m := range snapshot.Domain {
		switch m {
		case snapshot.Members:
			for _, s := range []string{"live", "stale", "expired", "zombie", "future"} {
				out = append(out, m.Name+`{state="`+s+`"}`)
			}
		case snapshot.HoldsEnded:
			for _, o := range []string{"released", "expired", "lost"} {
				out = append(out, m.Name+`{outcome="`+o+`"}`)
			}
		case snapshot.HoldDuration:
			out = append(out, m.Name+"_count")
		default:
			out = append(out, m.Name)
		}
	}
	return append(out, "slot_exporter_keys_skipped_total", "slot_exporter_user_series_dropped")
}

// matches reports whether a gathered series belongs to a signal: its name,
// and the one label the signal names, if any.
func matches(series, signal string) bool {
	name, label, _ := strings.Cut(signal, "{")
	if series != name && !strings.HasPrefix(series, name+"{") {
		return false
	}
	return label == "" || strings.Contains(series, strings.TrimSuffix(label, "}"))
}

// TestDemoKeepsItsWord runs the demo as --demo does and checks that every
// signal moves within 60 s, that floors pass their (demo) window, and that
// nothing is logged at warn or above but the lost holds the demo causes.
func TestDemoKeepsItsWord(t *testing.T) {
	if testing.Short() {
		t.Skip("a minute of demo")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs := exportertest.NewLogs()
	d, err := demo.Start(ctx, logs.Logger())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Stop()
	cfg, err := config.Parse(d.Config)
	if err != nil {
		t.Fatal(err)
	}
	client, err := redisconn.New(&cfg.Redis)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	h := exportertest.NewFromConfig(t, client, cfg, logs.Logger())
	h.Sweeper.Start()

	start := time.Now()
	seen := map[string]time.Duration{}
	floorPast := time.Duration(0)
	want := signals()
	for time.Since(start) < 60*time.Second && len(seen) < len(want) || floorPast == 0 && time.Since(start) < 60*time.Second {
		time.Sleep(500 * time.Millisecond)
		got := h.Metrics()
		for series, v := range got {
			if v == 0 {
				continue
			}
			for _, s := range want {
				if _, ok := seen[s]; !ok && matches(series, s) {
					seen[s] = time.Since(start)
				}
			}
			if strings.HasPrefix(series, "slot_user_floor_seconds{") && v > cfg.Leaks.FloorWindow.Seconds() && floorPast == 0 {
				floorPast = time.Since(start)
			}
		}
	}
	var missing, times []string
	for _, s := range want {
		if at, ok := seen[s]; ok {
			times = append(times, s+" "+at.Round(time.Second).String())
		} else {
			missing = append(missing, s)
		}
	}
	sort.Strings(times)
	t.Logf("time to each signal:\n  %s\n  floor past its window: %s", strings.Join(times, "\n  "), floorPast.Round(time.Second))
	if len(missing) > 0 {
		t.Errorf("never non-zero within 60 s: %v", missing)
	}
	if floorPast == 0 {
		t.Errorf("no user's floor passed the demo's floor window (%v) within 60 s", cfg.Leaks.FloorWindow)
	}
	for _, r := range logs.Take() {
		if r.Level >= slog.LevelWarn && !strings.HasPrefix(r.Msg, "holds lost") {
			t.Errorf("false alarm in the demo's log: %s %v", r.Msg, r.Attrs)
		}
	}
}
