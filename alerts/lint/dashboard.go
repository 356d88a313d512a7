package lint

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// DatasourceRef is the only datasource reference a dashboard may contain: the
// datasource template variable.
const DatasourceRef = "${datasource}"

// builtinVars are Grafana's own variables, replaced by values of the right
// kind: durations where Grafana puts a duration, numbers where it puts a
// number.
var builtinVars = map[string]string{
	"__rate_interval": "5m",
	"__interval":      "1m",
	"__range":         "1h",
	"__interval_ms":   "60000",
	"__range_ms":      "3600000",
	"__range_s":       "3600",
}

// grafanaVarRE matches $var, ${var}, ${var:format} and [[var]].
var grafanaVarRE = regexp.MustCompile(`\$\{([A-Za-z0-9_]+)(?::[^}]*)?\}|\$([A-Za-z0-9_]+)|\[\[([A-Za-z0-9_]+)(?::[^\]]*)?\]\]`)

// placeholder replaces a dashboard variable in a PromQL expression. Variables
// belong in label values ({family=~"$family"}), where any string is valid.
const placeholder = "placeholder"

// SubstituteGrafanaVars replaces Grafana's built-in variables with valid
// durations or numbers and the dashboard's own variables (defined) with a
// placeholder string. It returns the expression and the variables that are
// neither built in nor defined.
func SubstituteGrafanaVars(expr string, defined map[string]bool) (string, []string) {
	var undefined []string
	out := grafanaVarRE.ReplaceAllStringFunc(expr, func(m string) string {
		sub := grafanaVarRE.FindStringSubmatch(m)
		name := sub[1] + sub[2] + sub[3]
		if v, ok := builtinVars[name]; ok {
			return v
		}
		if !defined[name] {
			undefined = append(undefined, name)
		}
		return placeholder
	})
	return out, undefined
}

// labelValuesRE matches Grafana's label_values(selector, label) variable query.
var (
	labelValuesRE  = regexp.MustCompile(`^\s*label_values\(\s*(.*?)\s*,\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*$`)
	labelValues1RE = regexp.MustCompile(`^\s*label_values\(\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*$`)
	queryResultRE  = regexp.MustCompile(`^\s*query_result\((.*)\)\s*$`)
)

// unitPanels are the panel types that must set fieldConfig.defaults.unit.
var unitPanels = map[string]bool{"timeseries": true, "stat": true, "gauge": true, "bargauge": true}

// CheckDashboard checks a Grafana dashboard JSON model: it parses; it has a
// uid, a title and a `datasource` template variable of type datasource for
// Prometheus; every panel has a title, and a unit where its type shows
// numbers; every panel, target and query variable uses the datasource
// variable, and no datasource reference anywhere names another uid; every
// PromQL expression (targets and query variables) parses after variable
// substitution and names only known metrics.
func (c *Checker) CheckDashboard(b []byte) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	var d map[string]any
	if err := json.Unmarshal(b, &d); err != nil {
		return []error{fmt.Errorf("not JSON: %w", err)}
	}
	if s, _ := d["uid"].(string); s == "" {
		fail("dashboard has no uid")
	}
	if s, _ := d["title"].(string); s == "" {
		fail("dashboard has no title")
	}
	if _, ok := d["schemaVersion"].(float64); !ok {
		fail("dashboard has no schemaVersion")
	}

	// Variables.
	defined := map[string]bool{}
	var vars []map[string]any
	if t, ok := d["templating"].(map[string]any); ok {
		list, _ := t["list"].([]any)
		for _, v := range list {
			if m, ok := v.(map[string]any); ok {
				vars = append(vars, m)
				if n, _ := m["name"].(string); n != "" {
					defined[n] = true
				}
			}
		}
	}
	hasDS := false
	for _, v := range vars {
		name, _ := v["name"].(string)
		typ, _ := v["type"].(string)
		where := fmt.Sprintf("variable %q", name)
		switch typ {
		case "datasource":
			if name == "datasource" && v["query"] == "prometheus" {
				hasDS = true
			}
		case "query":
			c.checkDatasource(v["datasource"], where, fail)
			q := v["query"]
			if m, ok := q.(map[string]any); ok {
				q = m["query"]
			}
			qs, _ := q.(string)
			c.checkVariableQuery(qs, defined, where, fail)
		}
	}
	if !hasDS {
		fail(`dashboard has no template variable named "datasource" of type datasource with query "prometheus"`)
	}

	// Panels, rows included.
	var panels []map[string]any
	var collect func(list []any)
	collect = func(list []any) {
		for _, p := range list {
			m, ok := p.(map[string]any)
			if !ok {
				continue
			}
			panels = append(panels, m)
			if sub, ok := m["panels"].([]any); ok {
				collect(sub)
			}
		}
	}
	top, _ := d["panels"].([]any)
	collect(top)
	if len(panels) == 0 {
		fail("dashboard has no panels")
	}
	ids := map[float64]bool{}
	for i, p := range panels {
		title, _ := p["title"].(string)
		typ, _ := p["type"].(string)
		where := fmt.Sprintf("panel %d (%s %q)", i, typ, title)
		if strings.TrimSpace(title) == "" {
			fail("%s: has no title", where)
		}
		if id, ok := p["id"].(float64); ok {
			if ids[id] {
				fail("%s: id %v is not unique", where, id)
			}
			ids[id] = true
		}
		if typ == "row" || typ == "text" {
			continue
		}
		if unitPanels[typ] {
			unit := ""
			if fc, ok := p["fieldConfig"].(map[string]any); ok {
				if def, ok := fc["defaults"].(map[string]any); ok {
					unit, _ = def["unit"].(string)
				}
			}
			if unit == "" {
				fail("%s: has no fieldConfig.defaults.unit", where)
			}
		}
		c.checkDatasource(p["datasource"], where, fail)
		targets, _ := p["targets"].([]any)
		if len(targets) == 0 {
			fail("%s: has no targets", where)
		}
		for j, t := range targets {
			tm, _ := t.(map[string]any)
			tw := fmt.Sprintf("%s: target %d", where, j)
			c.checkDatasource(tm["datasource"], tw, fail)
			expr, _ := tm["expr"].(string)
			if strings.TrimSpace(expr) == "" {
				fail("%s: has no expr", tw)
				continue
			}
			c.checkDashboardExpr(expr, defined, tw, fail)
		}
	}

	// No datasource reference anywhere may name another uid.
	walkDatasourceRefs(d, "", func(path string, ref any) {
		switch r := ref.(type) {
		case string:
			if r != DatasourceRef {
				fail("%s: datasource %q is not %s", path, r, DatasourceRef)
			}
		case map[string]any:
			if uid, ok := r["uid"]; ok && uid != DatasourceRef {
				fail("%s: datasource uid %v is not %s", path, uid, DatasourceRef)
			}
		}
	})
	return errs
}

func (c *Checker) checkDatasource(ds any, where string, fail func(string, ...any)) {
	m, ok := ds.(map[string]any)
	if !ok || m["type"] != "prometheus" || m["uid"] != DatasourceRef {
		fail(`%s: datasource must be {"type":"prometheus","uid":%q}, got %v`, where, DatasourceRef, ds)
	}
}

func (c *Checker) checkDashboardExpr(expr string, defined map[string]bool, where string, fail func(string, ...any)) {
	sub, undefined := SubstituteGrafanaVars(expr, defined)
	if len(undefined) > 0 {
		sort.Strings(undefined)
		fail("%s: expr %q uses undefined variables %s", where, expr, strings.Join(undefined, ", "))
	}
	if err := c.CheckExpr(sub); err != nil {
		fail("%s: expr %q: %v", where, expr, err)
	}
}

func (c *Checker) checkVariableQuery(q string, defined map[string]bool, where string, fail func(string, ...any)) {
	switch {
	case strings.TrimSpace(q) == "":
		fail("%s: has no query", where)
	case labelValues1RE.MatchString(q):
		// label_values(label): no metric to check.
	case labelValuesRE.MatchString(q):
		c.checkDashboardExpr(labelValuesRE.FindStringSubmatch(q)[1], defined, where, fail)
	case queryResultRE.MatchString(q):
		c.checkDashboardExpr(queryResultRE.FindStringSubmatch(q)[1], defined, where, fail)
	default:
		fail("%s: query %q is not label_values(...) or query_result(...)", where, q)
	}
}

// walkDatasourceRefs calls f for every value stored under a "datasource" key
// anywhere in v.
func walkDatasourceRefs(v any, path string, f func(path string, ref any)) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := path + "." + k
			if k == "datasource" {
				f(p, x[k])
				continue
			}
			walkDatasourceRefs(x[k], p, f)
		}
	case []any:
		for i, e := range x {
			walkDatasourceRefs(e, fmt.Sprintf("%s[%d]", path, i), f)
		}
	}
}
