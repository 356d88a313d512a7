package dashboards

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/slotexporter/slot_exporter/alerts/lint"
)

// dir holds the dashboards. Their test lives in the alerts module, with
// alerts/lint, so that the product's module does not require Prometheus.
const dir = "../../dashboards"

func checker(t *testing.T) *lint.Checker {
	t.Helper()
	_, c, err := lint.Load(filepath.Join("..", "slot_exporter.rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// want lists the dashboards and the query variables each must have.
var want = map[string]struct {
	uid  string
	vars []string
}{
	"slot-overview.json": {"slot-overview", []string{"instance", "family"}},
	"slot-user.json":     {"slot-user", []string{"instance", "family", "user"}},
}

func TestDashboards(t *testing.T) {
	c := checker(t)
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(want) {
		t.Errorf("dashboards: got %v, want %d files", files, len(want))
	}
	for _, f := range files {
		f = filepath.Base(f)
		t.Run(f, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join(dir, f))
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range c.CheckDashboard(b) {
				t.Error(e)
			}
			w, ok := want[f]
			if !ok {
				t.Fatalf("unexpected dashboard %s", f)
			}
			var d struct {
				UID           string `json:"uid"`
				SchemaVersion int    `json:"schemaVersion"`
				Templating    struct {
					List []struct {
						Name  string `json:"name"`
						Type  string `json:"type"`
						Query any    `json:"query"`
					} `json:"list"`
				} `json:"templating"`
			}
			if err := json.Unmarshal(b, &d); err != nil {
				t.Fatal(err)
			}
			if d.UID != w.uid {
				t.Errorf("uid %q, want %q", d.UID, w.uid)
			}
			if d.SchemaVersion < 36 {
				t.Errorf("schemaVersion %d is older than Grafana 9", d.SchemaVersion)
			}
			types := map[string]string{}
			for _, v := range d.Templating.List {
				types[v.Name] = v.Type
			}
			for _, v := range w.vars {
				if types[v] != "query" {
					t.Errorf("no query variable %q", v)
				}
			}
		})
	}
}

// mutate applies f to the decoded slot-overview dashboard and returns the
// re-encoded JSON.
func mutate(t *testing.T, f func(d map[string]any)) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "slot-overview.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	f(d)
	out, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// firstPanel returns the first panel of the given type.
func firstPanel(d map[string]any, typ string) map[string]any {
	for _, p := range d["panels"].([]any) {
		if m := p.(map[string]any); m["type"] == typ {
			return m
		}
	}
	panic("no " + typ + " panel")
}

func firstTarget(d map[string]any, typ string) map[string]any {
	return firstPanel(d, typ)["targets"].([]any)[0].(map[string]any)
}

// TestCheckerCatchesProblems proves that the dashboard test can fail.
func TestCheckerCatchesProblems(t *testing.T) {
	c := checker(t)
	for _, tc := range []struct {
		name string
		f    func(d map[string]any)
		want string
	}{
		{"bad expr", func(d map[string]any) { firstTarget(d, "timeseries")["expr"] = "sum by (family (slot_sets)" }, "does not parse"},
		{"metric outside the catalog", func(d map[string]any) {
			firstTarget(d, "stat")["expr"] = `sum(slot_family_budget{family=~"$family"})`
		}, "slot_family_budget"},
		{"undefined variable", func(d map[string]any) {
			firstTarget(d, "timeseries")["expr"] = `sum(slot_sets{family=~"$tenant"})`
		}, "undefined variables tenant"},
		{"panel without title", func(d map[string]any) { firstPanel(d, "timeseries")["title"] = "" }, "has no title"},
		{"stat without unit", func(d map[string]any) {
			delete(firstPanel(d, "stat")["fieldConfig"].(map[string]any)["defaults"].(map[string]any), "unit")
		}, "has no fieldConfig.defaults.unit"},
		{"hard-coded panel datasource", func(d map[string]any) {
			firstPanel(d, "timeseries")["datasource"] = map[string]any{"type": "prometheus", "uid": "P1809F7CD0C75ACF3"}
		}, "P1809F7CD0C75ACF3"},
		{"hard-coded target datasource", func(d map[string]any) {
			firstTarget(d, "stat")["datasource"] = map[string]any{"type": "prometheus", "uid": "prometheus"}
		}, `datasource uid prometheus is not ${datasource}`},
		{"datasource by name", func(d map[string]any) {
			d["annotations"] = map[string]any{"list": []any{map[string]any{"datasource": "Prometheus", "name": "x"}}}
		}, `datasource "Prometheus"`},
		{"no datasource variable", func(d map[string]any) {
			tl := d["templating"].(map[string]any)
			var keep []any
			for _, v := range tl["list"].([]any) {
				if v.(map[string]any)["type"] != "datasource" {
					keep = append(keep, v)
				}
			}
			tl["list"] = keep
		}, `no template variable named "datasource"`},
		{"variable query on an unknown metric", func(d map[string]any) {
			for _, v := range d["templating"].(map[string]any)["list"].([]any) {
				if m := v.(map[string]any); m["name"] == "family" {
					m["query"] = "label_values(slot_family_budget, family)"
				}
			}
		}, "slot_family_budget"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := c.CheckDashboard(mutate(t, tc.f))
			var all []string
			for _, e := range errs {
				all = append(all, e.Error())
			}
			if !strings.Contains(strings.Join(all, "\n"), tc.want) {
				t.Fatalf("checker did not report %q; it reported:\n%s", tc.want, strings.Join(all, "\n"))
			}
		})
	}
	// And the unmodified dashboard is clean, so the reports above come from
	// the damage alone.
	if errs := c.CheckDashboard(mutate(t, func(map[string]any) {})); len(errs) > 0 {
		t.Fatalf("the unmodified dashboard has errors: %v", errs)
	}
}

// panelsOf returns every panel of a dashboard JSON model, rows' panels included.
func panelsOf(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	var d map[string]any
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	var walk func(list []any)
	walk = func(list []any) {
		for _, p := range list {
			if m, ok := p.(map[string]any); ok {
				out = append(out, m)
				if sub, ok := m["panels"].([]any); ok {
					walk(sub)
				}
			}
		}
	}
	top, _ := d["panels"].([]any)
	walk(top)
	return out
}

func exprsOf(p map[string]any) []string {
	var out []string
	targets, _ := p["targets"].([]any)
	for _, t := range targets {
		if m, ok := t.(map[string]any); ok {
			if e, ok := m["expr"].(string); ok {
				out = append(out, e)
			}
		}
	}
	return out
}

// thresholdValues returns the non-base steps of a panel's thresholds, in its
// defaults and in its overrides.
func thresholdValues(p map[string]any) []float64 {
	var out []float64
	add := func(th any) {
		m, _ := th.(map[string]any)
		steps, _ := m["steps"].([]any)
		for _, s := range steps {
			if v, ok := s.(map[string]any)["value"].(float64); ok {
				out = append(out, v)
			}
		}
	}
	fc, _ := p["fieldConfig"].(map[string]any)
	if def, ok := fc["defaults"].(map[string]any); ok {
		add(def["thresholds"])
	}
	overrides, _ := fc["overrides"].([]any)
	for _, o := range overrides {
		props, _ := o.(map[string]any)["properties"].([]any)
		for _, pr := range props {
			if m, _ := pr.(map[string]any); m["id"] == "thresholds" {
				add(m["value"])
			}
		}
	}
	return out
}

// floorThresholdProblems reports panels that show a floor age and colour it
// at a fixed number of seconds. The floor window is per family and comes
// from the config (slot_family_floor_window_seconds): a panel may turn red
// only at a share of that window (a threshold of at most 1 on a query that
// divides by it).
func floorThresholdProblems(t *testing.T, b []byte) []string {
	t.Helper()
	var problems []string
	for _, p := range panelsOf(t, b) {
		all := strings.Join(exprsOf(p), "\n")
		if !strings.Contains(all, "slot_user_floor_seconds") {
			continue
		}
		vals := thresholdValues(p)
		if len(vals) == 0 {
			continue
		}
		for _, v := range vals {
			if v > 1 {
				problems = append(problems, fmt.Sprintf("panel %q turns a colour at a floor age of %vs, a fixed number: compare with slot_family_floor_window_seconds instead", p["title"], v))
			}
		}
		if !strings.Contains(all, "slot_family_floor_window_seconds") {
			problems = append(problems, fmt.Sprintf("panel %q colours the floor age but none of its queries reads slot_family_floor_window_seconds", p["title"]))
		}
	}
	return problems
}

func TestFloorThresholdsFollowConfig(t *testing.T) {
	for f := range want {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range floorThresholdProblems(t, b) {
			t.Errorf("%s: %s", f, p)
		}
	}
	// A floor stat red at 1800s, as the dashboards once were, is reported.
	bad := mutate(t, func(d map[string]any) {
		d["panels"] = append(d["panels"].([]any), map[string]any{
			"type": "stat", "title": "Floor age",
			"targets": []any{map[string]any{"expr": `max(slot_user_floor_seconds)`}},
			"fieldConfig": map[string]any{"defaults": map[string]any{"thresholds": map[string]any{
				"mode": "absolute", "steps": []any{map[string]any{"color": "green", "value": nil}, map[string]any{"color": "red", "value": 1800}}}}},
		})
	})
	if p := floorThresholdProblems(t, bad); len(p) != 2 {
		t.Fatalf("a floor panel red at 1800s: got %v, want two problems", p)
	}
}

// metricRE finds catalog metric names in PromQL text.
var metricRE = regexp.MustCompile(`\bslot_[a-z_]+`)

// TestKindsShown: the overview has a row per kind and shows every metric of
// the kinds and of the family configuration; the one-user dashboard shows
// each kind's per-user figures for the selected user.
func TestKindsShown(t *testing.T) {
	ob, err := os.ReadFile(filepath.Join(dir, "slot-overview.json"))
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	rows := map[string]bool{}
	for _, p := range panelsOf(t, ob) {
		if p["type"] == "row" {
			rows[p["title"].(string)] = true
		}
		for _, e := range exprsOf(p) {
			for _, m := range metricRE.FindAllString(e, -1) {
				used[m] = true
			}
		}
	}
	for _, k := range []string{"ratelimit", "lock", "list", "stream"} {
		found := false
		for r := range rows {
			found = found || strings.Contains(r, "(kind "+k+")")
		}
		if !found {
			t.Errorf("the overview has no row for kind %s (rows: %v)", k, rows)
		}
	}
	for _, m := range lint.Catalog {
		kindMetric := strings.HasPrefix(m.Name, "slot_ratelimit_") || strings.HasPrefix(m.Name, "slot_queue") ||
			strings.HasPrefix(m.Name, "slot_stream_") || strings.HasPrefix(m.Name, "slot_family_")
		if kindMetric && !used[m.Name] {
			t.Errorf("the overview does not show %s", m.Name)
		}
	}

	ub, err := os.ReadFile(filepath.Join(dir, "slot-user.json"))
	if err != nil {
		t.Fatal(err)
	}
	perUser := map[string]bool{}
	for _, p := range panelsOf(t, ub) {
		for _, e := range exprsOf(p) {
			if !strings.Contains(e, `user="$user"`) {
				continue
			}
			for _, m := range metricRE.FindAllString(e, -1) {
				perUser[m] = true
			}
		}
	}
	for _, m := range lint.Catalog {
		if len(m.Labels) > 1 && m.Labels[1] == "user" && !perUser[m.Name] {
			t.Errorf("the one-user dashboard does not show %s for the selected user", m.Name)
		}
	}
}
