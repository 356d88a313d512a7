package release

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
)

// TestCLI: `slot_exporter release` previews, releases and audits as the
// web button does, with the operator from --operator or $USER.
func TestCLI(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	now := f.now(t)
	key := f.slotSet(t, "u9", map[string]float64{"dead": float64(now - 60_000), "live": float64(now + 110_000)})
	cli := func(a CLIArgs) (int, string, string) {
		var out, errb bytes.Buffer
		a.ConfigFile, a.Family = f.cfgFile, "streams"
		if a.AuditFile == "" {
			a.AuditFile = f.audit
		}
		code := RunCLI(ctx, a, &out, &errb, exportertest.Quiet())
		return code, out.String(), errb.String()
	}

	if code, _, errs := cli(CLIArgs{AuditFile: t.TempDir(), User: "u9", DryRun: true, Operator: "x"}); code != 1 || !strings.Contains(errs, "audit file") {
		t.Errorf("an audit file that is a directory: exit %d, %q", code, errs)
	}
	if code, _, errs := cli(CLIArgs{User: "u9", Operator: "x"}); code != 2 || !strings.Contains(errs, "--reason is required") {
		t.Errorf("no reason: exit %d, %q", code, errs)
	}

	code, out, errs := cli(CLIArgs{User: "u9", DryRun: true, Operator: "ops-bob"})
	if code != 0 || !strings.Contains(out, `would remove "joishi:streams:{u9}" "dead": expired`) || !strings.Contains(out, `would keep "joishi:streams:{u9}" "live": live`) {
		t.Fatalf("dry run: exit %d\n%s%s", code, out, errs)
	}
	if n := f.admin.ZCard(ctx, key).Val(); n != 2 {
		t.Fatalf("a dry run wrote to Redis: %d members", n)
	}

	t.Setenv("USER", "night-oncall")
	code, out, errs = cli(CLIArgs{User: "u9", Reason: "runbook step 4"})
	if code != 0 || !strings.Contains(out, `removed "joishi:streams:{u9}" "dead"`) {
		t.Fatalf("release: exit %d\n%s%s", code, out, errs)
	}
	if left := f.admin.ZRange(ctx, key, 0, -1).Val(); len(left) != 1 || left[0] != "live" {
		t.Errorf("left in Redis: %v", left)
	}
	recs := f.records(t)
	if len(recs) != 4 {
		t.Fatalf("%d audit lines, want 4: the dry run's preview, then the release's preview, intent and outcome", len(recs))
	}
	if r := recs[0]; r.Source != "cli" || r.Operator != "ops-bob" || r.Action != ActionPreview || r.Result != ResultPreviewed {
		t.Errorf("dry run line %+v", r)
	}
	if r := recs[3]; r.Source != "cli" || r.Operator != "night-oncall" || r.Action != ActionRelease || r.Result != ResultReleased || r.Reason != "runbook step 4" {
		t.Errorf("release line %+v", r)
	}

	code, _, errs = cli(CLIArgs{User: "u9", Reason: "again"})
	if code != 1 || !strings.Contains(errs, "nothing to release") {
		t.Errorf("nothing left to release: exit %d, %q", code, errs)
	}

	// A member longer than a release reads is listed cut, with why.
	f.slotSet(t, "u9", map[string]float64{strings.Repeat("m", 1000): float64(now - 60_000), "dead2": float64(now - 60_000)})
	code, out, errs = cli(CLIArgs{User: "u9", DryRun: true, Operator: "ops-bob"})
	want := `would keep "joishi:streams:{u9}" "` + strings.Repeat("m", MaxHeadBytes) + `"... (first 200 of 1000 bytes): expired, longer than 512 bytes, which a release does not remove`
	if code != 0 || !strings.Contains(out, want) {
		t.Errorf("dry run with a 1000-byte member: exit %d, want a line starting %q\n%s%s", code, want, out, errs)
	}
}
