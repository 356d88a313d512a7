package main

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// bracketedScenario is a change-driven phase whose verdicts differ
// whether it is set against the application alone before it or against
// the mean of before and after: 17% of a core with the exporter, 5%
// before and 11% after it, so a share of 9% (met) against the mean and
// 12% (missed) against the phase before; the busiest node's 9% and 11%;
// p99 0.90 ms with it, 0.35 and 0.55 ms without, so +0.45 ms (met)
// against their mean and +0.55 (missed) against 0.35.
func bracketedScenario() changeScenario {
	return changeScenario{Name: "default settings, 10% written", Frac: 0.1, Phase: 60,
		CPUAlone: 0.05, CPUWith: 0.17, CPUAloneAfter: 0.11,
		NodesAlone: []float64{0.01, 0.02, 0.01}, NodesWith: []float64{0.05, 0.06, 0.12}, NodesAloneAfter: []float64{0.03, 0.04, 0.05},
		P99Alone: 0.35, P99With: 0.90, P99AloneAfter: 0.55,
		Heap: 100e6, RSS: 200e6, FirstRead: 30, FirstShare: 0.11, IdleShare: 0.01}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// TestChangeBracket: the phase with the exporter is set against the mean
// of the application alone before and after it, for Redis's CPU, each
// node's and the probe's p99; against the phase before alone where there
// was none after (the full-read row, a JSON of an older run).
func TestChangeBracket(t *testing.T) {
	sc := bracketedScenario()
	if got := sc.share(); !near(got, 0.09) {
		t.Errorf("share %.4f, want 0.09 (0.17 less the mean of 0.05 and 0.11)", got)
	}
	if got := sc.p99Rise(); !near(got, 0.45) {
		t.Errorf("p99 rise %.4f ms, want 0.45 (0.90 less the mean of 0.35 and 0.55)", got)
	}
	per, busiest := sc.nodeShares()
	for i, want := range []float64{0.03, 0.03, 0.09} {
		if !near(per[i], want) {
			t.Errorf("node %d: share %.4f, want %.2f", i, per[i], want)
		}
	}
	if !near(busiest, 0.09) {
		t.Errorf("busiest node %.4f, want 0.09", busiest)
	}

	old := sc
	old.CPUAloneAfter, old.NodesAloneAfter, old.P99AloneAfter = 0, nil, 0
	if got := old.share(); !near(got, 0.12) {
		t.Errorf("no phase after: share %.4f, want 0.12 (against the phase before)", got)
	}
	if got := old.p99Rise(); !near(got, 0.55) {
		t.Errorf("no phase after: p99 rise %.4f ms, want 0.55", got)
	}
	if _, b := old.nodeShares(); !near(b, 0.11) {
		t.Errorf("no phase after: busiest node %.4f, want 0.11 (0.12 less 0.01)", b)
	}
}

// TestChangeReportBracket: the targets' verdicts, on one server and on a
// cluster, judge the mean of before and after, and the change-driven
// table shows before, with and after.
func TestChangeReportBracket(t *testing.T) {
	full := changeScenario{Name: "full read", Frac: 0.1, Full: true, Phase: 60, CPUAlone: 0.05, CPUWith: 0.60, P99Alone: 0.4, P99With: 0.6}
	ch := &changesResult{Scenarios: []changeScenario{full, bracketedScenario()}}
	rep := &report{Opts: &opts{sizes: []int{1000000}, phase: 60}, Changes: ch,
		Cluster: &clusterResult{Masters: 3, Sets: 1000000, Changes: changesResult{Scenarios: []changeScenario{bracketedScenario()}}}}
	var b strings.Builder
	p := func(f string, a ...any) { fmt.Fprintf(&b, f, a...) }
	rep.changeTargets(p)
	rep.clusterTargets(p)
	targets := b.String()
	for _, want := range []string{
		"| with the exporter less the mean of the application alone before and after: 10%: 9.0% | met |",
		"| the mean of the application alone before and after → with the exporter: 10%: 0.45 → 0.90 ms | met |",
		"per node, by share of sets written per interval: 10%: 3.0% / 3.0% / 9.0%; over all nodes together 9.0% | met |",
	} {
		if !strings.Contains(targets, want) {
			t.Errorf("the targets lack %q:\n%s", want, targets)
		}
	}
	if strings.Contains(targets, "missed") {
		t.Errorf("a row missed that the mean of before and after meets:\n%s", targets)
	}

	b.Reset()
	changeTable(p, ch.Scenarios)
	table := b.String()
	for _, want := range []string{
		"| Redis CPU, application alone before | with the exporter | application alone after | exporter's share of a core |",
		"| p99 alone before | p99 with the exporter | p99 alone after |",
		"| default settings, 10% written | 5.0% | 17.0% | 11.0% | 9.0% |",
		"| 0.35 ms | 0.90 ms | 0.55 ms |",
		// The full-read row has no phase after.
		"| full read | 5.0% | 60.0% | - | 55.0% |",
		"| 0.40 ms | 0.60 ms | - |",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("the table lacks %q:\n%s", want, table)
		}
	}
	head, _, _ := strings.Cut(table, "\n")
	rule, _, _ := strings.Cut(strings.SplitN(table, "\n", 2)[1], "\n")
	for _, row := range strings.Split(strings.TrimSpace(table), "\n") {
		if n := strings.Count(row, "|"); n != strings.Count(head, "|") || n != strings.Count(rule, "|") {
			t.Errorf("%d cells' bars in %q, the header has %d, the rule %d", n, row, strings.Count(head, "|"), strings.Count(rule, "|"))
		}
	}
}
