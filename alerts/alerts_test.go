package alerts

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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

// testDirs hold the promtool unit tests, one directory per input (scrape)
// interval; every alert is tested both ways in each.
var testDirs = []string{filepath.Join("tests", "1m"), filepath.Join("tests", "15s")}

func testFiles(t *testing.T) []string {
	t.Helper()
	var all []string
	for _, d := range testDirs {
		files, err := filepath.Glob(filepath.Join(d, "*.yml"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no promtool unit tests in %s/*.yml (%v)", d, err)
		}
		all = append(all, files...)
	}
	return all
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

// mutatedTree writes a copy of the rule file with from replaced by to, next
// to a copy of the unit tests, laid out as in the repository so that the
// tests' rule_files reach the copy. It returns the copy's directory.
func mutatedTree(t *testing.T, from, to string) string {
	t.Helper()
	in, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(in), from) {
		t.Fatalf("the rule file no longer contains %q", from)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, rulesFile), []byte(strings.Replace(string(in), from, to, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, f := range testFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestPromtoolCatchesBrokenRules proves the two tests above can fail.
func TestPromtoolCatchesBrokenRules(t *testing.T) {
	dir := mutatedTree(t, "slot_user_floor_seconds\n", "slot_user_floor_seconds >\n")
	if out, err := run(t, "check", "rules", filepath.Join(dir, rulesFile)); err == nil {
		t.Fatalf("promtool check rules accepted a broken expr:\n%s", out)
	}

	// A floor alert that compares with a hundred times the window never fires
	// within the tests' hour: the floor tests must fail at both intervals.
	dir = mutatedTree(t, "(slot_family_floor_window_seconds > 0)", "(100 * slot_family_floor_window_seconds > 0)")
	for _, d := range testDirs {
		out, err := run(t, "test", "rules", filepath.Join(dir, d, "floor.yml"))
		if err == nil || !strings.Contains(out, "alertname: SlotUserFloorNeverZero") {
			t.Fatalf("promtool test rules %s/floor.yml passed although SlotUserFloorNeverZero can no longer fire:\n%s", d, out)
		}
	}
}

// TestOffGridTestsCatchIntervalBugs puts back two rules that were right only
// when samples sit on the evaluation grid, and checks that the 1m tests,
// whose samples do not, fail on each: a heartbeat rate over 1m, which is
// empty at a 1m scrape and made SlotHeartbeatsStopped page on a healthy
// family, and a sweep age taken from time(), which a 1m scrape alone makes up
// to a minute older.
func TestOffGridTestsCatchIntervalBugs(t *testing.T) {
	for _, tc := range []struct{ name, from, to, file, alert string }{
		{"heartbeat rate over 1m", "rate(slot_heartbeats_total[5m])", "rate(slot_heartbeats_total[1m])", "leaks.yml", "SlotHeartbeatsStopped"},
		{"sweep age from time()", "timestamp(slot_exporter_last_sweep_timestamp_seconds)\n", "time()\n", "exporter.yml", "SlotExporterSweepsStale"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := mutatedTree(t, tc.from, tc.to)
			if out, err := run(t, "check", "rules", filepath.Join(dir, rulesFile)); err != nil {
				t.Fatalf("the mutated rule file does not load, so this test proves nothing: %v\n%s", err, out)
			}
			out, err := run(t, "test", "rules", filepath.Join(dir, "tests", "1m", tc.file))
			if err == nil || !strings.Contains(out, "alertname: "+tc.alert) {
				t.Fatalf("the 1m tests pass with %s:\n%s", tc.name, out)
			}
		})
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
	rf, c, err := lint.Load(rulesFile)
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
	// README.md counts the rules for whoever deploys them: it said 29
	// alerts for a while after the queue frameworks had added five.
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`rules\.yml\): (\d+) alerts and (\d+) recording rules`).FindSubmatch(readme)
	if m == nil {
		t.Fatal(`README.md no longer says "slot_exporter.rules.yml): N alerts and M recording rules"`)
	}
	if got := fmt.Sprintf("%s alerts and %s recording rules", m[1], m[2]); got != fmt.Sprintf("%d alerts and %d recording rules", len(rf.Alerts()), len(rf.Records())) {
		t.Errorf("README.md says %s; the rule file has %d and %d", got, len(rf.Alerts()), len(rf.Records()))
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
		{"metric outside the catalog", "expr: slot_users_over_limit > 0", "expr: slot_users_over_limit > slot_family_budget", "slot_family_budget"},
		{"syntax error", "expr: slot_counters_negative > 0", "expr: slot_counters_negative >", "does not parse"},
		{"old severity", "severity: info", "severity: page", "severity"},
		{"range too short for a 1m scrape", "increase(slot_exporter_sweep_errors_total[5m])", "increase(slot_exporter_sweep_errors_total[1m])", "shorter than 4m"},
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

// wantReceiver is the Alertmanager receiver of deploy/alertmanager.yml that
// each severity must reach.
var wantReceiver = map[string]string{"critical": "pager", "warning": "tickets", "info": "null"}

// TestAlertmanagerRoutesSeverities asks amtool where deploy/alertmanager.yml
// sends every alert of the rule file, with its own labels: critical pages,
// warning goes to tickets, info to nobody.
func TestAlertmanagerRoutesSeverities(t *testing.T) {
	amtool := os.Getenv("AMTOOL")
	if amtool == "" {
		p, err := exec.LookPath("amtool")
		if err != nil {
			t.Fatalf("amtool is required to test the Alertmanager routes but was not found on PATH " +
				"(install the Debian package \"prometheus-alertmanager\", or set AMTOOL=/path/to/amtool)")
		}
		amtool = p
	}
	rf, _ := loadRules(t)
	config := filepath.Join("..", "deploy", "alertmanager.yml")
	route := func(labels ...string) string {
		out, err := exec.Command(amtool, append([]string{"config", "routes", "test", "--config.file=" + config}, labels...)...).Output()
		if err != nil {
			t.Fatalf("amtool config routes test %v: %v\n%s", labels, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	for _, a := range rf.Alerts() {
		sev := a.Labels["severity"]
		if got, want := route("alertname="+a.Alert, "severity="+sev, "family=f", "instance=i"), wantReceiver[sev]; got != want {
			t.Errorf("%s (severity %s) goes to %q, want %q", a.Alert, sev, got, want)
		}
	}
	// And the check can fail: the retired severity pages nobody.
	if got := route("alertname=SlotExporterDown", "severity=page"); got == "pager" {
		t.Errorf("severity=page reaches the pager; the route must match critical only")
	}
}
