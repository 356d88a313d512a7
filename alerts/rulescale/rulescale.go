// Package rulescale shortens the time constants of a Prometheus rule file, so
// that an end-to-end test can run the shipped alerts/slot_exporter.rules.yml
// against a real Prometheus in seconds instead of hours. The shipped file is
// never edited: the test reads it, calls Scale and writes the result to a
// temporary rule file.
//
// Scale multiplies by factor:
//
//   - every rule's `for:` and `keep_firing_for:`, and every group's `interval:`;
//   - inside every `expr:` (parsed with the PromQL parser and re-rendered with
//     Expr.String()): the range of every range selector (`x[5m]`), the range and
//     step of every subquery (`[1h:1m]`; an omitted step stays omitted), and
//     every offset (`offset 10m`, sign kept). `@` timestamps are left alone;
//   - number literals that stand for a duration in seconds, where marked.
//
// PromQL cannot tell `slot_user_floor_seconds > 1800` (a duration: the floor
// window) from `> 100` (a count), so duration literals are marked in the rule
// file with a YAML comment on the rule (any comment attached to one of its keys
// or values, normally the line right above `expr:`):
//
//   - alert: SlotUserFloorNeverZero
//     # rulescale: 1800
//     expr: slot_user_floor_seconds > 1800
//
// The comment lists one or more values (separated by commas or spaces); every
// number literal in that rule's expr equal to a listed value is scaled. A
// listed value that does not occur in the expr is an error, so a marker cannot
// silently go stale when the threshold is edited. The marker is rewritten with
// the scaled values, so the output can be scaled again. Number literals written
// as durations (`> 30m`, which newer PromQL accepts) are scaled without a
// marker. Unmarked numbers are never touched: thresholds that depend on
// sampling.interval rather than on alert timing (the 60s of
// SlotExporterSweepsStale) or that are counts and rates keep their value.
//
// Every non-zero duration d becomes max(round(d*factor, 1ms), min); zero stays
// zero (`for: 0s`, an absent step). A marked literal v becomes
// max(round(v*factor, 0.001), min in seconds). So with factor 1/60 and min 2s:
// `for: 5m` becomes `for: 5s`, `rate(x[5m])` becomes `rate(x[5s])`,
// `rate(x[1m])` becomes `rate(x[2s])`, and the floor threshold 1800 becomes
// 30. Choose min at least twice the scrape interval of the test Prometheus, so
// that every range still holds two samples for rate(). The exporter's own time
// constants (leaks.floor_window, sampling.window) are the test's business: scale
// them with the same factor, so that `slot_user_floor_seconds > 30` still means
// "longer than the floor window".
//
// Everything else in the file (names, labels, annotations, comments, key order)
// is kept; the YAML is re-encoded with two-space indentation.
package rulescale

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"
)

// markerRE finds the rulescale marker in a YAML comment.
var markerRE = regexp.MustCompile(`rulescale:\s*([^\n#]*)`)

// Scale returns rulesYAML with every `for:`, `keep_firing_for:`, group
// `interval:`, range, subquery range and step, offset, and marked number literal
// multiplied by factor, and no non-zero duration shorter than min. See the
// package documentation for the details.
func Scale(rulesYAML []byte, factor float64, min time.Duration) ([]byte, error) {
	if math.IsNaN(factor) || math.IsInf(factor, 0) || factor <= 0 {
		return nil, fmt.Errorf("rulescale: factor must be a positive number, got %v", factor)
	}
	if min < 0 {
		return nil, fmt.Errorf("rulescale: min must not be negative, got %v", min)
	}
	s := scaler{factor: factor, min: min}

	var doc yaml.Node
	if err := yaml.Unmarshal(rulesYAML, &doc); err != nil {
		return nil, fmt.Errorf("rulescale: parse rule file: %w", err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, errors.New("rulescale: rule file is not a YAML mapping")
	}
	groups := mapValue(doc.Content[0], "groups")
	if groups == nil || groups.Kind != yaml.SequenceNode {
		return nil, errors.New("rulescale: rule file has no `groups:` list")
	}
	for gi, g := range groups.Content {
		if g.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("rulescale: groups[%d] is not a mapping", gi)
		}
		gname := scalar(mapValue(g, "name"))
		if iv := mapValue(g, "interval"); iv != nil {
			if err := s.scaleDurationNode(iv); err != nil {
				return nil, fmt.Errorf("rulescale: group %q: interval: %w", gname, err)
			}
		}
		rules := mapValue(g, "rules")
		if rules == nil {
			continue
		}
		if rules.Kind != yaml.SequenceNode {
			return nil, fmt.Errorf("rulescale: group %q: rules is not a list", gname)
		}
		for ri, r := range rules.Content {
			if err := s.scaleRule(r); err != nil {
				name := scalar(mapValue(r, "alert"))
				if name == "" {
					name = scalar(mapValue(r, "record"))
				}
				return nil, fmt.Errorf("rulescale: group %q: rules[%d] (%s): %w", gname, ri, name, err)
			}
		}
	}

	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, fmt.Errorf("rulescale: encode: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("rulescale: encode: %w", err)
	}
	return buf.Bytes(), nil
}

type scaler struct {
	factor float64
	min    time.Duration
}

// duration scales one duration: zero stays zero, the rest is rounded to the
// millisecond and raised to min.
func (s scaler) duration(d time.Duration) time.Duration {
	if d == 0 {
		return 0
	}
	neg := d < 0
	if neg {
		d = -d
	}
	out := time.Duration(math.Round(float64(d)*s.factor/float64(time.Millisecond))) * time.Millisecond
	if out < time.Millisecond {
		out = time.Millisecond
	}
	if out < s.min {
		out = s.min
	}
	if neg {
		out = -out
	}
	return out
}

// seconds scales a duration given in seconds the same way.
func (s scaler) seconds(v float64) float64 {
	if v == 0 {
		return 0
	}
	out := math.Round(math.Abs(v)*s.factor*1000) / 1000
	if out < 0.001 {
		out = 0.001
	}
	if m := s.min.Seconds(); out < m {
		out = m
	}
	return math.Copysign(out, v)
}

func (s scaler) scaleDurationNode(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return errors.New("not a scalar")
	}
	d, err := model.ParseDuration(n.Value)
	if err != nil {
		return err
	}
	n.Value = model.Duration(s.duration(time.Duration(d))).String()
	n.Tag = "!!str"
	n.Style = 0
	return nil
}

func (s scaler) scaleRule(r *yaml.Node) error {
	if r.Kind != yaml.MappingNode {
		return errors.New("not a mapping")
	}
	for _, key := range []string{"for", "keep_firing_for"} {
		if n := mapValue(r, key); n != nil {
			if err := s.scaleDurationNode(n); err != nil {
				return fmt.Errorf("%s: %w", key, err)
			}
		}
	}
	exprNode := mapValue(r, "expr")
	if exprNode == nil || exprNode.Kind != yaml.ScalarNode {
		return errors.New("no expr")
	}

	marked, markerNodes, err := markers(r)
	if err != nil {
		return err
	}
	p := parser.NewParser(parser.Options{})
	expr, err := p.ParseExpr(exprNode.Value)
	if err != nil {
		return fmt.Errorf("expr: %w", err)
	}
	found := map[float64]bool{}
	var walkErr error
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		switch n := node.(type) {
		case *parser.MatrixSelector:
			if n.RangeExpr != nil {
				walkErr = fmt.Errorf("expr: duration expression %q in a range is not supported", n.RangeExpr)
				return walkErr
			}
			n.Range = s.duration(n.Range)
		case *parser.SubqueryExpr:
			if n.RangeExpr != nil || n.StepExpr != nil || n.OriginalOffsetExpr != nil {
				walkErr = errors.New("expr: duration expressions in a subquery are not supported")
				return walkErr
			}
			n.Range = s.duration(n.Range)
			n.Step = s.duration(n.Step)
			n.OriginalOffset = s.duration(n.OriginalOffset)
		case *parser.VectorSelector:
			if n.OriginalOffsetExpr != nil {
				walkErr = fmt.Errorf("expr: duration expression %q in an offset is not supported", n.OriginalOffsetExpr)
				return walkErr
			}
			n.OriginalOffset = s.duration(n.OriginalOffset)
		case *parser.NumberLiteral:
			switch {
			case n.Duration:
				n.Val = s.seconds(n.Val)
			case marked[n.Val]:
				found[n.Val] = true
				n.Val = s.seconds(n.Val)
			}
		}
		return nil
	})
	if walkErr != nil {
		return walkErr
	}
	for v := range marked {
		if !found[v] {
			return fmt.Errorf("the rulescale marker lists %s but the expr has no such number literal", formatNumber(v))
		}
	}
	exprNode.Value = expr.String()
	exprNode.Tag = "!!str"
	exprNode.Style = 0

	// Rewrite the markers with the scaled values, so the output can be scaled again.
	for _, c := range markerNodes {
		*c = markerRE.ReplaceAllStringFunc(*c, func(m string) string {
			vals, _ := parseMarker(markerRE.FindStringSubmatch(m)[1])
			out := make([]string, len(vals))
			for i, v := range vals {
				out[i] = formatNumber(s.seconds(v))
			}
			return "rulescale: " + strings.Join(out, ", ")
		})
	}
	return nil
}

// markers collects the rulescale markers from every comment attached to the
// rule's keys and values, and returns the listed values and the comments that
// hold them.
func markers(r *yaml.Node) (map[float64]bool, []*string, error) {
	vals := map[float64]bool{}
	var nodes []*string
	var visit func(n *yaml.Node) error
	visit = func(n *yaml.Node) error {
		for _, c := range []*string{&n.HeadComment, &n.LineComment, &n.FootComment} {
			for _, m := range markerRE.FindAllStringSubmatch(*c, -1) {
				vs, err := parseMarker(m[1])
				if err != nil {
					return err
				}
				if len(vs) == 0 {
					return fmt.Errorf("empty rulescale marker in comment %q", *c)
				}
				for _, v := range vs {
					vals[v] = true
				}
				nodes = append(nodes, c)
			}
		}
		for _, ch := range n.Content {
			if err := visit(ch); err != nil {
				return err
			}
		}
		return nil
	}
	if err := visit(r); err != nil {
		return nil, nil, err
	}
	return vals, nodes, nil
}

func parseMarker(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
		v, err := strconv.ParseFloat(f, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("rulescale marker: %q is not a number", f)
		}
		out = append(out, v)
	}
	return out, nil
}

func formatNumber(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func mapValue(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

func scalar(n *yaml.Node) string {
	if n == nil || n.Kind != yaml.ScalarNode {
		return ""
	}
	return n.Value
}
