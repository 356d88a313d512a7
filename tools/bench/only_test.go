package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSpliceOutside: -only outside replaces the Targets table's outside
// rows and the outside section, says the section was measured alone, and
// leaves every other line as the full run wrote it; a file without those
// places is refused with what to do.
func TestSpliceOutside(t *testing.T) {
	full := strings.Join([]string{
		"# BENCH",
		"",
		"## Targets",
		"",
		"| target | measured | verdict |",
		"|---|---|---|",
		"| first row | 1 | met |",
		"| outside measurement: old CPU | +9.9% | met |",
		"| outside measurement: the application's p99 <= +0.5 ms | old | met |",
		"| outside measurement: the exporter's live heap | old | met |",
		"| memory flat | 2 | met |",
		"",
		"## Outside measurement: the binary, its defaults, beside an application",
		"",
		"old section text",
		"",
		"## The peer, side by side",
		"",
		"peer text",
		kindsBegin,
		"kinds",
		kindsEnd,
		"",
	}, "\n")
	path := filepath.Join(t.TempDir(), "BENCH.md")
	if err := os.WriteFile(path, []byte(full), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readOutsideFile(path); err != nil {
		t.Fatalf("the check refused a full run's file: %v", err)
	}
	res := &outsideResult{Sets: 1000000, Rate: 20000, Phase: 60, Ran: true,
		Alone: outsidePhase{RedisCPU: 0.10, P99: 0.6}, With: outsidePhase{RedisCPU: 0.17, P99: 0.7},
		Heap: 140e6, RSS: 240e6, FirstHeap: 130e6, FirstRSS: 230e6, FirstRead: 56}
	m := machine{Started: time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC), Load: "1.00 0.50 0.25"}
	if err := spliceOutside(path, &report{Outside: res}, m); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	for _, want := range []string{
		"| first row | 1 | met |\n| outside measurement: 1000000 slot sets",
		"10.0% → 17.0%: +7.0% of a core | met |",
		"0.60 → 0.70 ms: +0.10 ms | met |",
		"140.0 MB / 240.0 MB | met |\n| memory flat | 2 | met |\n",
		"measured alone (`go run ./tools/bench -only outside`) on 2026-12-06, the load average 1.00 0.50 0.25",
		"the rest of the file is from the full run.\n\n## The peer, side by side\n\npeer text\n" + kindsBegin,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the spliced file lacks %q:\n%s", want, got)
		}
	}
	for _, gone := range []string{"old CPU", "| old |", "old section text"} {
		if strings.Contains(got, gone) {
			t.Errorf("the spliced file still has %q:\n%s", gone, got)
		}
	}
	if n := strings.Count(got, outsideHeading); n != 1 {
		t.Errorf("%d outside sections after the splice, want 1", n)
	}

	for name, text := range map[string]string{
		"no rows":    "## Targets\n\n| first row | 1 | met |\n\n## Outside measurement: x\n\ntext\n",
		"no section": "## Targets\n\n| outside measurement: a | 1 | met |\n\n## The peer\n",
		"rows apart": "| outside measurement: a | 1 | met |\n| other | 2 | met |\n| outside measurement: b | 1 | met |\n\n## Outside measurement: x\n",
	} {
		p := filepath.Join(t.TempDir(), "BENCH.md")
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := readOutsideFile(p); err == nil {
			t.Errorf("%s: the check took a file that the splice cannot go into", name)
		}
	}
	if _, err := readOutsideFile(filepath.Join(t.TempDir(), "none.md")); err == nil {
		t.Error("the check took a file that does not exist")
	}
}
