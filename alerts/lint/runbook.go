package lint

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// RunbookBase is where every alert's runbook_url points, followed by
// "#" and the GitHub anchor of the runbook section named after the alert.
const RunbookBase = "https://github.com/slotexporter/slot_exporter/blob/main/docs/runbook.md"

// GitHubAnchor returns the anchor GitHub generates for a Markdown heading:
// lower case, spaces to hyphens, punctuation other than - and _ dropped.
func GitHubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// RunbookAnchors maps the anchor of every Markdown heading of md (outside
// fenced code blocks) to the heading text. Repeated anchors get GitHub's -1,
// -2 suffixes.
func RunbookAnchors(md []byte) map[string]string {
	out := map[string]string{}
	seen := map[string]int{}
	fenced := false
	sc := bufio.NewScanner(bytes.NewReader(md))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.TrimLeft(line, "#")
		if !strings.HasPrefix(h, " ") {
			continue
		}
		h = strings.TrimSpace(h)
		a := GitHubAnchor(h)
		if n := seen[a]; n > 0 {
			seen[a]++
			a = fmt.Sprintf("%s-%d", a, n)
		} else {
			seen[a] = 1
		}
		out[a] = h
	}
	return out
}

// severityListRE finds the runbook's list of the alerts that are not
// warnings: "Critical: A, B. Info: C. Everything else is a warning."
// Whoever sets up on-call routing from it must not read a paging alert as a
// ticket, and it went stale once when two critical alerts were added.
var severityListRE = regexp.MustCompile(`\nCritical:\s+([^.]*)\.\s+Info:\s+([^.]*)\.\s+Everything else is a warning\.`)

// checkRunbookSeverities checks that the runbook's severity list names
// exactly the critical and info alerts of rf.
func checkRunbookSeverities(rf *RuleFile, runbook []byte) []error {
	m := severityListRE.FindSubmatch(runbook)
	if m == nil {
		return []error{fmt.Errorf(`docs/runbook.md has no list "Critical: ... Info: ... Everything else is a warning."`)}
	}
	var errs []error
	for i, sev := range []string{"critical", "info"} {
		var listed, want []string
		for _, name := range strings.Split(string(m[i+1]), ",") {
			listed = append(listed, strings.TrimSpace(name))
		}
		for _, a := range rf.Alerts() {
			if a.Labels["severity"] == sev {
				want = append(want, a.Alert)
			}
		}
		slices.Sort(listed)
		slices.Sort(want)
		if !slices.Equal(listed, want) {
			has := strings.Join(want, ", ")
			if has == "" {
				has = "none"
			}
			errs = append(errs, fmt.Errorf("docs/runbook.md lists as %s %s; the rule file has %s", sev, strings.Join(listed, ", "), has))
		}
	}
	return errs
}
