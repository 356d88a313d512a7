// Package lint statically checks the PromQL that ships with slot_exporter: the
// rules in alerts/slot_exporter.rules.yml, their promtool unit tests, the
// runbook they link to, and the Grafana dashboards in dashboards/.
//
// Every expression must parse with the Prometheus PromQL parser and may only
// name metrics of the catalog in DESIGN.md (Catalog) or recording rules of the
// rule file. Grafana variables ($family, ${datasource}, $__rate_interval, ...)
// are replaced by valid placeholders before parsing.
//
// The checks return every problem found, not just the first, so that a test
// can print them all; the tests also feed them broken input to prove that they
// can fail.
package lint

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// trackedLabels are the labels whose presence the checker follows through an
// expression, so that it can tell whether an alert's annotations may (and
// must) name them.
var trackedLabels = []string{"family", "user"}

// Checker knows which metric names an expression may use, and which of the
// tracked labels (family, user) each of them carries.
type Checker struct {
	metrics map[string]map[string]bool
	p       parser.Parser
}

// NewChecker returns a checker that accepts the catalog metrics and the
// recording rules of rf (which may be nil).
func NewChecker(rf *RuleFile) (*Checker, error) {
	c := &Checker{metrics: map[string]map[string]bool{}, p: parser.NewParser(parser.Options{})}
	for _, m := range append(slices.Clone(Catalog), prometheusMetrics...) {
		for _, n := range m.seriesNames() {
			c.metrics[n] = m.tracked()
		}
	}
	if rf == nil {
		return c, nil
	}
	// Recording rules may use each other in any order: resolve until stable.
	pending := map[string]string{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				pending[r.Record] = r.Expr
			}
		}
	}
	for len(pending) > 0 {
		progress := false
		for name, expr := range pending {
			e, err := c.p.ParseExpr(expr)
			if err != nil {
				return nil, fmt.Errorf("recording rule %s: %w", name, err)
			}
			ready := true
			for _, m := range metricNames(e) {
				if _, ok := c.metrics[m]; !ok {
					if _, later := pending[m]; later {
						ready = false
					}
				}
			}
			if !ready {
				continue
			}
			l := map[string]bool{}
			for _, lb := range trackedLabels {
				if c.keeps(e, lb) {
					l[lb] = true
				}
			}
			c.metrics[name] = l
			delete(pending, name)
			progress = true
		}
		if !progress {
			names := make([]string, 0, len(pending))
			for n := range pending {
				names = append(names, n)
			}
			sort.Strings(names)
			return nil, fmt.Errorf("recording rules depend on each other in a cycle: %s", strings.Join(names, ", "))
		}
	}
	return c, nil
}

// Known reports whether name is a metric an expression may use.
func (c *Checker) Known(name string) bool {
	_, ok := c.metrics[name]
	return ok
}

// ParseExpr parses expr and checks that every metric it names is known.
func (c *Checker) ParseExpr(expr string) (parser.Expr, error) {
	e, err := c.p.ParseExpr(expr)
	if err != nil {
		return nil, fmt.Errorf("does not parse: %w", err)
	}
	var errs []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := selectorName(vs)
		switch {
		case name == "":
			errs = append(errs, fmt.Sprintf("selector %s does not name one metric (use an exact metric name)", vs))
		case !c.Known(name):
			errs = append(errs, fmt.Sprintf("metric %q is neither in the catalog nor a recording rule", name))
		}
		return nil
	})
	if len(errs) > 0 {
		return e, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return e, nil
}

// CheckExpr is ParseExpr without the AST.
func (c *Checker) CheckExpr(expr string) error {
	_, err := c.ParseExpr(expr)
	return err
}

// selectorName is the metric name a selector selects by equality, or "".
func selectorName(vs *parser.VectorSelector) string {
	if vs.Name != "" {
		return vs.Name
	}
	for _, m := range vs.LabelMatchers {
		if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
			return m.Value
		}
	}
	return ""
}

func metricNames(e parser.Expr) []string {
	var out []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			if name := selectorName(vs); name != "" {
				out = append(out, name)
			}
		}
		return nil
	})
	return out
}

// keeps reports whether the series that e returns still carry label lb. It
// follows the usual PromQL rules closely enough for alert annotations:
// aggregations keep only their grouping, absent() and vector() keep nothing,
// one-to-one binary operations keep the left side's labels minus ignoring(...)
// or only on(...).
func (c *Checker) keeps(e parser.Expr, lb string) bool {
	switch n := e.(type) {
	case *parser.VectorSelector:
		return c.metrics[selectorName(n)][lb]
	case *parser.MatrixSelector:
		return c.keeps(n.VectorSelector, lb)
	case *parser.SubqueryExpr:
		return c.keeps(n.Expr, lb)
	case *parser.ParenExpr:
		return c.keeps(n.Expr, lb)
	case *parser.UnaryExpr:
		return c.keeps(n.Expr, lb)
	case *parser.StepInvariantExpr:
		return c.keeps(n.Expr, lb)
	case *parser.AggregateExpr:
		switch n.Op {
		case parser.TOPK, parser.BOTTOMK, parser.LIMITK, parser.LIMIT_RATIO:
			return c.keeps(n.Expr, lb)
		case parser.COUNT_VALUES:
			if s, ok := n.Param.(*parser.StringLiteral); ok && s.Val == lb {
				return true
			}
		}
		if n.Without {
			return !slices.Contains(n.Grouping, lb) && c.keeps(n.Expr, lb)
		}
		return slices.Contains(n.Grouping, lb) && c.keeps(n.Expr, lb)
	case *parser.Call:
		switch n.Func.Name {
		case "absent", "absent_over_time", "vector", "scalar", "time", "timestamp_seconds":
			return false
		case "label_replace", "label_join":
			if len(n.Args) > 1 {
				if s, ok := n.Args[1].(*parser.StringLiteral); ok && s.Val == lb {
					return true
				}
			}
		}
		for _, a := range n.Args {
			if a.Type() == parser.ValueTypeVector || a.Type() == parser.ValueTypeMatrix {
				return c.keeps(a, lb)
			}
		}
		return false
	case *parser.BinaryExpr:
		lt, rt := n.LHS.Type() == parser.ValueTypeVector, n.RHS.Type() == parser.ValueTypeVector
		switch {
		case lt && !rt:
			return c.keeps(n.LHS, lb)
		case !lt && rt:
			return c.keeps(n.RHS, lb)
		case !lt && !rt:
			return false
		}
		if n.Op == parser.LOR {
			return c.keeps(n.LHS, lb) || c.keeps(n.RHS, lb)
		}
		side := n.LHS
		if vm := n.VectorMatching; vm != nil {
			if vm.Card == parser.CardOneToMany {
				side = n.RHS
			}
			if vm.Card == parser.CardManyToOne || vm.Card == parser.CardOneToMany {
				if slices.Contains(vm.Include, lb) {
					return true
				}
				return c.keeps(side, lb)
			}
			if n.Op != parser.LAND && n.Op != parser.LUNLESS {
				if vm.On {
					return slices.Contains(vm.MatchingLabels, lb) && c.keeps(side, lb)
				}
				if slices.Contains(vm.MatchingLabels, lb) {
					return false
				}
			}
		}
		return c.keeps(side, lb)
	}
	return false
}
