package lint

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
)

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
	errs = append(errs, checkRunbookSeverities(rf, runbook)...)
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
