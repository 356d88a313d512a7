package collector

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestCollectorExposition(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	totals := FamilyTotals{
		Acquires: 10, Heartbeats: 42, Ended: [numOutcomes]uint64{6, 2, 0},
		HoldCounts: make([]uint64, len(HoldBuckets)), SweepErrors: 1, KeysScanned: 30,
		Skipped: [numSkipReasons]uint64{1, 2, 0, 1},
	}
	totals.observeHold(3)
	snap := &Snapshot{
		ClockSkew: 250 * time.Millisecond, HaveClock: true,
		Families: []*FamilySnapshot{
			{
				Name: "streams", Kind: "slotset", OK: true, LastSuccess: now.Add(-time.Second),
				Duration: 20 * time.Millisecond, StaleAfter: 10 * time.Second, Totals: totals,
				Gauges: FamilyGauges{
					Sets: 4, Members: [numStates]int{3, 1, 1, 2, 1}, WithoutTTL: 1, ExpiringEarly: 1,
					Users:      FloorAggregates{Active: 4, AtLimit: 1, OverLimit: 1, FloorNonzero: 1},
					UserSeries: []UserView{{User: "u\xff1", UsedMax: 4, FloorSeconds: 1800, Anomaly: true}},
				},
			},
			{
				Name: "legacy", Kind: "counter", OK: false, LastSuccess: now.Add(-time.Minute),
				StaleAfter: 10 * time.Second, Totals: FamilyTotals{HoldCounts: make([]uint64, len(HoldBuckets)), SweepErrors: 3},
				Gauges: FamilyGauges{Sets: 9, CountersNegative: 2},
			},
		},
	}
	c := New(func() *Snapshot { return snap }, func() bool { return false })
	c.now = func() time.Time { return now }

	want := `
# HELP slot_members Slot-set members by state (live, stale, expired, zombie, future). Sampled in the background every sampling.interval; a scrape never touches Redis.
# TYPE slot_members gauge
slot_members{family="streams",state="expired"} 1
slot_members{family="streams",state="future"} 1
slot_members{family="streams",state="live"} 3
slot_members{family="streams",state="stale"} 2
slot_members{family="streams",state="zombie"} 1
# HELP slot_user_floor_seconds Seconds since the user's used was last observed at 0 (0 if it is 0 now). Sampled in the background every sampling.interval; a scrape never touches Redis.
# TYPE slot_user_floor_seconds gauge
slot_user_floor_seconds{family="streams",user="u\\xff1"} 1800
# HELP slot_holds_ended_total Members gone, by outcome: released, expired (the holder died and the TTL cleaned up), lost (the whole keyspace vanished, e.g. Redis restarted empty). Sampled in the background every sampling.interval; a scrape never touches Redis.
# TYPE slot_holds_ended_total counter
slot_holds_ended_total{family="streams",outcome="expired"} 2
slot_holds_ended_total{family="streams",outcome="lost"} 0
slot_holds_ended_total{family="streams",outcome="released"} 6
# HELP slot_exporter_up 1 if the last sweep of every family succeeded.
# TYPE slot_exporter_up gauge
slot_exporter_up 0
# HELP slot_exporter_config_last_reload_successful 0 after a refused config reload, until a good one.
# TYPE slot_exporter_config_last_reload_successful gauge
slot_exporter_config_last_reload_successful 0
# HELP slot_exporter_sweep_errors_total Failed sweeps of a family.
# TYPE slot_exporter_sweep_errors_total counter
slot_exporter_sweep_errors_total{family="legacy"} 3
slot_exporter_sweep_errors_total{family="streams"} 1
# HELP slot_sets Keys of the family seen in the last sweep. Sampled in the background every sampling.interval; a scrape never touches Redis.
# TYPE slot_sets gauge
slot_sets{family="streams"} 4
# HELP slot_hold_duration_seconds First-seen to last-seen of ended holds. Sampled in the background every sampling.interval; a scrape never touches Redis.
# TYPE slot_hold_duration_seconds histogram
slot_hold_duration_seconds_bucket{family="streams",le="0.5"} 0
slot_hold_duration_seconds_bucket{family="streams",le="1"} 0
slot_hold_duration_seconds_bucket{family="streams",le="2.5"} 0
slot_hold_duration_seconds_bucket{family="streams",le="5"} 1
slot_hold_duration_seconds_bucket{family="streams",le="10"} 1
slot_hold_duration_seconds_bucket{family="streams",le="30"} 1
slot_hold_duration_seconds_bucket{family="streams",le="60"} 1
slot_hold_duration_seconds_bucket{family="streams",le="120"} 1
slot_hold_duration_seconds_bucket{family="streams",le="300"} 1
slot_hold_duration_seconds_bucket{family="streams",le="600"} 1
slot_hold_duration_seconds_bucket{family="streams",le="900"} 1
slot_hold_duration_seconds_bucket{family="streams",le="1800"} 1
slot_hold_duration_seconds_bucket{family="streams",le="3600"} 1
slot_hold_duration_seconds_bucket{family="streams",le="7200"} 1
slot_hold_duration_seconds_bucket{family="streams",le="+Inf"} 1
slot_hold_duration_seconds_sum{family="streams"} 3
slot_hold_duration_seconds_count{family="streams"} 1
`
	// The legacy family's last good sweep is a minute old (> 2 x interval):
	// its slot_sets must be gone, its exporter counters must stay.
	err := testutil.CollectAndCompare(c, strings.NewReader(want),
		"slot_members", "slot_user_floor_seconds", "slot_holds_ended_total", "slot_exporter_up",
		"slot_exporter_config_last_reload_successful", "slot_exporter_sweep_errors_total", "slot_sets",
		"slot_hold_duration_seconds")
	if err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(c, "slot_counters_negative"); n != 0 {
		t.Errorf("stale family must not export slot_counters_negative, got %d series", n)
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
