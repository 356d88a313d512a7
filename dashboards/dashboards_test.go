package dashboards

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slotexporter/slot_exporter/alerts/lint"
)

func checker(t *testing.T) *lint.Checker {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "alerts", "slot_exporter.rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	rf, err := lint.ParseRuleFile(b)
	if err != nil {
		t.Fatal(err)
	}
	c, err := lint.NewChecker(rf)
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
	files, err := filepath.Glob("*.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(want) {
		t.Errorf("dashboards: got %v, want %d files", files, len(want))
	}
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			b, err := os.ReadFile(f)
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
	b, err := os.ReadFile("slot-overview.json")
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
