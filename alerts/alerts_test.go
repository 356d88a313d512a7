package alerts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slotexporter/slot_exporter/alerts/lint"
	"github.com/slotexporter/slot_exporter/alerts/rulescale"
)

const rulesFile = "slot_exporter.rules.yml"

// promtool returns the promtool binary: $PROMTOOL, or promtool on PATH. The
// rules are part of the product, so a missing promtool fails the test rather
// than skipping it.
func promtool(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("PROMTOOL"); p != "" {
		return p
	}
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool is required to test the alerting rules but was not found on PATH " +
			"(install Prometheus' promtool, e.g. the Debian package \"prometheus\", or set PROMTOOL=/path/to/promtool)")
	}
	return p
}

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(promtool(t), args...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func testFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("tests", "*.yml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no promtool unit tests in tests/*.yml (%v)", err)
	}
	return files
}

func TestPromtoolCheckRules(t *testing.T) {
	out, err := run(t, "check", "rules", rulesFile)
	if err != nil {
		t.Fatalf("promtool check rules %s: %v\n%s", rulesFile, err, out)
	}
}

func TestPromtoolTestRules(t *testing.T) {
	out, err := run(t, append([]string{"test", "rules"}, testFiles(t)...)...)
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
	if strings.Contains(out, "FAILED") || !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool test rules did not succeed:\n%s", out)
	}
}

// TestPromtoolCatchesBrokenRules proves the two tests above can fail.
func TestPromtoolCatchesBrokenRules(t *testing.T) {
	in, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	broken := filepath.Join(dir, rulesFile)
	if err := os.WriteFile(broken, []byte(strings.Replace(string(in),
		"expr: slot_user_floor_seconds > 1800", "expr: slot_user_floor_seconds > > 1800", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := run(t, "check", "rules", broken); err == nil {
		t.Fatalf("promtool check rules accepted a broken expr:\n%s", out)
	}

	// A rule file whose floor alert never fires must fail the unit tests.
	quiet := filepath.Join(dir, "rules", rulesFile)
	if err := os.MkdirAll(filepath.Dir(quiet), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(quiet, []byte(strings.Replace(string(in),
		"expr: slot_user_floor_seconds > 1800", "expr: slot_user_floor_seconds > 180000", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	floor, err := os.ReadFile(filepath.Join("tests", "floor.yml"))
	if err != nil {
		t.Fatal(err)
	}
	testFile := filepath.Join(dir, "tests", "floor.yml")
	if err := os.MkdirAll(filepath.Dir(testFile), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(testFile, []byte(strings.Replace(string(floor),
		"../slot_exporter.rules.yml", "../rules/"+rulesFile, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := run(t, "test", "rules", testFile); err == nil {
		t.Fatalf("promtool test rules passed although SlotUserFloorNeverZero can no longer fire:\n%s", out)
	}
}

// TestScaledRulesPassPromtool checks that rulescale's output (what the
// end-to-end test loads into Prometheus) is still a valid rule file.
func TestScaledRulesPassPromtool(t *testing.T) {
	in, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []float64{1.0 / 60, 1.0 / 10, 1} {
		out, err := rulescale.Scale(in, f, 2*time.Second)
		if err != nil {
			t.Fatalf("Scale(%v): %v", f, err)
		}
		p := filepath.Join(t.TempDir(), "scaled.rules.yml")
		if err := os.WriteFile(p, out, 0o644); err != nil {
			t.Fatal(err)
		}
		if res, err := run(t, "check", "rules", p); err != nil {
			t.Fatalf("promtool check rules on the rules scaled by %v: %v\n%s\n%s", f, err, res, out)
		}
	}
}

func loadRules(t *testing.T) (*lint.RuleFile, *lint.Checker) {
	t.Helper()
	b, err := os.ReadFile(rulesFile)
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
	return rf, c
}

// TestRulesLint: every expr parses and uses catalog metrics or recording
// rules; every alert has a severity, summary, description and a runbook_url
// whose section exists; annotations name the family and the user where the
// alert carries them; the unit tests cover every alert both ways and every
// recording rule.
func TestRulesLint(t *testing.T) {
	rf, c := loadRules(t)
	runbook, err := os.ReadFile(filepath.Join("..", "docs", "runbook.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range c.CheckRuleFile(rf, runbook) {
		t.Error(e)
	}
	tests := map[string][]byte{}
	for _, f := range testFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		tests[f] = b
	}
	for _, e := range c.CheckRuleTests(rf, tests) {
		t.Error(e)
	}
	if n := len(rf.Alerts()); n < 15 {
		t.Errorf("only %d alerts", n)
	}
}

// TestRulesLintCatchesProblems feeds the checker a damaged copy of the rule
// file and checks that it reports each damage.
func TestRulesLintCatchesProblems(t *testing.T) {
	in, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	runbook, err := os.ReadFile(filepath.Join("..", "docs", "runbook.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, from, to, want string }{
		{"metric outside the catalog", "expr: slot_users_over_limit > 0", "expr: slot_users_over_limit > slot_family_limit", "slot_family_limit"},
		{"syntax error", "expr: slot_counters_negative > 0", "expr: slot_counters_negative >", "does not parse"},
		{"no severity", "severity: info", "severity: critical", "severity"},
		{"family not named", "summary: \"Sweeps of family {{ $labels.family }} keep failing now and then.\"", "summary: \"Sweeps keep failing.\"", "family"},
		{"wrong runbook anchor", "runbook.md#slotholdslost", "runbook.md#holds-lost", "runbook_url"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := string(in)
			if !strings.Contains(s, tc.from) {
				t.Fatalf("rule file no longer contains %q", tc.from)
			}
			s = strings.Replace(s, tc.from, tc.to, 1)
			if tc.name == "family not named" {
				s = strings.Replace(s, "Sweeps of family {{ $labels.family }} on {{ $labels.instance }} have kept failing", "Sweeps have kept failing", 1)
			}
			rf, err := lint.ParseRuleFile([]byte(s))
			if err != nil {
				t.Fatal(err)
			}
			c, err := lint.NewChecker(rf)
			if err != nil {
				t.Fatal(err)
			}
			errs := c.CheckRuleFile(rf, runbook)
			var all []string
			for _, e := range errs {
				all = append(all, e.Error())
			}
			if !strings.Contains(strings.Join(all, "\n"), tc.want) {
				t.Fatalf("checker did not report %q; it reported:\n%s", tc.want, strings.Join(all, "\n"))
			}
		})
	}
}
