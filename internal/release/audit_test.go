package release

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
)

// toDevFull swaps the audit file for a link to /dev/full (every write
// fails with ENOSPC, opening succeeds), and returns a func that puts the
// real file back.
func toDevFull(t *testing.T, path string) (restore func()) {
	t.Helper()
	aside := path + ".aside"
	if err := os.Rename(path, aside); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/full", path); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(aside, path); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}
}

// TestAuditFailsAtEveryPoint: the audit file (a link to the real
// /dev/full) fails before the preview, between the preview and the
// confirm, and during the outcome write, for the package API and the CLI.
// Before the outcome, nothing is written to Redis; during it, the release
// stands, says so, and the intent record and the log say what was
// attempted.
func TestAuditFailsAtEveryPoint(t *testing.T) {
	ctx := context.Background()
	dead := func(f *fixture, user string) string {
		return f.slotSet(t, user, map[string]float64{"d1": float64(f.now(t) - 60_000), "d2": float64(f.now(t) - 61_000)})
	}

	t.Run("before the preview", func(t *testing.T) {
		f := newFixture(t)
		key := dead(f, "a1")
		restore := toDevFull(t, f.audit)
		p, err := f.rel.Preview(ctx, req("streams", "a1"))
		restore()
		if err == nil || !strings.Contains(err.Error(), "no space left on device") {
			t.Fatalf("preview with /dev/full as the audit file: %v, want ENOSPC", err)
		}
		// A caller that went on anyway is stopped at the intent record.
		restore = toDevFull(t, f.audit)
		out, err := f.rel.Execute(ctx, p, confirm("disk full"))
		restore()
		if err == nil || out.Result != ResultFailed || out.Audited || !strings.Contains(err.Error(), "nothing was written to Redis") {
			t.Errorf("release: %v, %+v; want failed, not audited", err, out)
		}
		if n := f.admin.ZCard(ctx, key).Val(); n != 2 {
			t.Errorf("%d members left, want 2: a release went through unaudited", n)
		}
	})

	t.Run("between preview and confirm", func(t *testing.T) {
		f := newFixture(t)
		key := dead(f, "a2")
		p, err := f.rel.Preview(ctx, req("streams", "a2"))
		if err != nil || p.Refusal != "" {
			t.Fatal(err, p.Refusal)
		}
		restore := toDevFull(t, f.audit)
		out, err := f.rel.Execute(ctx, p, confirm("disk full"))
		restore()
		if err == nil || out.Result != ResultFailed || out.Removed != 0 || out.Audited || !strings.Contains(err.Error(), "intent record") {
			t.Errorf("release: %v, %+v; want failed, nothing removed, not audited", err, out)
		}
		if n := f.admin.ZCard(ctx, key).Val(); n != 2 {
			t.Errorf("%d members left, want 2: a release went through unaudited", n)
		}
		if recs := f.records(t); len(recs) != 1 || recs[0].Action != ActionPreview {
			t.Errorf("audit lines %+v, want the preview only", recs)
		}
	})

	t.Run("during the outcome write", func(t *testing.T) {
		f := newFixture(t)
		logs := exportertest.NewLogs()
		f.rel.logger = logs.Logger()
		key := dead(f, "a3")
		p, err := f.rel.Preview(ctx, req("streams", "a3"))
		if err != nil || p.Refusal != "" {
			t.Fatal(err, p.Refusal)
		}
		var restore func()
		f.rel.beforeOutcome = func() { restore = toDevFull(t, f.audit) }
		out, err := f.rel.Execute(ctx, p, confirm("disk fills mid-release"))
		restore()
		if !errors.Is(err, ErrUnaudited) || out.Result != ResultReleased || out.Removed != 2 || out.Audited {
			t.Fatalf("release: %v, %+v; want released (2 removed), ErrUnaudited", err, out)
		}
		if n := f.admin.ZCard(ctx, key).Val(); n != 0 {
			t.Errorf("%d members left, want 0", n)
		}
		recs := f.records(t)
		if len(recs) != 2 || recs[1].Action != ActionRelease || recs[1].Result != ResultStarted || len(recs[1].Items) != 2 ||
			recs[1].Items[0].Outcome != WouldRemove || recs[1].Reason != "disk fills mid-release" {
			t.Errorf("audit lines %+v, want the preview and the intent record with both members", recs)
		}
		if lines := logs.Lines("audit file write failed", "result=released", "items=2"); len(lines) != 1 {
			t.Errorf("log has %d lines with the unaudited outcome, want 1:\n%s", len(lines), logs.String())
		}
	})

	t.Run("cli", func(t *testing.T) {
		f := newFixture(t)
		key := dead(f, "a4")
		restore := toDevFull(t, f.audit)
		var out, errb strings.Builder
		code := RunCLI(ctx, CLIArgs{ConfigFile: f.cfgFile, AuditFile: f.audit, Family: "streams", User: "a4", Reason: "r", Operator: "ops"},
			&out, &errb, exportertest.Quiet())
		restore()
		if code != 1 || !strings.Contains(errb.String(), "no space left on device") {
			t.Errorf("exit %d, %q", code, errb.String())
		}
		if n := f.admin.ZCard(ctx, key).Val(); n != 2 {
			t.Errorf("%d members left, want 2", n)
		}
	})
}
