// -only: one section of BENCH.md measured again alone and spliced into
// the file, every other section left as the full run wrote it.

package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"slices"
	"strings"
	"time"
)

var onlySection = flag.String("only", "", `run only this section and splice it into -out, leaving the rest of the file as it is ("kinds", "outside")`)

// runOnly runs the section -only names and splices it into o.out.
func runOnly(ctx context.Context, o *opts) error {
	switch *onlySection {
	case "kinds":
		md, err := kindsSection(ctx)
		if err != nil || md == "" {
			return err
		}
		if err := spliceKinds(o.out, strings.TrimPrefix(md, "\n")); err != nil {
			return err
		}
	case "outside":
		if o.outsideRate <= 0 {
			return fmt.Errorf("-only outside: -outside-rate is 0, nothing to measure")
		}
		// The splice needs the full run's file: the rows go into its
		// Targets table. Checked before the minutes of measuring.
		if _, err := readOutsideFile(o.out); err != nil {
			return err
		}
		m := describeMachine()
		n := slices.Max(o.sizes)
		log.Printf("outside measurement: the exporter binary at %d sets, the application writing %d sets/s", n, o.outsideRate)
		res := runOutside(ctx, n, o.outsideRate, time.Duration(o.outsidePhase)*time.Second, o.outsideLog)
		if err := spliceOutside(o.out, &report{Outside: res}, m); err != nil {
			return err
		}
	default:
		return fmt.Errorf("-only: unknown section %q (known: kinds, outside)", *onlySection)
	}
	log.Printf("wrote the %s section into %s", *onlySection, o.out)
	return nil
}

const (
	outsideRowPrefix = "| outside measurement"
	outsideHeading   = "## Outside measurement:"
)

// outsideFile is a full run's report cut around its outside measurement:
// head up to the Targets table's outside rows, between them and the
// outside section, tail after that section.
type outsideFile struct{ head, between, tail string }

// readOutsideFile reads the report at path and finds its outside rows and
// section, or says why the splice cannot go into it.
func readOutsideFile(path string) (outsideFile, error) {
	old, err := os.ReadFile(path)
	if err != nil {
		return outsideFile{}, fmt.Errorf("-only outside splices into the report of a full run: %w", err)
	}
	lines := strings.SplitAfter(string(old), "\n")
	first, last := -1, -1
	for i, l := range lines {
		if strings.HasPrefix(l, outsideRowPrefix) {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	if first < 0 {
		return outsideFile{}, fmt.Errorf("%s has no outside measurement rows in its Targets table: run `make bench` whole first", path)
	}
	for _, l := range lines[first : last+1] {
		if !strings.HasPrefix(l, outsideRowPrefix) {
			return outsideFile{}, fmt.Errorf("%s: the outside measurement rows of its Targets table are not together", path)
		}
	}
	rest := strings.Join(lines[last+1:], "")
	i := strings.Index(rest, outsideHeading)
	if i < 0 {
		return outsideFile{}, fmt.Errorf("%s has no %q section after its Targets table: run `make bench` whole first", path, outsideHeading)
	}
	end := len(rest)
	if j := strings.Index(rest[i:], "\n## "); j >= 0 {
		end = i + j + 1
	}
	if k := strings.Index(rest[i:], kindsBegin); k >= 0 && i+k < end {
		end = i + k
	}
	return outsideFile{head: strings.Join(lines[:first], ""), between: rest[:i], tail: rest[end:]}, nil
}

// spliceOutside puts rep's outside measurement into the report at path:
// its rows in place of the Targets table's outside rows, its section in
// place of the old one, with a line saying it was measured alone (m).
func spliceOutside(path string, rep *report, m machine) error {
	file, err := readOutsideFile(path)
	if err != nil {
		return err
	}
	var rows, section strings.Builder
	rep.outsideTargets(func(f string, a ...any) { fmt.Fprintf(&rows, f, a...) })
	rep.outsideSection(func(f string, a ...any) { fmt.Fprintf(&section, f, a...) })
	fmt.Fprintf(&section, "This section and its rows of the Targets table were measured alone (`go run ./tools/bench -only outside`) on %s, the load average %s at the start; the rest of the file is from the full run.\n\n",
		m.Started.Format("2006-01-02"), m.Load)
	return os.WriteFile(path, []byte(file.head+rows.String()+file.between+section.String()+file.tail), 0o644)
}
