package rulescale

import (
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

type ruleFile struct {
	Groups []struct {
		Name     string `yaml:"name"`
		Interval string `yaml:"interval"`
		Rules    []rule `yaml:"rules"`
	} `yaml:"groups"`
}

type rule struct {
	Alert         string            `yaml:"alert"`
	Record        string            `yaml:"record"`
	Expr          string            `yaml:"expr"`
	For           string            `yaml:"for"`
	KeepFiringFor string            `yaml:"keep_firing_for"`
	Labels        map[string]string `yaml:"labels"`
	Annotations   map[string]string `yaml:"annotations"`
}

func parseRules(t *testing.T, b []byte) (ruleFile, map[string]rule) {
	t.Helper()
	var rf ruleFile
	if err := yaml.Unmarshal(b, &rf); err != nil {
		t.Fatalf("output is not valid YAML: %v\n%s", err, b)
	}
	byName := map[string]rule{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			name := r.Alert
			if name == "" {
				name = r.Record
			}
			byName[name] = r
		}
	}
	return rf, byName
}

func mustScale(t *testing.T, in string, factor float64, min time.Duration) string {
	t.Helper()
	out, err := Scale([]byte(in), factor, min)
	if err != nil {
		t.Fatalf("Scale: %v", err)
	}
	return string(out)
}

func TestScaleShippedRules(t *testing.T) {
	in, err := os.ReadFile("../slot_exporter.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	out, err := Scale(in, 1.0/60, 2*time.Second)
	if err != nil {
		t.Fatalf("Scale: %v", err)
	}
	_, before := parseRules(t, in)
	_, after := parseRules(t, out)
	if len(before) != len(after) || len(after) == 0 {
		t.Fatalf("rule count changed: %d before, %d after", len(before), len(after))
	}
	for name, b := range before {
		a, ok := after[name]
		if !ok {
			t.Errorf("rule %s lost", name)
			continue
		}
		if len(a.Annotations) != len(b.Annotations) {
			t.Errorf("%s: annotations changed", name)
		}
		for k, v := range b.Annotations {
			if a.Annotations[k] != v {
				t.Errorf("%s: annotation %s changed:\n%q\n%q", name, k, v, a.Annotations[k])
			}
		}
		for k, v := range b.Labels {
			if a.Labels[k] != v {
				t.Errorf("%s: label %s changed", name, k)
			}
		}
	}

	want := map[string]struct{ expr, forDur string }{
		// [5m] -> 5s.
		"family_outcome:slot_holds_ended:rate5m": {"rate(slot_holds_ended_total[5s])", ""},
		"family:slot_heartbeats:rate5m":          {"rate(slot_heartbeats_total[5s])", ""},
		// The floor window is a series (the exporter's floor_window, which
		// the end-to-end test scales itself): no literal to scale; for 5m -> 5s.
		"SlotUserFloorNeverZero": {"slot_user_floor_seconds > on (instance, job, family) group_left () (slot_family_floor_window_seconds > 0)", "5s"},
		// Rates and counts are not durations: 0.5 and 0.02 stay.
		"SlotHoldsExpiringSpike": {`sum without (instance, pod) (family_outcome:slot_holds_ended:rate5m{outcome="expired"}) / ignoring (outcome) sum without (instance, pod) (family:slot_holds_ended:rate5m) > 0.5 and sum without (instance, pod) (family:slot_holds_ended:rate5m) > 0.02 unless on (job, family) slot_family_info{kind="lock"}`, "2s"},
		// 100 members stays 100.
		"SlotUnprunedMembersGrowing": {`sum without (instance, pod) (deriv(slot_members{state="expired"}[30s])) > 0 and sum without (instance, pod) (slot_members{state="expired"}) > 100`, "30s"},
		// 60s and 2 x the sampling period depend on sampling.interval and
		// the read budget, not on alert timing: unmarked, kept.
		"SlotExporterSweepsStale": {"timestamp(slot_exporter_last_sweep_timestamp_seconds) - slot_exporter_last_sweep_timestamp_seconds > on (instance, job, family) group_left () (clamp_min(2 * slot_exporter_sampling_period_seconds, 60) or on (instance, job, family) slot_exporter_last_sweep_timestamp_seconds * 0 + 60)", "5s"},
		"SlotExporterAbsent":      {"absent(slot_exporter_up)", "5s"},
		// A per-minute figure: 60 is not a duration of the alert's timing.
		"SlotLockLeasesExpiring": {`sum without (instance, pod) (family_outcome:slot_holds_ended:rate5m{outcome="expired"}) * 60 > 0 and on (job, family) slot_family_info{kind="lock"}`, "10s"},
	}
	for name, w := range want {
		got := after[name]
		if got.Expr != w.expr {
			t.Errorf("%s: expr\n got %q\nwant %q", name, got.Expr, w.expr)
		}
		if got.For != w.forDur {
			t.Errorf("%s: for: got %q, want %q", name, got.For, w.forDur)
		}
	}
}

func TestScaleComposes(t *testing.T) {
	in, err := os.ReadFile("../slot_exporter.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	twice := mustScale(t, mustScale(t, string(in), 0.5, 0), 0.5, 0)
	once := mustScale(t, string(in), 0.25, 0)
	if twice != once {
		t.Errorf("scaling by 0.5 twice differs from scaling by 0.25 once")
	}
	// Factor 1 changes the layout but no value.
	_, a := parseRules(t, []byte(mustScale(t, string(in), 1, 0)))
	_, b := parseRules(t, []byte(mustScale(t, mustScale(t, string(in), 1, 0), 1, 0)))
	for name := range a {
		if a[name].Expr != b[name].Expr || a[name].For != b[name].For {
			t.Errorf("%s: factor 1 is not a fixed point", name)
		}
	}
}

func record(expr string) string {
	return "groups:\n  - name: g\n    rules:\n      - record: r\n        expr: '" + strings.ReplaceAll(expr, "'", "''") + "'\n"
}

func TestScaleExpressions(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		factor   float64
		min      time.Duration
	}{
		{"rate(x[5m])", "rate(x[30s])", 0.1, 0},
		{"max_over_time(rate(x[5m])[1h:1m] offset 10m)", "max_over_time(rate(x[30s])[6m:6s] offset 1m)", 0.1, 0},
		{"max_over_time(x[1h:])", "max_over_time(x[6m:])", 0.1, 0},
		{"rate(x[5m] offset 1h)", "rate(x[30s] offset 6m)", 0.1, 0},
		{"x offset -10m", "x offset -1m", 0.1, 0},
		{"rate(x[10m] @ 1000)", "rate(x[1m] @ 1000.000)", 0.1, 0},
		{"rate(x[1m])", "rate(x[5s])", 0.001, 5 * time.Second},
		{"rate(x[1m])", "rate(x[1ms])", 1e-9, 0},
		{"rate(x[1m])", "rate(x[2m])", 2, 0},
		// Newer PromQL reads a duration literal as a number of seconds: it is a
		// duration, so it is scaled without a marker.
		{"time() - x > 1h", "time() - x > 6m", 0.1, 0},
		// Unmarked numbers are not durations.
		{"x > 1800", "x > 1800", 0.1, 0},
		{"sum by (family) (rate(x[5m])) / 300 > 0.02", "sum by (family) (rate(x[30s])) / 300 > 0.02", 0.1, 0},
	} {
		_, rules := parseRules(t, []byte(mustScale(t, record(tc.in), tc.factor, tc.min)))
		if got := rules["r"].Expr; got != tc.want {
			t.Errorf("Scale(%q, %v, %v) = %q, want %q", tc.in, tc.factor, tc.min, got, tc.want)
		}
	}
}

func TestScaleDurationsOutsideExpr(t *testing.T) {
	in := `groups:
  - name: g
    interval: 1m
    rules:
      - alert: A
        expr: x > 0
        for: 10m
        keep_firing_for: 5m
      - alert: B
        expr: x > 0
        for: 0s
      - alert: C
        expr: x > 0
`
	rf, rules := parseRules(t, []byte(mustScale(t, in, 0.1, 0)))
	if rf.Groups[0].Interval != "6s" {
		t.Errorf("group interval: got %q, want 6s", rf.Groups[0].Interval)
	}
	if rules["A"].For != "1m" || rules["A"].KeepFiringFor != "30s" {
		t.Errorf("A: for %q keep_firing_for %q, want 1m and 30s", rules["A"].For, rules["A"].KeepFiringFor)
	}
	if rules["B"].For != "0s" {
		t.Errorf("B: a zero for must stay zero, got %q", rules["B"].For)
	}
	if rules["C"].For != "" {
		t.Errorf("C: an absent for must stay absent, got %q", rules["C"].For)
	}
	// min raises short non-zero durations only.
	_, rules = parseRules(t, []byte(mustScale(t, in, 0.001, 3*time.Second)))
	if rules["A"].For != "3s" || rules["B"].For != "0s" {
		t.Errorf("min: A for %q (want 3s), B for %q (want 0s)", rules["A"].For, rules["B"].For)
	}
}

func TestScaleMarkers(t *testing.T) {
	in := `groups:
  - name: g
    rules:
      - alert: Head
        # rulescale: 1800
        expr: x > 1800 and y > 100
      - alert: Line
        expr: time() - x > 600 or z > 1800 # rulescale: 600, 1800
      - alert: Block
        # rulescale: 180
        expr: |
          x > 180
          and
          y < 180
      - alert: Small
        # rulescale: 1
        expr: x > 1
`
	out := mustScale(t, in, 1.0/60, 2*time.Second)
	_, rules := parseRules(t, []byte(out))
	for name, want := range map[string]string{
		"Head":  "x > 30 and y > 100",
		"Line":  "time() - x > 10 or z > 30",
		"Block": "x > 3 and y < 3",
		// 1/60 s is raised to min, like every other duration.
		"Small": "x > 2",
	} {
		if got := rules[name].Expr; got != want {
			t.Errorf("%s: got %q, want %q", name, got, want)
		}
	}
	for _, m := range []string{"rulescale: 30\n", "rulescale: 10, 30", "rulescale: 3\n", "rulescale: 2\n"} {
		if !strings.Contains(out, m) {
			t.Errorf("output lacks rewritten marker %q:\n%s", m, out)
		}
	}
}

func TestScaleErrors(t *testing.T) {
	good := record("rate(x[5m])")
	for _, tc := range []struct {
		name, in string
		factor   float64
		min      time.Duration
		want     string
	}{
		{"zero factor", good, 0, 0, "factor"},
		{"negative factor", good, -1, 0, "factor"},
		{"NaN factor", good, math.NaN(), 0, "factor"},
		{"infinite factor", good, math.Inf(1), 0, "factor"},
		{"negative min", good, 1, -time.Second, "min"},
		{"not yaml", "groups: [", 1, 0, "parse"},
		{"no groups", "rules: []\n", 1, 0, "groups"},
		{"bad expr", record("rate(x[5m]"), 1, 0, "expr"},
		{"bad for", "groups:\n  - name: g\n    rules:\n      - alert: A\n        expr: x\n        for: soon\n", 1, 0, "for"},
		{"no expr", "groups:\n  - name: g\n    rules:\n      - alert: A\n", 1, 0, "no expr"},
		{"stale marker", "groups:\n  - name: g\n    rules:\n      - alert: A\n        # rulescale: 1800\n        expr: x > 1700\n", 1, 0, "1800"},
		{"bad marker", "groups:\n  - name: g\n    rules:\n      - alert: A\n        # rulescale: soon\n        expr: x > 1700\n", 1, 0, "soon"},
		{"empty marker", "groups:\n  - name: g\n    rules:\n      - alert: A\n        # rulescale:\n        expr: x > 1700\n", 1, 0, "empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Scale([]byte(tc.in), tc.factor, tc.min)
			if err == nil {
				t.Fatalf("no error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}
