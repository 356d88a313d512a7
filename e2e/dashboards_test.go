package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/prometheus/prometheus/promql/parser"
)

// dashTarget is one PromQL query of a panel.
type dashTarget struct {
	panel, refID, expr string
}

// dashVar is a template variable.
type dashVar struct {
	name, typ, query string
	// multi: Grafana may put several values (or All) in it, so the
	// dashboard must use it with =~ and it is given every value as a regex.
	multi bool
}

type dashboard struct {
	file    string
	vars    []dashVar
	targets []dashTarget
}

// loadDashboards reads every dashboard JSON in dir: its template variables
// and the expr of every target of every panel, rows included.
func loadDashboards(dir string) ([]dashboard, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no dashboards in %s", dir)
	}
	var out []dashboard
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var raw struct {
			Panels     []json.RawMessage `json:"panels"`
			Templating struct {
				List []struct {
					Name       string          `json:"name"`
					Type       string          `json:"type"`
					Query      json.RawMessage `json:"query"`
					Multi      bool            `json:"multi"`
					IncludeAll bool            `json:"includeAll"`
				} `json:"list"`
			} `json:"templating"`
		}
		if err := json.Unmarshal(b, &raw); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		d := dashboard{file: filepath.Base(f)}
		for _, v := range raw.Templating.List {
			dv := dashVar{name: v.Name, typ: v.Type, multi: v.Multi || v.IncludeAll}
			// Grafana stores a variable's query as a string or, in newer
			// models, as {"query": "..."}.
			var s string
			if json.Unmarshal(v.Query, &s) != nil {
				var o struct {
					Query string `json:"query"`
				}
				_ = json.Unmarshal(v.Query, &o)
				s = o.Query
			}
			dv.query = s
			d.vars = append(d.vars, dv)
		}
		if err := walkPanels(raw.Panels, &d); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		out = append(out, d)
	}
	return out, nil
}

func walkPanels(panels []json.RawMessage, d *dashboard) error {
	for _, pr := range panels {
		var p struct {
			Title   string            `json:"title"`
			Panels  []json.RawMessage `json:"panels"`
			Targets []struct {
				RefID string `json:"refId"`
				Expr  string `json:"expr"`
			} `json:"targets"`
		}
		if err := json.Unmarshal(pr, &p); err != nil {
			return err
		}
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) != "" {
				d.targets = append(d.targets, dashTarget{panel: p.Title, refID: tg.RefID, expr: tg.Expr})
			}
		}
		if err := walkPanels(p.Panels, d); err != nil {
			return err
		}
	}
	return nil
}

// grafanaBuiltins are Grafana's own variables, at values that fit the test's
// 1s scrape interval: $__rate_interval is at least four scrape intervals.
var grafanaBuiltins = map[string]string{
	"__rate_interval": "10s",
	"__interval":      "1s",
	"__interval_ms":   "1000",
	"__range":         "1m",
	"__range_s":       "60",
	"__range_ms":      "60000",
}

// grafanaVarRE matches $var, ${var}, ${var:format} and [[var]], [[var:format]].
var grafanaVarRE = regexp.MustCompile(`\$\{([A-Za-z0-9_]+)(?::([^}]*))?\}|\$([A-Za-z0-9_]+)|\[\[([A-Za-z0-9_]+)(?::([^\]]*))?\]\]`)

// substitute replaces every variable in s with its formatted value from vals
// or a built-in. An unknown variable or a format the test does not
// implement is an error, so a dashboard change cannot make the test check
// a different query from the one Grafana would run.
func substitute(s string, vals map[string]string) (string, error) {
	var errs []string
	out := grafanaVarRE.ReplaceAllStringFunc(s, func(m string) string {
		sub := grafanaVarRE.FindStringSubmatch(m)
		name, format := sub[1]+sub[3]+sub[4], sub[2]+sub[5]
		if format != "" {
			errs = append(errs, fmt.Sprintf("variable format %q of %s is not supported by the test", format, m))
			return m
		}
		if v, ok := grafanaBuiltins[name]; ok {
			return v
		}
		if v, ok := vals[name]; ok {
			return v
		}
		errs = append(errs, fmt.Sprintf("undefined variable %s", m))
		return m
	})
	if len(errs) > 0 {
		return "", fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return out, nil
}

// formatSingle is how Grafana's Prometheus data source puts the value of a
// single-value variable into a query: as is, escaped for a PromQL string.
func formatSingle(v string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(v)
}

// formatMulti is the same for a multi-value variable set to All without an
// allValue: every value regex-quoted, as an alternation.
func formatMulti(vs []string) string {
	q := make([]string, len(vs))
	for i, v := range vs {
		q[i] = strings.ReplaceAll(regexp.QuoteMeta(v), `\`, `\\`)
	}
	return "(" + strings.Join(q, "|") + ")"
}

var labelValuesRE = regexp.MustCompile(`^\s*label_values\(\s*(?:(.*?)\s*,\s*)?([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*$`)

// choice is one assignment of values to a dashboard's variables.
type choice struct {
	vals map[string]string // formatted, ready to substitute
	raw  map[string]string // single-value variables only, unformatted
	desc string
}

// pickFunc picks the values of a single-value variable to try, out of the
// values its query returned. raw holds the variables chosen so far.
type pickFunc func(name string, raw map[string]string, values []string) ([]string, error)

// choices resolves the dashboard's variables in order, each one's query
// seeing the values of those before it, as Grafana does. A multi-value
// variable gets All; a single-value one is tried with each value pick
// returns.
func (d dashboard) choices(prom promAPI, pick pickFunc) ([]choice, error) {
	var out []choice
	var rec func(i int, c choice) error
	rec = func(i int, c choice) error {
		if i == len(d.vars) {
			out = append(out, c)
			return nil
		}
		v := d.vars[i]
		switch v.typ {
		case "datasource":
			// Only ever used as a data source uid, never inside a query.
			return rec(i+1, c.with(v.name, "prometheus", "", false))
		case "query":
		default:
			return fmt.Errorf("variable %s: type %q is not supported by the test", v.name, v.typ)
		}
		q, err := substitute(v.query, c.vals)
		if err != nil {
			return fmt.Errorf("variable %s: %w", v.name, err)
		}
		m := labelValuesRE.FindStringSubmatch(q)
		if m == nil {
			return fmt.Errorf("variable %s: query %q is not label_values(...)", v.name, q)
		}
		values, err := prom.labelValues(m[1], m[2])
		if err != nil {
			return fmt.Errorf("variable %s: %s: %w", v.name, q, err)
		}
		if len(values) == 0 {
			return fmt.Errorf("variable %s: %s has no values", v.name, q)
		}
		if v.multi {
			return rec(i+1, c.with(v.name, formatMulti(values), "All", true))
		}
		picked, err := pick(v.name, c.raw, values)
		if err != nil {
			return fmt.Errorf("variable %s (%s -> %v): %w", v.name, q, values, err)
		}
		for _, p := range picked {
			if err := rec(i+1, c.with(v.name, formatSingle(p), p, false)); err != nil {
				return err
			}
		}
		return nil
	}
	err := rec(0, choice{vals: map[string]string{}, raw: map[string]string{}})
	return out, err
}

func (c choice) with(name, formatted, raw string, multi bool) choice {
	n := choice{vals: map[string]string{}, raw: map[string]string{}}
	for k, v := range c.vals {
		n.vals[k] = v
	}
	for k, v := range c.raw {
		n.raw[k] = v
	}
	n.vals[name] = formatted
	if !multi {
		n.raw[name] = raw
	}
	if name != "datasource" {
		n.desc = strings.TrimPrefix(c.desc+" "+name+"="+raw, " ")
	} else {
		n.desc = c.desc
	}
	return n
}

// explainEmpty says which selectors of an expression that returned nothing
// match nothing, and whether their metric exists at all.
func explainEmpty(prom promAPI, expr string) string {
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return fmt.Sprintf("(does not parse: %v)", err)
	}
	var notes []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		sel := vs.String()
		r, err := prom.query("count(" + sel + ")")
		switch {
		case err != nil:
			notes = append(notes, fmt.Sprintf("%s: %v", sel, err))
		case len(r) > 0:
			notes = append(notes, fmt.Sprintf("%s: %v series", sel, r[0].Value[1]))
		default:
			all, _ := prom.query(fmt.Sprintf("count by (family) ({__name__=%q})", vs.Name))
			var fams []string
			for _, s := range all {
				fams = append(fams, fmt.Sprintf("%s=%v", s.Metric["family"], s.Value[1]))
			}
			slices.Sort(fams)
			notes = append(notes, fmt.Sprintf("%s: no series; %s has series by family %v", sel, vs.Name, fams))
		}
		return nil
	})
	return strings.Join(notes, "; ")
}
