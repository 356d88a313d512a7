package collector

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	"github.com/slotexporter/slot_exporter/internal/snapshot"
	"github.com/slotexporter/slot_exporter/internal/track"
)

var update = flag.Bool("update", false, "rewrite testdata/exposition.prom from the collector's output")

const goldenFile = "testdata/exposition.prom"

func v(m *snapshot.Metric, val float64, labels ...string) snapshot.Value {
	return snapshot.Value{Metric: m, V: val, Labels: labels}
}

// skipped is keys skipped by reason, every reason listed, as a sweep
// publishes them.
func skipped(n ...uint64) []snapshot.Count {
	names := []string{"wrong_type", "bad_user", "oversized", "bad_value", "no_permission", "value_too_large"}
	out := make([]snapshot.Count, len(names))
	for i, name := range names {
		out[i].Label = name
		if i < len(n) {
			out[i].N = n[i]
		}
	}
	return out
}

// fixedSnapshot is one family of every kind, built by hand from the
// catalog: what the exposition of each looks like does not depend on a
// sweep. The legacy family's last good sweep is a minute old, more than
// its 2 x interval: only its exporter counters may show.
func fixedSnapshot(now time.Time) *snapshot.Snapshot {
	fresh := func(name, kind string) *snapshot.Family {
		return &snapshot.Family{
			Name: name, Kind: kind, OK: true, LastSuccess: now.Add(-time.Second),
			Duration: 20 * time.Millisecond, StaleAfter: 10 * time.Second,
			FloorWindow: 30 * time.Minute, Skipped: skipped(),
		}
	}
	hist := snapshot.NewHoldHistogram()
	hist.Observe(3)
	streams := fresh("streams", "slotset")
	streams.Limit, streams.HasLimit, streams.OverLimitShown = 3, true, true
	streams.SweepErrors, streams.KeysScanned, streams.Skipped = 1, 30, skipped(1, 2, 0, 1, 0)
	streams.Sets = 4
	streams.Aggregates = track.FloorAggregates{Active: 4, AtLimit: 1, OverLimit: 1, FloorNonzero: 1}
	streams.Users = []snapshot.User{{UserView: track.UserView{User: "u\xff1", Used: 4, UsedMax: 4, FloorSeconds: 1800, Anomaly: true}}}
	streams.Gauges = []snapshot.Value{
		v(snapshot.Members, 3, "live"), v(snapshot.Members, 1, "expired"), v(snapshot.Members, 1, "future"),
		v(snapshot.Members, 2, "stale"), v(snapshot.Members, 1, "zombie"),
		v(snapshot.WithoutTTL, 1), v(snapshot.ExpiringEarly, 1),
	}
	streams.Counters = []snapshot.Value{
		v(snapshot.Acquires, 10), v(snapshot.Heartbeats, 42),
		v(snapshot.HoldsEnded, 6, "released"), v(snapshot.HoldsEnded, 2, "expired"), v(snapshot.HoldsEnded, 0, "lost"),
	}
	streams.Holds = &hist

	legacy := fresh("legacy", "counter")
	legacy.OK, legacy.LastSuccess, legacy.SweepErrors = false, now.Add(-time.Minute), 3
	legacy.Limit, legacy.HasLimit, legacy.OverLimitShown = 3, true, true
	legacy.Sets = 9
	legacy.Gauges = []snapshot.Value{v(snapshot.CountersNeg, 2)}

	// A rate counter over its limit is refused hits, not a broken cap:
	// no slot_users_over_limit.
	rate := fresh("logins", "ratelimit")
	rate.Limit, rate.HasLimit, rate.FloorWindow = 100, true, 0
	rate.Sets, rate.KeysScanned = 5, 5
	rate.Aggregates = track.FloorAggregates{Active: 5, AtLimit: 2, OverLimit: 1}
	rate.Gauges = []snapshot.Value{v(snapshot.RateNoTTL, 1), v(snapshot.RateTTLBeyond, 1), v(snapshot.RateLockedOut, 1)}

	// A family without a limit: no slot_family_limit, no at/over limit.
	locks := fresh("jobs-lock", "lock")
	locks.Sets, locks.KeysScanned = 2, 2
	locks.Aggregates = track.FloorAggregates{Active: 2}
	lockHist := snapshot.NewHoldHistogram()
	locks.Gauges = []snapshot.Value{
		v(snapshot.Members, 1, "live"), v(snapshot.Members, 0, "expired"), v(snapshot.Members, 0, "future"),
		v(snapshot.Members, 0, "stale"), v(snapshot.Members, 1, "zombie"), v(snapshot.WithoutTTL, 1),
	}
	locks.Counters = []snapshot.Value{
		v(snapshot.Acquires, 3), v(snapshot.Heartbeats, 7),
		v(snapshot.HoldsEnded, 1, "released"), v(snapshot.HoldsEnded, 0, "expired"), v(snapshot.HoldsEnded, 0, "lost"),
	}
	locks.Holds = &lockHist

	queue := fresh("mail", "list")
	queue.Sets, queue.KeysScanned = 2, 2
	queue.Aggregates = track.FloorAggregates{Active: 2, FloorNonzero: 1}
	queue.Users = []snapshot.User{{
		UserView: track.UserView{User: "tenant-a", Used: 7, UsedMax: 9, FloorSeconds: 2400, Anomaly: true},
		Extra:    []snapshot.Value{v(snapshot.QueueHeadWait, 95.5)},
	}}
	queue.Gauges = []snapshot.Value{v(snapshot.QueueItems, 12), v(snapshot.QueuesStalled, 1)}

	events := fresh("orders", "stream")
	events.Sets, events.KeysScanned = 1, 1
	events.Aggregates = track.FloorAggregates{Active: 1}
	events.Users = []snapshot.User{{
		UserView: track.UserView{User: "shop", Used: 3, UsedMax: 3},
		Extra:    []snapshot.Value{v(snapshot.StreamOldest, 61, "billing"), v(snapshot.StreamOldest, 2, "mailer")},
	}}
	events.Gauges = []snapshot.Value{
		v(snapshot.StreamEntries, 100), v(snapshot.StreamPending, 3), v(snapshot.StreamLag, 4),
		v(snapshot.StreamStuck, 1), v(snapshot.StreamDead, 1), v(snapshot.StreamRedeliver, 1),
	}
	return &snapshot.Snapshot{
		ClockSkew: 250 * time.Millisecond, HaveClock: true,
		Families: []*snapshot.Family{streams, legacy, rate, locks, queue, events},
	}
}

// TestCollectorExposition compares the whole exposition of a fixed
// snapshot with testdata/exposition.prom: names, help, types, labels and
// values. Run with -update to rewrite the file after a deliberate change,
// and read the diff.
func TestCollectorExposition(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	snap := fixedSnapshot(now)
	c := New(func() *snapshot.Snapshot { return snap }, Options{
		ReloadOK: func() bool { return false },
		Releases: func() map[string]uint64 { return map[string]uint64{"released": 2, "refused": 1} },
	})
	c.now = func() time.Time { return now }

	if *update {
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(c)
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		for _, mf := range mfs {
			if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.MkdirAll(filepath.Dir(goldenFile), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenFile, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.Open(goldenFile)
	if err != nil {
		t.Fatal(err)
	}
	defer want.Close()
	// No metric names: every metric the collector emits is compared, so a
	// new or vanished series shows up here.
	if err := testutil.CollectAndCompare(c, want); err != nil {
		t.Fatal(err)
	}
}

// TestCollectorLeavesOut checks, on the fixed snapshot, what must not be
// emitted: the domain series of a family whose data went stale, limits
// and at/over-limit counts of a family without a limit, over-limit counts
// of a rate counter. The golden file holds the same, but a rewrite of it
// must not quietly give these up.
func TestCollectorLeavesOut(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	snap := fixedSnapshot(now)
	c := New(func() *snapshot.Snapshot { return snap }, Options{})
	c.now = func() time.Time { return now }
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var page bytes.Buffer
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&page, mf); err != nil {
			t.Fatal(err)
		}
	}
	for _, absent := range []string{
		`slot_counters_negative{family="legacy"}`, `slot_sets{family="legacy"}`, `slot_users_active{family="legacy"}`,
		`slot_family_limit{family="jobs-lock"}`, `slot_users_at_limit{family="jobs-lock"}`, `slot_users_over_limit{family="jobs-lock"}`,
		`slot_users_over_limit{family="logins"}`,
	} {
		if strings.Contains(page.String(), absent+" ") {
			t.Errorf("%s is emitted", absent)
		}
	}
	for _, present := range []string{
		`slot_exporter_sweep_errors_total{family="legacy"} 3`, `slot_family_info{family="legacy",kind="counter"} 1`,
		`slot_users_at_limit{family="logins"} 2`, `slot_family_floor_window_seconds{family="logins"} 0`,
		`slot_exporter_releases_total{result="failed"} 0`, `slot_exporter_config_last_reload_successful 1`,
	} {
		if !strings.Contains(page.String(), present+"\n") {
			t.Errorf("%s is missing", present)
		}
	}
	// Lint what a scrape would show.
	problems, err := testutil.CollectAndLint(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

func TestUserLabel(t *testing.T) {
	cases := map[string]string{
		"u17":         "u17",
		"ünïcode":     "ünïcode",
		"a\xffb":      `a\xffb`,
		`a\xffb`:      `a\\xffb`,
		"quote\"nl\n": "quote\"nl\n",
		"\x80\x81":    `\x80\x81`,
	}
	for in, want := range cases {
		if got := UserLabel(in); got != want {
			t.Errorf("UserLabel(%q) = %q, want %q", in, got, want)
		}
	}
}
