package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json), with the build
// events go test writes since Go 1.24.
type event struct {
	Action     string
	Package    string
	Test       string
	Elapsed    float64
	Output     string
	ImportPath string // build-output and build-fail
}

// line is one line a test wrote.
type line struct{ test, text string }

// timing is how long one top-level test ran.
type timing struct {
	pkg, test string
	seconds   float64
}

// report keeps what it must print later: a test's output is only shown if
// the test fails, as go test does without -v.
type report struct {
	w       io.Writer
	slowest int
	events  int

	// held is the output of the running tests, by package and top-level
	// test; a subtest's output goes with its top-level test, in order.
	held map[string]map[string][]line

	passed, failed, skipped int
	timings                 []timing
	failedPkgs              []string // packages whose run or build failed
	buildFailed             []string
}

func newReport(w io.Writer, slowest int) *report {
	return &report{w: w, slowest: slowest, held: map[string]map[string][]line{}}
}

// topLevel is the top-level test a test or subtest belongs to.
func topLevel(test string) string {
	if i := strings.IndexByte(test, '/'); i >= 0 {
		return test[:i]
	}
	return test
}

// read handles every line of r. Lines may be long (a race report, a
// goroutine dump), so they are read whole.
func (r *report) read(in io.Reader) error {
	br := bufio.NewReaderSize(in, 1<<16)
	for {
		text, err := br.ReadBytes('\n')
		if len(text) > 0 {
			r.line(text)
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func (r *report) line(text []byte) {
	var e event
	trimmed := bytes.TrimSpace(text)
	if len(trimmed) == 0 || trimmed[0] != '{' || json.Unmarshal(trimmed, &e) != nil || e.Action == "" {
		// go's own words (a module error, a vet failure) come as text.
		r.w.Write(text)
		if text[len(text)-1] != '\n' {
			io.WriteString(r.w, "\n")
		}
		return
	}
	r.events++
	r.event(e)
}

func (r *report) event(e event) {
	switch e.Action {
	case "build-output":
		io.WriteString(r.w, e.Output)
		return
	case "build-fail":
		r.buildFailed = append(r.buildFailed, e.ImportPath)
		return
	}
	if e.Test == "" {
		r.packageEvent(e)
		return
	}
	top := topLevel(e.Test)
	switch e.Action {
	case "output":
		// go test -json runs the binary verbosely; plain go test shows no
		// progress lines, only what the test wrote.
		if isProgress(e.Output) {
			return
		}
		tests := r.held[e.Package]
		if tests == nil {
			tests = map[string][]line{}
			r.held[e.Package] = tests
		}
		tests[top] = append(tests[top], line{e.Test, e.Output})
	case "pass":
		r.passed++
		r.done(e, top, false)
	case "skip":
		r.skipped++
		r.done(e, top, false)
	case "fail":
		r.failed++
		r.done(e, top, true)
	}
}

func isProgress(line string) bool {
	for _, p := range []string{"=== RUN ", "=== PAUSE ", "=== CONT "} {
		if strings.HasPrefix(line, p) {
			return true
		}
	}
	return false
}

// done ends a test. A top-level test's held output is printed if it failed
// and dropped if not. A failed subtest's output stays with its top-level
// test, which fails with it; a subtest that passed is dropped from it, as
// go test does not show it.
func (r *report) done(e event, top string, failed bool) {
	if e.Test != top {
		if tests := r.held[e.Package]; !failed && tests != nil {
			tests[top] = slices.DeleteFunc(tests[top], func(l line) bool {
				return l.test == e.Test || strings.HasPrefix(l.test, e.Test+"/")
			})
		}
		return
	}
	if e.Action != "skip" {
		r.timings = append(r.timings, timing{e.Package, e.Test, e.Elapsed})
	}
	if failed {
		r.flush(e.Package, top)
	}
	delete(r.held[e.Package], top)
}

func (r *report) flush(pkg, top string) {
	for _, l := range r.held[pkg][top] {
		io.WriteString(r.w, l.text)
	}
}

func (r *report) packageEvent(e event) {
	switch e.Action {
	case "output":
		// A passing test binary's PASS is not shown by go test either.
		if e.Output != "PASS\n" {
			io.WriteString(r.w, e.Output)
		}
	case "fail":
		// Tests that never ended (a timeout's panic, a crash): what they
		// wrote is what explains the failure.
		tests := r.held[e.Package]
		names := make([]string, 0, len(tests))
		for name := range tests {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			fmt.Fprintf(r.w, "=== %s did not end; its output:\n", name)
			r.flush(e.Package, name)
		}
		r.failedPkgs = append(r.failedPkgs, e.Package)
		delete(r.held, e.Package)
	case "pass", "skip":
		delete(r.held, e.Package)
	}
}

// summary prints the slowest tests and the counts, and says whether
// everything passed.
func (r *report) summary() bool {
	if r.slowest > 0 && len(r.timings) > 0 {
		ts := slices.Clone(r.timings)
		slices.SortStableFunc(ts, func(a, b timing) int {
			switch {
			case a.seconds > b.seconds:
				return -1
			case a.seconds < b.seconds:
				return 1
			}
			return 0
		})
		ts = ts[:min(r.slowest, len(ts))]
		fmt.Fprintf(r.w, "\nslowest %d tests:\n", len(ts))
		for _, t := range ts {
			fmt.Fprintf(r.w, "%9.2fs  %s  %s\n", t.seconds, t.test, t.pkg)
		}
	}
	ok := true
	if len(r.buildFailed) > 0 {
		fmt.Fprintf(r.w, "\nbuild failed: %s\n", strings.Join(r.buildFailed, ", "))
		ok = false
	}
	if len(r.failedPkgs) > 0 {
		fmt.Fprintf(r.w, "\nFAIL: %s\n", strings.Join(r.failedPkgs, ", "))
		ok = false
	}
	if r.events == 0 {
		fmt.Fprintln(r.w, "\nno test event read: did go test run with -json?")
		ok = false
	}
	if r.failed > 0 {
		ok = false
	}
	fmt.Fprintf(r.w, "\n%d passed, %d failed", r.passed, r.failed)
	if r.skipped > 0 {
		fmt.Fprintf(r.w, ", %d skipped", r.skipped)
	}
	fmt.Fprintln(r.w)
	return ok
}
