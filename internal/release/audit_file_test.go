//go:build linux

package release

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
)

// auditChildEnv names the audit file a child process of
// TestAuditKeepsEveryLineWhole appends to, under the file size limit in
// auditLimitEnv: a limit set in the test process would cut every other
// test's files too.
const (
	auditChildEnv = "SLOT_EXPORTER_AUDIT_CHILD"
	auditLimitEnv = "SLOT_EXPORTER_AUDIT_LIMIT"
)

func auditRecord(reason string) *Record {
	return &Record{Action: ActionRelease, Source: "cli", Operator: "ops", Family: "streams", User: "u1",
		Keys: []string{}, Items: []Item{}, Reason: reason, Result: ResultStarted}
}

// TestAuditKeepsEveryLineWhole: whatever fails, every line of the audit
// file is one whole record, and a pipe in its place is refused at once.
func TestAuditKeepsEveryLineWhole(t *testing.T) {
	if path := os.Getenv(auditChildEnv); path != "" {
		limit, _ := strconv.ParseUint(os.Getenv(auditLimitEnv), 10, 64)
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: limit, Max: limit}); err != nil {
			fmt.Println("setrlimit:", err)
			os.Exit(2)
		}
		a := &Audit{path: path}
		fmt.Println("append:", a.Append(auditRecord(strings.Repeat("r", 2000))))
		os.Exit(0)
	}
	dir := t.TempDir()

	t.Run("a record cut off by the file size limit is rolled back", func(t *testing.T) {
		path := filepath.Join(dir, "limit.jsonl")
		a, err := OpenAudit(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Append(auditRecord("first")); err != nil {
			t.Fatal(err)
		}
		before, _ := os.ReadFile(path)
		cmd := exec.Command(os.Args[0], "-test.run=^TestAuditKeepsEveryLineWhole$")
		cmd.Env = append(os.Environ(), auditChildEnv+"="+path, auditLimitEnv+"="+strconv.Itoa(len(before)+500))
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "append: audit file:") || !strings.Contains(string(out), "file too large") {
			t.Fatalf("the child's append under a limit of %d bytes: %v\n%s", len(before)+500, err, out)
		}
		after, _ := os.ReadFile(path)
		if string(after) != string(before) {
			t.Fatalf("after the failed append the file holds %q, want it as before: %q", after, before)
		}
		if err := a.Append(auditRecord("third")); err != nil {
			t.Fatal(err)
		}
		recs := exportertest.JSONLines[Record](t, path)
		if len(recs) != 2 || recs[0].Reason != "first" || recs[1].Reason != "third" {
			t.Errorf("records %+v, want first and third", recs)
		}
	})

	t.Run("a line cut off before stays a line of its own", func(t *testing.T) {
		path := filepath.Join(dir, "cut.jsonl")
		exportertest.WriteFile(t, path, `{"time":"2026-12-0`)
		a, err := OpenAudit(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Append(auditRecord("after")); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(path)
		lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		var r Record
		if len(lines) != 2 || lines[0] != `{"time":"2026-12-0` || json.Unmarshal([]byte(lines[1]), &r) != nil || r.Reason != "after" {
			t.Errorf("file %q, want the cut-off line, then the record whole on a line of its own", b)
		}
	})

	t.Run("a named pipe is refused without blocking", func(t *testing.T) {
		path := filepath.Join(dir, "pipe.jsonl")
		a, err := OpenAudit(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(path, 0o600); err != nil {
			t.Fatal(err)
		}
		done := make(chan [2]error, 1)
		go func() {
			_, oerr := OpenAudit(path)
			done <- [2]error{oerr, a.Append(auditRecord("into a pipe"))}
		}()
		select {
		case errs := <-done:
			for i, err := range errs {
				if err == nil || !strings.Contains(err.Error(), "is not a regular file") {
					t.Errorf("%s on a named pipe: %v, want it refused as not a regular file", [2]string{"OpenAudit", "Append"}[i], err)
				}
			}
		case <-time.After(time.Minute):
			// Not a speed target: a blocking open never returns.
			t.Fatal("the audit is blocked opening a named pipe that nothing reads")
		}
	})

}
