package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/release"
)

// releaseArgs are the release command's flags.
type releaseArgs struct {
	configFile, auditFile string
	family, user          string
	reason, operator      string
	dryRun, includeLive   bool
	value                 int64
}

// runRelease is `slot_exporter release`: the web button's preview and
// release, for scripts and runbooks, on the same code and audit file.
// Exit codes: 0 released (or previewed, with --dry-run); 1 refused or
// failed; 2 usage.
func runRelease(ctx context.Context, a releaseArgs, stdout, stderr io.Writer, logger *slog.Logger) int {
	usage := func(msg string) int {
		fmt.Fprintf(stderr, "%s release: %s\n", name, msg)
		return 2
	}
	switch {
	case a.auditFile == "":
		return usage("--release.audit-file is required: every preview and release is audited")
	case strings.TrimSpace(a.reason) == "" && !a.dryRun:
		return usage("--reason is required (or --dry-run to preview only)")
	}
	if a.operator == "" {
		a.operator = os.Getenv("USER")
	}
	if a.operator == "" {
		// Cron and containers often run without $USER: the account is
		// still a name.
		if u, err := user.Current(); err == nil {
			a.operator = u.Username
		}
	}
	if a.operator == "" {
		return usage("no operator: set --operator or $USER")
	}
	cfg, err := config.Load(a.configFile)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", a.configFile, err)
		return 1
	}
	rel, err := release.New(a.auditFile, logger)
	if err != nil {
		fmt.Fprintf(stderr, "%s release: %v\n", name, err)
		return 1
	}
	defer rel.Close()
	if err := rel.Configure(cfg); err != nil {
		fmt.Fprintf(stderr, "%s release: %v\n", name, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	plan, err := rel.Preview(ctx, release.Request{Source: "cli", Operator: a.operator, Family: a.family, User: a.user, IncludeLive: a.includeLive})
	if err != nil {
		fmt.Fprintf(stderr, "%s release: preview: %v\n", name, err)
		return 1
	}
	printPlan(stdout, plan, a.value)
	if plan.Refusal != "" {
		fmt.Fprintf(stderr, "%s release: nothing to release: %s\n", name, plan.Refusal)
		return 1
	}
	if a.dryRun {
		fmt.Fprintln(stdout, "dry run: nothing was written")
		return 0
	}
	out, err := rel.Execute(ctx, plan, release.Confirm{Operator: a.operator, Reason: strings.TrimSpace(a.reason), NewValue: a.value})
	for _, it := range out.Items {
		what := it.Member
		if what == "" {
			what = it.Value + " -> " + it.NewValue
		}
		line := fmt.Sprintf("%s %q %q", it.Outcome, it.Key, what)
		if it.Now != "" {
			line += fmt.Sprintf(" (now %q)", it.Now)
		}
		fmt.Fprintln(stdout, line)
	}
	fmt.Fprintf(stdout, "%s: %d removed or set, %d kept (changed since the preview), %d already gone; audited in %s\n",
		out.Result, out.Removed, out.Kept, out.Gone, rel.AuditFile())
	if err != nil {
		verb := "failed"
		if errors.Is(err, release.ErrRefused) {
			verb = "refused"
		}
		fmt.Fprintf(stderr, "%s release: %s: %v\n", name, verb, err)
		return 1
	}
	return 0
}

// printPlan writes a preview, one line per item, names quoted so that any
// byte in them stays visible.
func printPlan(w io.Writer, p *release.Plan, value int64) {
	fmt.Fprintf(w, "preview of family %s (%s), user %q, at %s (Redis time)\n", p.Family, p.Kind, p.User, release.FormatTime(float64(p.Now)))
	for _, k := range p.Keys {
		for _, m := range k.Remove {
			fmt.Fprintf(w, "would remove %q %q: %s, score %s, expiry %s\n", k.Key, m.Member, m.State, release.FormatScore(m.Score), release.FormatTime(m.Expiry))
		}
		for _, m := range k.Keep {
			fmt.Fprintf(w, "would keep %q %q: %s\n", k.Key, m.Member, m.State)
		}
		if p.Kind == config.KindCounter || p.Kind == config.KindRateLimit {
			fmt.Fprintf(w, "would set %q from %q to %d if unchanged\n", k.Key, k.Value, value)
		}
	}
}
