package lint

import (
	"fmt"
	"slices"
	"time"

	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"
)

// RequiredIntervals are the input intervals (scrape intervals) at which the
// promtool tests must show every alert firing and staying silent, and every
// recording rule's value.
var RequiredIntervals = []time.Duration{15 * time.Second, time.Minute}

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
