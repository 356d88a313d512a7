package demo_test

import (
	"context"
	"fmt"
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

// trouble is, by kind, every gauge of the catalog that signals a problem
// and that a family of the kind can show: the demo promises each non-zero
// at least once in every minute, in some family of the kind. A kind added
// to the demo adds its row.
var trouble = map[config.Kind][]string{
	config.KindSlotSet: {
		`slot_members{state="stale"}`, `slot_members{state="expired"}`, `slot_members{state="zombie"}`, `slot_members{state="future"}`,
		"slot_users_over_limit", "slot_users_floor_nonzero", "slot_sets_without_ttl", "slot_sets_expiring_early",
	},
	config.KindCounter:   {"slot_counters_negative", "slot_users_over_limit", "slot_users_floor_nonzero"},
	config.KindRateLimit: {"slot_ratelimit_keys_without_ttl", "slot_ratelimit_keys_ttl_beyond_window", "slot_ratelimit_callers_locked_out", "slot_users_floor_nonzero"},
	config.KindLock:      {`slot_members{state="zombie"}`, `slot_members{state="future"}`, "slot_sets_without_ttl", "slot_users_floor_nonzero"},
	config.KindList:      {"slot_queues_stalled", "slot_users_floor_nonzero"},
	config.KindStream: {
		"slot_stream_lag", "slot_stream_pending_stuck", "slot_stream_consumers_dead", "slot_stream_redelivered", "slot_users_floor_nonzero",
	},
	// Waiting age counts as trouble: the demo's backlog is past max_wait.
	config.KindBullMQ: {
		`slot_jobs{state="orphaned"}`, `slot_jobs{state="stuck"}`, `slot_jobs{state="overdue"}`,
		`slot_jobs_oldest_seconds{state="waiting"}`, `slot_jobs_oldest_seconds{state="orphaned"}`,
	},
	config.KindRQ: {
		`slot_jobs{state="orphaned"}`, `slot_jobs{state="stuck"}`, `slot_jobs{state="overdue"}`, `slot_workers{state="dead"}`,
		`slot_jobs_oldest_seconds{state="waiting"}`, `slot_jobs_oldest_seconds{state="orphaned"}`,
	},
	// Sidekiq's orphans vanish with their process: they show as lost.
	config.KindSidekiq: {
		`slot_jobs{state="stuck"}`, `slot_jobs{state="overdue"}`, `slot_workers{state="dead"}`, "slot_jobs_lost_total",
		`slot_jobs_oldest_seconds{state="waiting"}`,
	},
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
// signal moves within 60 s, that floors pass their (demo) window, that
// every trouble gauge of every kind is non-zero at least once in every 60 s
// window, before and after each restart and flush, and that nothing is
// logged at warn or above but the lost holds the demo causes.
//
// The demo's data losses come every 3 minutes; here every 30 s, so that
// about two minutes see both a restart and a flush twice and every 60 s
// window holds a data loss: a harder schedule than --demo's, where most
// windows have none. The failures' own times (ttl, max_hold, windows) are
// the demo's, so what is checked is what a user sees. A window is measured
// between sweeps' own end times, and the slowest signal comes back about
// 25 s after a loss (a floor's 20 s window): a slow machine has more than
// twice that in hand.
func TestDemoKeepsItsWord(t *testing.T) {
	if testing.Short() {
		t.Skip("two minutes of demo")
	}
	const (
		window   = 60 * time.Second
		duration = 130 * time.Second
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs := exportertest.NewLogs()
	d, err := demo.Start(ctx, logs.Logger(), demo.Options{FirstLoss: 20 * time.Second, LossEvery: 30 * time.Second})
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

	kindOf := map[string]config.Kind{}
	for _, f := range cfg.Families {
		kindOf[f.Name] = f.Kind
		if _, ok := trouble[f.Kind]; !ok {
			t.Errorf("family %s: kind %s has no row in trouble", f.Name, f.Kind)
		}
	}
	// lastSeen and worst are by kind and trouble gauge: when it was last
	// non-zero, and the longest time it was not.
	start := time.Now()
	lastSeen, worst := map[string]time.Time{}, map[string]time.Duration{}
	for k, gs := range trouble {
		for _, g := range gs {
			lastSeen[string(k)+" "+g] = start
		}
	}
	seen := map[string]time.Duration{}
	floorPast := time.Duration(0)
	want := signals()
	var lastSweep time.Time
	for time.Since(start) < duration {
		// Each sweep's own end time is the moment its figures describe.
		at := sweptAt(h.Sweeper.Snapshot())
		if !at.After(lastSweep) {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		lastSweep = at
		got := h.Metrics()
		for series, v := range got {
			if v == 0 {
				continue
			}
			for _, s := range want {
				if _, ok := seen[s]; !ok && matches(series, s) {
					seen[s] = at.Sub(start)
				}
			}
			if strings.HasPrefix(series, "slot_user_floor_seconds{") && v > cfg.Leaks.FloorWindow.Seconds() && floorPast == 0 {
				floorPast = at.Sub(start)
			}
			fam := familyOf(series)
			for _, g := range trouble[kindOf[fam]] {
				if matches(series, g) {
					lastSeen[string(kindOf[fam])+" "+g] = at
				}
			}
		}
		for g, last := range lastSeen {
			worst[g] = max(worst[g], at.Sub(last))
		}
	}
	var missing, times, gaps, broken []string
	for _, s := range want {
		if at, ok := seen[s]; ok {
			times = append(times, s+" "+at.Round(time.Second).String())
		} else {
			missing = append(missing, s)
		}
	}
	for g, w := range worst {
		gaps = append(gaps, fmt.Sprintf("%s %s", g, w.Round(time.Second)))
		if w >= window {
			broken = append(broken, g)
		}
	}
	sort.Strings(times)
	sort.Strings(gaps)
	sort.Strings(broken)
	t.Logf("time to each signal:\n  %s\n  floor past its window: %s", strings.Join(times, "\n  "), floorPast.Round(time.Second))
	t.Logf("longest time each trouble gauge was 0, by kind:\n  %s", strings.Join(gaps, "\n  "))
	if len(missing) > 0 {
		t.Errorf("never non-zero within 60 s: %v", missing)
	}
	if floorPast == 0 {
		t.Errorf("no user's floor passed the demo's floor window (%v) within 60 s", cfg.Leaks.FloorWindow)
	}
	if len(broken) > 0 {
		t.Errorf("trouble gauges at 0 for a whole %v window: %v", window, broken)
	}
	losses := 0
	for _, r := range logs.Take() {
		if strings.HasPrefix(r.Msg, "demo: simulated a") {
			losses++
		}
		// An overrun sweep is the test machine's own load (the demo's
		// interval is 1s), not something the demo shows.
		if r.Level >= slog.LevelWarn && !strings.HasPrefix(r.Msg, "holds lost") && !strings.HasPrefix(r.Msg, "sweep overran") {
			t.Errorf("false alarm in the demo's log: %s %v", r.Msg, r.Attrs)
		}
	}
	if losses < 4 {
		t.Errorf("%d data losses in %v, want at least 4 (2 restarts, 2 flushes)", losses, duration)
	}
}

// sweptAt is the end of the latest sweep of every family: the oldest of
// their last successes, zero before each has one.
func sweptAt(s *snapshot.Snapshot) time.Time {
	var at time.Time
	if s == nil || len(s.Families) == 0 {
		return at
	}
	for i, f := range s.Families {
		if i == 0 || f.LastSuccess.Before(at) {
			at = f.LastSuccess
		}
	}
	return at
}

// familyOf is a gathered series' family label.
func familyOf(series string) string {
	_, rest, ok := strings.Cut(series, `family="`)
	if !ok {
		return ""
	}
	fam, _, _ := strings.Cut(rest, `"`)
	return fam
}
