package lint

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"
)

// RunbookBase is where every alert's runbook_url points, followed by
// "#" and the GitHub anchor of the runbook section named after the alert.
const RunbookBase = "https://github.com/slotexporter/slot_exporter/blob/main/docs/runbook.md"

// Severities are the allowed values of an alert's severity label: critical
// pages, warning goes to a ticket queue, info is for dashboards (the words
// monitoring mixins and the usual Alertmanager routes use).
var Severities = []string{"critical", "warning", "info"}

// SlowestScrape is the longest scrape interval the rules must work at
// (Prometheus' default).
const SlowestScrape = time.Minute

// MinRange is the shortest range a rule may use (rate, increase, deriv,
// *_over_time, subqueries): four samples at the slowest scrape interval,
// wherever they fall. A range of one scrape interval holds a single sample
// whenever the samples are off the evaluation grid, and rate() over it
// returns nothing.
const MinRange = 4 * SlowestScrape

// MinFor is the shortest `for:` an alert may have, when it has one: the
// condition must hold across two scrapes at the slowest scrape interval.
const MinFor = 2 * SlowestScrape

// RequiredIntervals are the input intervals (scrape intervals) at which the
// promtool tests must show every alert firing and staying silent, and every
// recording rule's value.
var RequiredIntervals = []time.Duration{15 * time.Second, time.Minute}

// RuleFile is a Prometheus rule file. Decoding is strict: a misspelt key
// (annotation:, label:) is an error, as it is for Prometheus.
type RuleFile struct {
	Groups []RuleGroup `yaml:"groups"`
}

// RuleGroup is one group of a rule file.
type RuleGroup struct {
	Name     string `yaml:"name"`
	Interval string `yaml:"interval,omitempty"`
	Limit    int    `yaml:"limit,omitempty"`
	Rules    []Rule `yaml:"rules"`
}

// Rule is an alerting or a recording rule.
type Rule struct {
	Record        string            `yaml:"record,omitempty"`
	Alert         string            `yaml:"alert,omitempty"`
	Expr          string            `yaml:"expr"`
	For           string            `yaml:"for,omitempty"`
	KeepFiringFor string            `yaml:"keep_firing_for,omitempty"`
	Labels        map[string]string `yaml:"labels,omitempty"`
	Annotations   map[string]string `yaml:"annotations,omitempty"`
}

// Name is the alert or record name.
func (r Rule) Name() string {
	if r.Alert != "" {
		return r.Alert
	}
	return r.Record
}

// ParseRuleFile decodes a rule file strictly.
func ParseRuleFile(b []byte) (*RuleFile, error) {
	var rf RuleFile
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&rf); err != nil {
		return nil, fmt.Errorf("rule file: %w", err)
	}
	return &rf, nil
}

// Alerts returns the alerting rules in file order.
func (rf *RuleFile) Alerts() []Rule {
	var out []Rule
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				out = append(out, r)
			}
		}
	}
	return out
}

// Records returns the recording rules in file order.
func (rf *RuleFile) Records() []Rule {
	var out []Rule
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				out = append(out, r)
			}
		}
	}
	return out
}

// recordNameRE is the level:metric:operations naming convention.
var recordNameRE = regexp.MustCompile(`^[a-z][a-z0-9_]*:[a-z][a-z0-9_]*:[a-z][a-z0-9_]*$`)

// labelRefRE finds {{ $labels.x }} and $labels.x references in a template.
var labelRefRE = regexp.MustCompile(`\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)`)

// CheckRuleFile checks every rule of rf; runbook is the Markdown of
// docs/runbook.md. It returns every problem found.
func (c *Checker) CheckRuleFile(rf *RuleFile, runbook []byte) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	anchors := RunbookAnchors(runbook)
	groups := map[string]bool{}
	names := map[string]bool{}
	if len(rf.Groups) == 0 {
		fail("rule file has no groups")
	}
	for _, g := range rf.Groups {
		if g.Name == "" || groups[g.Name] {
			fail("group name %q is empty or not unique", g.Name)
		}
		groups[g.Name] = true
		if g.Interval != "" {
			if _, err := model.ParseDuration(g.Interval); err != nil {
				fail("group %s: interval: %v", g.Name, err)
			}
		}
		for i, r := range g.Rules {
			where := fmt.Sprintf("group %s: rule %d (%s)", g.Name, i, r.Name())
			if (r.Alert == "") == (r.Record == "") {
				fail("%s: needs exactly one of alert and record", where)
				continue
			}
			if names[r.Name()] {
				fail("%s: name is not unique", where)
			}
			names[r.Name()] = true
			e, err := c.ParseExpr(r.Expr)
			if err != nil {
				fail("%s: expr %q: %v", where, r.Expr, err)
			}
			var ranges []time.Duration
			if e != nil {
				ranges = exprRanges(e)
				for _, d := range ranges {
					if d < MinRange {
						fail("%s: range [%s] is shorter than %s (4 x the slowest scrape interval, %s): at a %s scrape it holds too few samples",
							where, model.Duration(d), model.Duration(MinRange), model.Duration(SlowestScrape), model.Duration(SlowestScrape))
					}
				}
			}
			for key, d := range map[string]string{"for": r.For, "keep_firing_for": r.KeepFiringFor} {
				if d == "" {
					continue
				}
				v, err := model.ParseDuration(d)
				if err != nil {
					fail("%s: %s: %v", where, key, err)
					continue
				}
				if key == "for" && v != 0 && time.Duration(v) < MinFor {
					fail("%s: for: %s is shorter than %s (two scrapes at %s)", where, d, model.Duration(MinFor), model.Duration(SlowestScrape))
				}
			}
			if r.Record != "" {
				if !recordNameRE.MatchString(r.Record) {
					fail("%s: recording rule name does not follow level:metric:operations", where)
				} else if err := checkRecordWindow(r.Record, ranges); err != nil {
					fail("%s: %v", where, err)
				}
				if r.For != "" || len(r.Annotations) > 0 {
					fail("%s: a recording rule takes no for or annotations", where)
				}
				continue
			}

			sev := r.Labels["severity"]
			if !slices.Contains(Severities, sev) {
				fail("%s: severity label %q is not one of %s", where, sev, strings.Join(Severities, ", "))
			}
			for _, a := range []string{"summary", "description", "runbook_url"} {
				if strings.TrimSpace(r.Annotations[a]) == "" {
					fail("%s: annotation %s is missing", where, a)
				}
			}
			want := RunbookBase + "#" + GitHubAnchor(r.Alert)
			if got := r.Annotations["runbook_url"]; got != want {
				fail("%s: runbook_url %q, want %q", where, got, want)
			}
			if anchors[GitHubAnchor(r.Alert)] != r.Alert {
				fail("%s: docs/runbook.md has no section headed exactly %q", where, r.Alert)
			}
			if e == nil {
				continue
			}
			text := r.Annotations["summary"] + "\n" + r.Annotations["description"]
			used := map[string]bool{}
			for _, m := range labelRefRE.FindAllStringSubmatch(text, -1) {
				used[m[1]] = true
			}
			for _, lb := range trackedLabels {
				has := c.keeps(e, lb)
				switch {
				case has && !used[lb]:
					fail("%s: the alert carries %s but summary and description do not name it ({{ $labels.%s }})", where, lb, lb)
				case !has && used[lb]:
					fail("%s: summary or description use $labels.%s but the alert does not carry %s", where, lb, lb)
				}
			}
		}
	}
	return errs
}

// exprRanges returns the range of every range selector and subquery of e.
func exprRanges(e parser.Expr) []time.Duration {
	var out []time.Duration
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		switch x := n.(type) {
		case *parser.MatrixSelector:
			out = append(out, x.Range)
		case *parser.SubqueryExpr:
			out = append(out, x.Range)
		}
		return nil
	})
	return out
}

// windowRE finds the window a recording rule's operations end with
// (rate5m, ratio_rate5m, max_over_time1h).
var windowRE = regexp.MustCompile(`[a-z_]([0-9]+[smhdwy])$`)

// checkRecordWindow checks that a recording rule that computes over a range
// says which in its name, and says the truth: rate(x[5m]) is recorded as
// ...:rate5m, never as ...:rate1m.
func checkRecordWindow(name string, ranges []time.Duration) error {
	ops := name[strings.LastIndex(name, ":")+1:]
	m := windowRE.FindStringSubmatch(ops)
	if len(ranges) == 0 {
		return nil
	}
	if m == nil {
		return fmt.Errorf("recording rule computes over [%s] but its name does not end with the window (e.g. %s%s)",
			model.Duration(ranges[0]), ops, model.Duration(ranges[0]))
	}
	w, err := model.ParseDuration(m[1])
	if err != nil {
		return fmt.Errorf("recording rule name ends with %q, which is not a duration: %w", m[1], err)
	}
	for _, d := range ranges {
		if d != time.Duration(w) {
			return fmt.Errorf("recording rule name says %s but the expr computes over [%s]", m[1], model.Duration(d))
		}
	}
	return nil
}

// GitHubAnchor returns the anchor GitHub generates for a Markdown heading:
// lower case, spaces to hyphens, punctuation other than - and _ dropped.
func GitHubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// RunbookAnchors maps the anchor of every Markdown heading of md (outside
// fenced code blocks) to the heading text. Repeated anchors get GitHub's -1,
// -2 suffixes.
func RunbookAnchors(md []byte) map[string]string {
	out := map[string]string{}
	seen := map[string]int{}
	fenced := false
	sc := bufio.NewScanner(bytes.NewReader(md))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.TrimLeft(line, "#")
		if !strings.HasPrefix(h, " ") {
			continue
		}
		h = strings.TrimSpace(h)
		a := GitHubAnchor(h)
		if n := seen[a]; n > 0 {
			seen[a]++
			a = fmt.Sprintf("%s-%d", a, n)
		} else {
			seen[a] = 1
		}
		out[a] = h
	}
	return out
}

// RuleTestFile is the part of a promtool unit test file that CheckRuleTests
// reads.
type RuleTestFile struct {
	EvaluationInterval string `yaml:"evaluation_interval"`
	Tests              []struct {
		Interval      string `yaml:"interval"`
		AlertRuleTest []struct {
			Alertname string `yaml:"alertname"`
			ExpAlerts []any  `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
		PromQLExprTest []struct {
			Expr string `yaml:"expr"`
		} `yaml:"promql_expr_test"`
	} `yaml:"tests"`
}

// promtoolDefaultInterval is promtool's evaluation_interval when a test file
// sets none, and a test group's interval when it sets none.
const promtoolDefaultInterval = time.Minute

// CheckRuleTests checks the promtool unit test files (name to content):
//
//   - every alert of rf has a firing case (exp_alerts) and a silent case
//     (empty exp_alerts) at each of RequiredIntervals, and every recording
//     rule a promql_expr_test at each of them;
//   - no test group samples on the evaluation grid: its interval and the
//     file's evaluation_interval must not divide one another. On the grid,
//     every evaluation finds a sample exactly at its own time and one exactly
//     a range back, which a real Prometheus, whose scrapes and evaluations
//     are not aligned, never does; rate over one scrape interval then looks
//     fine in the tests and returns nothing in production.
func (c *Checker) CheckRuleTests(rf *RuleFile, files map[string][]byte) []error {
	var errs []error
	type key struct {
		name     string
		interval time.Duration
	}
	firing, quiet, exprTested := map[key]bool{}, map[key]bool{}, map[key]bool{}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		var tf RuleTestFile
		if err := yaml.Unmarshal(files[name], &tf); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			continue
		}
		eval := promtoolDefaultInterval
		if tf.EvaluationInterval != "" {
			d, err := model.ParseDuration(tf.EvaluationInterval)
			if err != nil || d <= 0 {
				errs = append(errs, fmt.Errorf("%s: evaluation_interval %q is not a positive duration", name, tf.EvaluationInterval))
				continue
			}
			eval = time.Duration(d)
		}
		for i, t := range tf.Tests {
			iv := eval
			if t.Interval != "" {
				d, err := model.ParseDuration(t.Interval)
				if err != nil || d <= 0 {
					errs = append(errs, fmt.Errorf("%s: test %d: interval %q is not a positive duration", name, i, t.Interval))
					continue
				}
				iv = time.Duration(d)
			}
			if iv%eval == 0 || eval%iv == 0 {
				errs = append(errs, fmt.Errorf("%s: test %d samples every %s with evaluation_interval %s: the samples sit on the evaluation grid (make the two not divide one another, e.g. interval 1m with evaluation_interval 59s)",
					name, i, model.Duration(iv), model.Duration(eval)))
			}
			for _, a := range t.AlertRuleTest {
				if len(a.ExpAlerts) > 0 {
					firing[key{a.Alertname, iv}] = true
				} else {
					quiet[key{a.Alertname, iv}] = true
				}
			}
			for _, p := range t.PromQLExprTest {
				e, err := c.p.ParseExpr(p.Expr)
				if err != nil {
					errs = append(errs, fmt.Errorf("%s: promql_expr_test %q does not parse: %w", name, p.Expr, err))
					continue
				}
				for _, m := range metricNames(e) {
					exprTested[key{m, iv}] = true
				}
			}
		}
	}
	for _, iv := range RequiredIntervals {
		at := model.Duration(iv)
		for _, a := range rf.Alerts() {
			if !firing[key{a.Alert, iv}] {
				errs = append(errs, fmt.Errorf("alert %s has no firing test case (alert_rule_test with exp_alerts) at a %s interval", a.Alert, at))
			}
			if !quiet[key{a.Alert, iv}] {
				errs = append(errs, fmt.Errorf("alert %s has no not-firing test case (alert_rule_test with empty exp_alerts) at a %s interval", a.Alert, at))
			}
		}
		for _, r := range rf.Records() {
			if !exprTested[key{r.Record, iv}] {
				errs = append(errs, fmt.Errorf("recording rule %s has no promql_expr_test at a %s interval", r.Record, at))
			}
		}
	}
	return errs
}
