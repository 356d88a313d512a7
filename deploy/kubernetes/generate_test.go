package kubernetes

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The committed prometheusrule.yaml and dashboards.yaml must say what the
// rules file and the dashboards say now.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	if err := CheckCurrent(filepath.Join("..", "..")); err != nil {
		t.Fatal(err)
	}
}

const testRules = `groups:
  - name: g
    rules:
      - record: job:up:sum
        expr: sum by (job) (up)
      - alert: Down
        expr: |
          job:up:sum
            == 0
        for: 5m
        labels:
          severity: critical
        annotations:
          summary: "{{ $labels.job }} is down"
`

const testDashboard = `{"title": "T", "panels": [{"id": 1, "targets": [{"expr": "up"}]}]}`

// fakeRepo lays out a repository root with the sources and the generated
// files written by Render.
func fakeRepo(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	write(t, filepath.Join(root, RulesSource), testRules)
	write(t, filepath.Join(root, DashboardsSource, "t.json"), testDashboard)
	regenerate(t, root)
	return root
}

func regenerate(t *testing.T, root string) {
	t.Helper()
	files, err := Render(root)
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range files {
		write(t, filepath.Join(root, ManifestDir, name), string(b))
	}
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestCheckCurrentFindsDrift(t *testing.T) {
	cases := []struct {
		name   string
		change func(t *testing.T, root string)
		want   []string // in the error; nil = no error
	}{
		{
			name:   "fresh",
			change: func(*testing.T, string) {},
		},
		{
			name: "generated rule file re-indented and re-quoted",
			change: func(t *testing.T, root string) {
				// Through JSON and back: sorted keys, other indentation
				// and quoting, the same meaning.
				p := filepath.Join(root, ManifestDir, RuleFile)
				j, err := yaml.YAMLToJSON([]byte(read(t, p)))
				if err != nil {
					t.Fatal(err)
				}
				y, err := yaml.JSONToYAML(j)
				if err != nil {
					t.Fatal(err)
				}
				if string(y) == read(t, p) {
					t.Fatal("the round trip changed nothing; the case tests nothing")
				}
				write(t, p, string(y))
			},
		},
		{
			name: "dashboard reformatted in the source",
			change: func(t *testing.T, root string) {
				write(t, filepath.Join(root, DashboardsSource, "t.json"), "{\n  \"panels\": [{\"targets\": [{\"expr\": \"up\"}], \"id\": 1}],\n  \"title\": \"T\"\n}\n")
			},
		},
		{
			name: "alert expression changed",
			change: func(t *testing.T, root string) {
				write(t, filepath.Join(root, RulesSource), strings.Replace(testRules, "== 0", "< 1", 1))
			},
			want: []string{RuleFile, RulesSource, "go generate", "< 1", "== 0"},
		},
		{
			name: "alert severity changed",
			change: func(t *testing.T, root string) {
				write(t, filepath.Join(root, RulesSource), strings.Replace(testRules, "critical", "warning", 1))
			},
			want: []string{RuleFile, "warning", "critical"},
		},
		{
			name: "rule added",
			change: func(t *testing.T, root string) {
				write(t, filepath.Join(root, RulesSource), testRules+"      - record: x\n        expr: vector(1)\n")
			},
			want: []string{RuleFile, "vector(1)"},
		},
		{
			name: "dashboard query changed",
			change: func(t *testing.T, root string) {
				write(t, filepath.Join(root, DashboardsSource, "t.json"), strings.Replace(testDashboard, `"up"`, `"up == 1"`, 1))
			},
			want: []string{DashboardsFile, "t.json", "up == 1"},
		},
		{
			name: "dashboard added",
			change: func(t *testing.T, root string) {
				write(t, filepath.Join(root, DashboardsSource, "u.json"), testDashboard)
			},
			want: []string{DashboardsFile, "1 dashboards there, 2 in dashboards"},
		},
		{
			name: "generated rule file edited by hand",
			change: func(t *testing.T, root string) {
				p := filepath.Join(root, ManifestDir, RuleFile)
				write(t, p, strings.Replace(read(t, p), "for: 5m", "for: 10m", 1))
			},
			want: []string{RuleFile, "10m"},
		},
		{
			name: "unknown field in the generated rule file",
			change: func(t *testing.T, root string) {
				p := filepath.Join(root, ManifestDir, RuleFile)
				write(t, p, strings.Replace(read(t, p), "for: 5m", "for: 5m\n          keep_firing: 5m", 1))
			},
			want: []string{RuleFile, `unknown field "spec.groups[0].rules[1].keep_firing"`},
		},
		{
			name: "rules file has a field PrometheusRule cannot hold",
			change: func(t *testing.T, root string) {
				write(t, filepath.Join(root, RulesSource), strings.Replace(testRules, "for: 5m", "for: 5m\n        owner: me", 1))
			},
			want: []string{RulesSource, `unknown field "groups[0].rules[1].owner"`},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := fakeRepo(t)
			tc.change(t, root)
			err := CheckCurrent(root)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("CheckCurrent: %v, want no drift", err)
				}
				return
			}
			if err == nil {
				t.Fatal("CheckCurrent found no drift")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestCheckCurrentMarksStaleFiles(t *testing.T) {
	root := fakeRepo(t)
	write(t, filepath.Join(root, RulesSource), strings.Replace(testRules, "5m", "6m", 1))
	if err := CheckCurrent(root); !errors.Is(err, ErrStale) {
		t.Fatalf("CheckCurrent = %v, want ErrStale", err)
	}
	regenerate(t, root)
	if err := CheckCurrent(root); err != nil {
		t.Fatalf("after regenerating: %v", err)
	}
}

func TestRenderRefusesBadSources(t *testing.T) {
	cases := []struct {
		name      string
		rules     string
		dashboard string
		want      string
	}{
		{"no groups", "groups: []\n", testDashboard, "no rule groups"},
		{"not YAML", "groups: [\n", testDashboard, RulesSource},
		{"dashboard not JSON", testRules, "{", "dashboards/t.json: not valid JSON"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			write(t, filepath.Join(root, RulesSource), tc.rules)
			write(t, filepath.Join(root, DashboardsSource, "t.json"), tc.dashboard)
			_, err := Render(root)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Render: %v, want an error with %q", err, tc.want)
			}
		})
	}
	t.Run("no dashboards", func(t *testing.T) {
		root := t.TempDir()
		write(t, filepath.Join(root, RulesSource), testRules)
		if _, err := Render(root); err == nil || !strings.Contains(err.Error(), "no *.json dashboards") {
			t.Fatalf("Render: %v", err)
		}
	})
}

func TestDashboardSlug(t *testing.T) {
	for in, want := range map[string]string{
		"slot-overview": "slot-overview",
		"Slot_User v2":  "slot-user-v2",
	} {
		if got := dashboardSlug(in); got != want {
			t.Errorf("dashboardSlug(%q) = %q, want %q", in, got, want)
		}
	}
}
