package lint

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"
)

// RunbookBase is where every alert's runbook_url points, followed by
// "#" and the GitHub anchor of the runbook section named after the alert.
const RunbookBase = "https://github.com/slotexporter/slot_exporter/blob/main/docs/runbook.md"

// Severities are the allowed values of an alert's severity label.
var Severities = []string{"page", "warning", "info"}

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
			for key, d := range map[string]string{"for": r.For, "keep_firing_for": r.KeepFiringFor} {
				if d == "" {
					continue
				}
				if _, err := model.ParseDuration(d); err != nil {
					fail("%s: %s: %v", where, key, err)
				}
			}
			if r.Record != "" {
				if !recordNameRE.MatchString(r.Record) {
					fail("%s: recording rule name does not follow level:metric:operations", where)
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
	Tests []struct {
		AlertRuleTest []struct {
			Alertname string `yaml:"alertname"`
			ExpAlerts []any  `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
		PromQLExprTest []struct {
			Expr string `yaml:"expr"`
		} `yaml:"promql_expr_test"`
	} `yaml:"tests"`
}

// CheckRuleTests checks that the promtool unit test files (name to content)
// test every alert of rf at least once firing and once not firing, and
// every recording rule with a promql_expr_test.
func (c *Checker) CheckRuleTests(rf *RuleFile, files map[string][]byte) []error {
	var errs []error
	firing, quiet, exprTested := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for name, b := range files {
		var tf RuleTestFile
		if err := yaml.Unmarshal(b, &tf); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			continue
		}
		for _, t := range tf.Tests {
			for _, a := range t.AlertRuleTest {
				if len(a.ExpAlerts) > 0 {
					firing[a.Alertname] = true
				} else {
					quiet[a.Alertname] = true
				}
			}
			for _, p := range t.PromQLExprTest {
				e, err := c.p.ParseExpr(p.Expr)
				if err != nil {
					errs = append(errs, fmt.Errorf("%s: promql_expr_test %q does not parse: %w", name, p.Expr, err))
					continue
				}
				for _, m := range metricNames(e) {
					exprTested[m] = true
				}
			}
		}
	}
	for _, a := range rf.Alerts() {
		if !firing[a.Alert] {
			errs = append(errs, fmt.Errorf("alert %s has no firing test case (alert_rule_test with exp_alerts)", a.Alert))
		}
		if !quiet[a.Alert] {
			errs = append(errs, fmt.Errorf("alert %s has no not-firing test case (alert_rule_test with empty exp_alerts)", a.Alert))
		}
	}
	for _, r := range rf.Records() {
		if !exprTested[r.Record] {
			errs = append(errs, fmt.Errorf("recording rule %s has no promql_expr_test", r.Record))
		}
	}
	return errs
}
