package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The samples in testdata are `go test -json` of a small module (Go 1.26):
// good (a pass, a skip, subtests), bad (a failing subtest), panics (a test
// that panics), racy (-race, a data race), broken (a test file that does
// not compile), nosuch (a package that does not exist) and all (good and
// bad in one run, their events interleaved). Paths in them are rewritten to
// /src/sample and /goroot.

func runSample(t *testing.T, name string) (string, bool) {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out strings.Builder
	r := newReport(&out, 10)
	if err := r.read(f); err != nil {
		t.Fatal(err)
	}
	ok := r.summary()
	return out.String(), ok
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

func TestSamples(t *testing.T) {
	for _, c := range []struct {
		sample  string
		ok      bool
		last    string
		has     []string // lines (or parts of lines) the report must show
		hasNot  []string // what a plain go test would not show either
		slowest []string // the tests of the slowest list, in order
	}{
		{
			sample: "good", ok: true, last: "4 passed, 0 failed, 1 skipped",
			has:    []string{"ok  \texample.com/sample/good"},
			hasNot: []string{"only shown when it fails", "=== RUN", "PASS\n", "FAIL"},
		},
		{
			sample: "bad", ok: false, last: "2 passed, 2 failed",
			has: []string{
				"bad_test.go:9: got 1, want 2", "--- FAIL: TestTable/wrong", "--- FAIL: TestTable (",
				"FAIL\texample.com/sample/bad", "FAIL: example.com/sample/bad",
			},
			hasNot: []string{"--- PASS", "=== RUN", "TestFine ("},
		},
		{
			sample: "panics", ok: false, last: "1 passed, 1 failed",
			has: []string{
				"panic: assignment to entry in nil map", "/src/sample/panics/panics_test.go:9",
				"--- FAIL: TestPanics", "FAIL\texample.com/sample/panics",
			},
		},
		{
			sample: "racy", ok: false, last: "0 passed, 1 failed",
			has: []string{
				"WARNING: DATA RACE", "/src/sample/racy/racy_test.go:8",
				"race detected during execution of test", "--- FAIL: TestRace",
			},
		},
		{
			sample: "broken", ok: false, last: "0 passed, 0 failed",
			has: []string{
				`broken_test.go:5:49: cannot use "not an int"`, "FAIL\texample.com/sample/broken [build failed]",
				"build failed: example.com/sample/broken [example.com/sample/broken.test]",
			},
		},
		{
			sample: "nosuch", ok: false, last: "0 passed, 0 failed",
			has: []string{"nosuch: directory not found", "build failed: ./nosuch"},
		},
		{
			sample: "all", ok: false, last: "6 passed, 2 failed, 1 skipped",
			has:    []string{"ok  \texample.com/sample/good", "got 1, want 2", "FAIL: example.com/sample/bad"},
			hasNot: []string{"only shown when it fails", "FAIL: example.com/sample/good"},
		},
	} {
		t.Run(c.sample, func(t *testing.T) {
			out, ok := runSample(t, c.sample)
			if ok != c.ok {
				t.Errorf("passed: %v, want %v", ok, c.ok)
			}
			if got := lastLine(out); got != c.last {
				t.Errorf("last line %q, want %q", got, c.last)
			}
			for _, s := range c.has {
				if !strings.Contains(out, s) {
					t.Errorf("report without %q", s)
				}
			}
			for _, s := range c.hasNot {
				if strings.Contains(out, s) {
					t.Errorf("report shows %q", s)
				}
			}
			if t.Failed() {
				t.Logf("report:\n%s", out)
			}
		})
	}
}

// jsonEvent writes one line of go test -json.
func jsonEvent(action, pkg, test string, elapsed float64, output string) string {
	return fmt.Sprintf(`{"Action":%q,"Package":%q,"Test":%q,"Elapsed":%g,"Output":%q}`+"\n", action, pkg, test, elapsed, output)
}

// TestSlowest: the slowest top-level tests, slowest first, at most as many
// as asked, with package and seconds; subtests are in their parent's time.
func TestSlowest(t *testing.T) {
	var in strings.Builder
	for i := range 12 {
		in.WriteString(jsonEvent("pass", "p/a", fmt.Sprintf("TestA%02d", i), float64(i), ""))
	}
	in.WriteString(jsonEvent("pass", "p/b", "TestB/sub", 99, ""))
	in.WriteString(jsonEvent("pass", "p/b", "TestB", 100, ""))
	in.WriteString(jsonEvent("skip", "p/b", "TestSkipped", 500, ""))
	in.WriteString(jsonEvent("pass", "p/a", "", 1, ""))
	in.WriteString(jsonEvent("pass", "p/b", "", 1, ""))
	var out strings.Builder
	r := newReport(&out, 3)
	if err := r.read(strings.NewReader(in.String())); err != nil {
		t.Fatal(err)
	}
	if !r.summary() {
		t.Errorf("a run where everything passed failed:\n%s", out.String())
	}
	want := "\nslowest 3 tests:\n" +
		"   100.00s  TestB  p/b\n" +
		"    11.00s  TestA11  p/a\n" +
		"    10.00s  TestA10  p/a\n" +
		"\n14 passed, 0 failed, 1 skipped\n"
	if out.String() != want {
		t.Errorf("report:\n%s\nwant:\n%s", out.String(), want)
	}
}

// TestNotJSON: go's own errors pass through, and a run without a single
// test event (go test could not start) is a failure.
func TestNotJSON(t *testing.T) {
	var out strings.Builder
	r := newReport(&out, 10)
	if err := r.read(strings.NewReader("go: go.mod file not found in current directory or any parent directory")); err != nil {
		t.Fatal(err)
	}
	if r.summary() {
		t.Error("no test event read, and the report passed")
	}
	if !strings.HasPrefix(out.String(), "go: go.mod file not found in current directory or any parent directory\n") {
		t.Errorf("report:\n%s", out.String())
	}
}

// TestUnfinished: a package that fails while a test runs (a timeout's
// panic) shows what that test wrote.
func TestUnfinished(t *testing.T) {
	in := jsonEvent("output", "p", "TestHangs", 0, "=== RUN   TestHangs\n") +
		jsonEvent("output", "p", "TestHangs", 0, "    hangs_test.go:9: waiting for the sweep\n") +
		jsonEvent("output", "p", "", 0, "panic: test timed out after 14m0s\n") +
		jsonEvent("fail", "p", "", 840, "")
	var out strings.Builder
	r := newReport(&out, 10)
	if err := r.read(strings.NewReader(in)); err != nil {
		t.Fatal(err)
	}
	if r.summary() {
		t.Error("a failed package passed")
	}
	for _, s := range []string{"panic: test timed out after 14m0s", "TestHangs did not end", "waiting for the sweep", "FAIL: p"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("report without %q:\n%s", s, out.String())
		}
	}
}
