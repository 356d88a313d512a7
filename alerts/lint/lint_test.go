package lint

import (
	"slices"
	"strings"
	"testing"
)

func mustChecker(t *testing.T, rules string) (*RuleFile, *Checker) {
	t.Helper()
	var rf *RuleFile
	if rules != "" {
		var err error
		if rf, err = ParseRuleFile([]byte(rules)); err != nil {
			t.Fatal(err)
		}
	}
	c, err := NewChecker(rf)
	if err != nil {
		t.Fatal(err)
	}
	return rf, c
}

func TestCheckExpr(t *testing.T) {
	_, c := mustChecker(t, "groups:\n  - name: g\n    rules:\n      - record: family:slot_heartbeats:rate5m\n        expr: rate(slot_heartbeats_total[5m])\n")
	for _, ok := range []string{
		`slot_sets`,
		`sum by (family) (rate(slot_holds_ended_total{outcome="expired"}[5m]))`,
		`histogram_quantile(0.9, sum by (le) (rate(slot_hold_duration_seconds_bucket[5m])))`,
		`family:slot_heartbeats:rate5m == 0`,
		`slot_family_limit`,
		`slot_user_floor_seconds > on (instance, job, family) group_left () slot_family_floor_window_seconds`,
		`slot_stream_oldest_pending_seconds{group="g"}`,
		`sum(slot_exporter_releases_total)`,
		`{__name__="slot_sets"}`,
		`up{job="slot_exporter"} == 0`,
		`time() - slot_exporter_last_sweep_timestamp_seconds > 60`,
	} {
		if err := c.CheckExpr(ok); err != nil {
			t.Errorf("CheckExpr(%q): %v", ok, err)
		}
	}
	for expr, want := range map[string]string{
		`slot_family_budget`:                  `"slot_family_budget"`,
		`slot_hold_duration_seconds`:          `"slot_hold_duration_seconds"`, // classic histogram: only _bucket/_sum/_count
		`rate(slot_heartbeats_total[5m]`:      "does not parse",
		`{__name__=~"slot_.*"}`:               "does not name one metric",
		`sum(slot_sets) / sum(node_load1)`:    `"node_load1"`,
		`family:slot_heartbeats:rate1m > 0`:   `"family:slot_heartbeats:rate1m"`,
		`slot_sets{family="a"} + on() foo{}`:  `"foo"`,
		`max_over_time(slot_nope[5m:1m]) > 0`: `"slot_nope"`,
	} {
		err := c.CheckExpr(expr)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckExpr(%q) = %v, want an error mentioning %s", expr, err, want)
		}
	}
}

func TestKeeps(t *testing.T) {
	_, c := mustChecker(t, `groups:
  - name: g
    rules:
      - record: family_outcome:slot_holds_ended:rate5m
        expr: rate(slot_holds_ended_total[5m])
      - record: family:slot_holds_ended:rate5m
        expr: sum without (outcome) (family_outcome:slot_holds_ended:rate5m)
      - record: job:slot_sets:sum
        expr: sum by (job) (slot_sets)
`)
	for expr, want := range map[string][2]bool{ // family, user
		`slot_user_floor_seconds > 1800`:                           {true, true},
		`slot_users_floor_nonzero > 0`:                             {true, false},
		`slot_exporter_up == 0`:                                    {false, false},
		`absent(slot_exporter_up)`:                                 {false, false},
		`absent(slot_sets)`:                                        {false, false},
		`sum(slot_user_used_max)`:                                  {false, false},
		`sum by (family) (slot_user_used_max)`:                     {true, false},
		`sum without (user) (slot_user_used_max)`:                  {true, false},
		`topk(3, slot_user_used_max)`:                              {true, true},
		`family:slot_holds_ended:rate5m > 0.02`:                    {true, false},
		`job:slot_sets:sum > 0`:                                    {false, false},
		`time() - slot_exporter_last_sweep_timestamp_seconds > 60`: {true, false},
		`slot_members > 0 unless ignoring (state) family:slot_holds_ended:rate5m > 0`: {true, false},
		`slot_members / on (job) group_left sum by (job) (slot_sets)`:                 {true, false},
		`slot_user_used_max > on (family) group_left slot_users_at_limit`:             {true, true},
		`slot_sets > on (job, instance) slot_sets`:                                    {false, false},
		`slot_user_used_max / ignoring (user) slot_users_at_limit`:                    {true, false},
		`label_replace(slot_exporter_up, "family", "all", "", "")`:                    {true, false},
		`vector(1)`:                     {false, false},
		`slot_exporter_up or slot_sets`: {true, false},
	} {
		e, err := c.ParseExpr(expr)
		if err != nil {
			t.Errorf("%s: %v", expr, err)
			continue
		}
		if got := [2]bool{c.keeps(e, "family"), c.keeps(e, "user")}; got != want {
			t.Errorf("keeps(%s) family,user = %v, want %v", expr, got, want)
		}
	}
}

func TestNewCheckerRejectsCycles(t *testing.T) {
	rf, err := ParseRuleFile([]byte("groups:\n  - name: g\n    rules:\n      - record: a:b:c\n        expr: d:e:f\n      - record: d:e:f\n        expr: a:b:c\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewChecker(rf); err == nil || !strings.Contains(err.Error(), "cycle") {
		t.Fatalf("NewChecker: %v, want a cycle error", err)
	}
}

func TestParseRuleFileIsStrict(t *testing.T) {
	_, err := ParseRuleFile([]byte("groups:\n  - name: g\n    rules:\n      - alert: A\n        expr: slot_sets\n        annotation:\n          summary: x\n"))
	if err == nil || !strings.Contains(err.Error(), "annotation") {
		t.Fatalf("ParseRuleFile accepted a misspelt key: %v", err)
	}
}

const runbook = "# Runbook\n\n## How it works\n\nCritical: SlotA. Info:\nSlotC. Everything else is a warning.\n\n```sh\n# SlotB\n```\n\n## SlotA\n\ntext\n\n## SlotA\n\n## SlotC\n"

func TestGitHubAnchors(t *testing.T) {
	for h, want := range map[string]string{
		"SlotUserFloorNeverZero":   "slotuserfloorneverzero",
		"How the exporter samples": "how-the-exporter-samples",
		"Conventions (read first)": "conventions-read-first",
		"a_b-c: d":                 "a_b-c-d",
	} {
		if got := GitHubAnchor(h); got != want {
			t.Errorf("GitHubAnchor(%q) = %q, want %q", h, got, want)
		}
	}
	a := RunbookAnchors([]byte(runbook))
	if a["slota"] != "SlotA" || a["slota-1"] != "SlotA" || a["how-it-works"] != "How it works" {
		t.Errorf("RunbookAnchors = %v", a)
	}
	if _, ok := a["slotb"]; ok {
		t.Errorf("a comment inside a code block was taken for a heading: %v", a)
	}
}

func TestCheckRuleFile(t *testing.T) {
	good := `groups:
  - name: g
    rules:
      - record: family:slot_heartbeats:rate5m
        expr: rate(slot_heartbeats_total[5m])
      - record: family:slot_members:max_over_time1h
        expr: max_over_time(slot_members[1h])
      - record: family:slot_heartbeats_rate:max
        expr: max without (instance) (family:slot_heartbeats:rate5m)
      - alert: SlotA
        expr: slot_user_floor_seconds > on (instance, job, family) group_left () slot_family_floor_window_seconds
        for: 5m
        labels: {severity: critical}
        annotations:
          summary: "{{ $labels.user }} in {{ $labels.family }}"
          description: d
          runbook_url: ` + RunbookBase + `#slota
      - alert: SlotC
        expr: slot_exporter_user_series_dropped > 0
        for: 5m
        labels: {severity: info}
        annotations:
          summary: "{{ $labels.family }} drops series"
          description: d
          runbook_url: ` + RunbookBase + `#slotc
`
	rf, c := mustChecker(t, good)
	if errs := c.CheckRuleFile(rf, []byte(runbook)); len(errs) > 0 {
		t.Fatalf("good rules: %v", errs)
	}
	for _, tc := range []struct{ from, to, want string }{
		{"severity: critical", "severity: page", "severity"},
		{"for: 5m", "for: soon", "for:"},
		{"for: 5m", "for: 90s", "shorter than 2m"},
		{"#slota", "#slot-a", "runbook_url"},
		// The runbook's severity list names a critical alert that is not.
		{"labels: {severity: critical}", "labels: {severity: warning}", "docs/runbook.md lists as critical SlotA; the rule file has none"},
		{"labels: {severity: info}", "labels: {severity: critical}", "lists as critical SlotA; the rule file has SlotA, SlotC"},
		{"SlotA", "SlotB", "no section headed"},
		{"{{ $labels.user }} in ", "", "do not name it"},
		{"slot_user_floor_seconds > on (instance, job, family) group_left () slot_family_floor_window_seconds", "slot_users_floor_nonzero > 0", "does not carry user"},
		{"summary: ", "summary: \"\"\n          x: ", "summary is missing"},
		{"record: family:slot_heartbeats:rate5m", "record: heartbeats_rate", "level:metric:operations"},
		{"slot_user_floor_seconds > on", "slot_user_floor_seconds > > on", "does not parse"},
		// A range too short for a 1m scrape, whatever the name says.
		{"rate(slot_heartbeats_total[5m])", "rate(slot_heartbeats_total[1m])", "[1m] is shorter than 4m"},
		{"max_over_time(slot_members[1h])", "max_over_time(slot_members[2m:30s])", "[2m] is shorter than 4m"},
		// A name that lies about its window, or does not give it.
		{"record: family:slot_heartbeats:rate5m", "record: family:slot_heartbeats:rate1m", "name says 1m but the expr computes over [5m]"},
		{"record: family:slot_members:max_over_time1h", "record: family:slot_members:max", "does not end with the window"},
	} {
		if !strings.Contains(good, tc.from) {
			t.Fatalf("the good rules no longer contain %q", tc.from)
		}
		bad := strings.Replace(good, tc.from, tc.to, 1)
		rf, err := ParseRuleFile([]byte(bad))
		if err != nil {
			t.Fatalf("%s: %v", tc.want, err)
		}
		c, err := NewChecker(rf)
		if err != nil {
			t.Fatal(err)
		}
		var all []string
		for _, e := range c.CheckRuleFile(rf, []byte(runbook)) {
			all = append(all, e.Error())
		}
		if !strings.Contains(strings.Join(all, "\n"), tc.want) {
			t.Errorf("%q -> %q: want an error mentioning %q, got:\n%s", tc.from, tc.to, tc.want, strings.Join(all, "\n"))
		}
	}
}

func TestCheckRuleTests(t *testing.T) {
	rf, c := mustChecker(t, `groups:
  - name: g
    rules:
      - record: family:slot_heartbeats:rate5m
        expr: rate(slot_heartbeats_total[5m])
      - alert: A
        expr: slot_sets > 0
      - alert: B
        expr: slot_sets > 1
`)
	// A covered both ways at both intervals; B silent at 1m only; the
	// recording rule at 1m only.
	tests := map[string][]byte{
		"1m.yml": []byte(`evaluation_interval: 59s
tests:
  - interval: 1m
    alert_rule_test:
      - alertname: A
        exp_alerts: [{exp_labels: {}}]
      - alertname: A
        exp_alerts: []
      - alertname: B
    promql_expr_test:
      - expr: family:slot_heartbeats:rate5m
`),
		"15s.yml": []byte(`evaluation_interval: 14s
tests:
  - interval: 15s
    alert_rule_test:
      - alertname: A
        exp_alerts: [{exp_labels: {}}]
      - alertname: A
        exp_alerts: []
`),
	}
	want := []string{
		"alert B has no firing test case (alert_rule_test with exp_alerts) at a 15s interval",
		"alert B has no not-firing test case (alert_rule_test with empty exp_alerts) at a 15s interval",
		"recording rule family:slot_heartbeats:rate5m has no promql_expr_test at a 15s interval",
		"alert B has no firing test case (alert_rule_test with exp_alerts) at a 1m interval",
	}
	var got []string
	for _, e := range c.CheckRuleTests(rf, tests) {
		got = append(got, e.Error())
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("CheckRuleTests:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// Samples on the evaluation grid: an interval equal to, a multiple of or
	// a divisor of the evaluation interval; promtool's defaults (1m and 1m)
	// are on it too.
	for name, file := range map[string]string{
		"equal":    "evaluation_interval: 1m\ntests:\n  - interval: 1m\n",
		"multiple": "evaluation_interval: 30s\ntests:\n  - interval: 1m\n",
		"divisor":  "evaluation_interval: 1m\ntests:\n  - interval: 15s\n",
		"defaults": "tests:\n  - input_series: []\n",
	} {
		var all []string
		for _, e := range c.CheckRuleTests(rf, map[string][]byte{name: []byte(file)}) {
			all = append(all, e.Error())
		}
		if !strings.Contains(strings.Join(all, "\n"), "on the evaluation grid") {
			t.Errorf("%s: on-grid samples not reported:\n%s", name, strings.Join(all, "\n"))
		}
	}
	off := "evaluation_interval: 59s\ntests:\n  - interval: 1m\n  - interval: 15s\n"
	for _, e := range c.CheckRuleTests(rf, map[string][]byte{"off.yml": []byte(off)}) {
		if strings.Contains(e.Error(), "grid") {
			t.Errorf("off-grid samples reported as on the grid: %v", e)
		}
	}

	if errs := c.CheckRuleTests(rf, nil); len(errs) != 10 {
		t.Fatalf("no tests at all: got %d errors (%v), want 10", len(errs), errs)
	}
}

func TestCatalog(t *testing.T) {
	seen := map[string]bool{}
	for _, m := range Catalog {
		if seen[m.Name] {
			t.Errorf("%s is listed twice", m.Name)
		}
		seen[m.Name] = true
		switch m.Type {
		case Gauge, Counter, Histogram:
		default:
			t.Errorf("%s: type %q", m.Name, m.Type)
		}
		if (m.Type == Counter) != strings.HasSuffix(m.Name, "_total") {
			t.Errorf("%s: a counter's name ends with _total, and only a counter's", m.Name)
		}
		if i := slices.Index(m.Labels, "user"); i >= 0 && (i != 1 || m.Labels[0] != "family") {
			t.Errorf("%s: labels %v: per-user metrics carry family, then user", m.Name, m.Labels)
		}
	}
	// The catalog rows of DESIGN.md that alerts and dashboards rely on.
	for name, labels := range map[string][]string{
		"slot_family_info":                   {"family", "kind"},
		"slot_family_limit":                  {"family"},
		"slot_family_floor_window_seconds":   {"family"},
		"slot_ratelimit_callers_locked_out":  {"family"},
		"slot_queue_head_wait_seconds":       {"family", "user"},
		"slot_stream_oldest_pending_seconds": {"family", "user", "group"},
		"slot_exporter_sweep_overruns_total": {"family"},
		"slot_exporter_releases_total":       {"result"},
		"slot_exporter_up":                   nil,
	} {
		m, ok := CatalogMetric(name)
		if !ok || !slices.Equal(m.Labels, labels) {
			t.Errorf("CatalogMetric(%s) = %v, %v; want labels %v", name, m, ok, labels)
		}
	}
	if _, ok := CatalogMetric("up"); ok {
		t.Errorf("up is Prometheus', not the exporter's: it must not be in Catalog")
	}
	_, c := mustChecker(t, "")
	for _, n := range []string{"slot_hold_duration_seconds_bucket", "slot_hold_duration_seconds_count", "up"} {
		if !c.Known(n) {
			t.Errorf("the checker does not accept %s", n)
		}
	}
}

func TestSubstituteGrafanaVars(t *testing.T) {
	defined := map[string]bool{"family": true, "instance": true, "datasource": true}
	got, undefined := SubstituteGrafanaVars(
		`sum(rate(x{family=~"$family", instance=~"${instance:regex}", u="[[user]]"}[$__rate_interval])) * $__range_s + y[${__range}] + z[$__interval]`, defined)
	want := `sum(rate(x{family=~"placeholder", instance=~"placeholder", u="placeholder"}[5m])) * 3600 + y[1h] + z[1m]`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if len(undefined) != 1 || undefined[0] != "user" {
		t.Errorf("undefined = %v, want [user]", undefined)
	}
}
