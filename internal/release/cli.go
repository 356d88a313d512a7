package release

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
)

// CLIArgs are the release command's flags.
type CLIArgs struct {
	ConfigFile, AuditFile string
	Family, User          string
	Reason, Operator      string
	DryRun, IncludeLive   bool
	Value                 int64
}

// cmdName prefixes the command's messages.
const cmdName = "slot_exporter release"

// RunCLI is `slot_exporter release`: the web button's preview and
// release, for scripts and runbooks, on the same code and audit file.
// Exit codes: 0 released (or previewed, with --dry-run); 1 refused or
// failed; 2 usage.
func RunCLI(ctx context.Context, a CLIArgs, stdout, stderr io.Writer, logger *slog.Logger) int {
	usage := func(msg string) int {
		fmt.Fprintf(stderr, "%s: %s\n", cmdName, msg)
		return 2
	}
	switch {
	case a.AuditFile == "":
		return usage("--release.audit-file is required: every preview and release is audited")
	case strings.TrimSpace(a.Reason) == "" && !a.DryRun:
		return usage("--reason is required (or --dry-run to preview only)")
	}
	if a.Operator == "" {
		a.Operator = os.Getenv("USER")
	}
	if a.Operator == "" {
		// Cron and containers often run without $USER: the account is
		// still a name.
		if u, err := user.Current(); err == nil {
			a.Operator = u.Username
		}
	}
	if a.Operator == "" {
		return usage("no operator: set --operator or $USER")
	}
	cfg, err := config.Load(a.ConfigFile)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", a.ConfigFile, err)
		return 1
	}
	rel, err := New(a.AuditFile, logger)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", cmdName, err)
		return 1
	}
	defer rel.Close()
	if err := rel.Configure(cfg); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", cmdName, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	plan, err := rel.Preview(ctx, Request{Source: "cli", Operator: a.Operator, Family: a.Family, User: a.User, IncludeLive: a.IncludeLive})
	if err != nil {
		fmt.Fprintf(stderr, "%s: preview: %v\n", cmdName, err)
		return 1
	}
	printPlan(stdout, plan, a.Value)
	if plan.Refusal != "" {
		fmt.Fprintf(stderr, "%s: nothing to release: %s\n", cmdName, plan.Refusal)
		return 1
	}
	if a.DryRun {
		fmt.Fprintln(stdout, "dry run: nothing was written")
		return 0
	}
	out, err := rel.Execute(ctx, plan, Confirm{Operator: a.Operator, Reason: strings.TrimSpace(a.Reason), NewValue: a.Value})
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
	audited := "audited in " + rel.AuditFile()
	switch {
	case errors.Is(err, ErrUnaudited):
		audited = "NOT audited: the outcome record could not be written; the intent record in " + rel.AuditFile() + " and the log say what was attempted"
	case !out.Audited:
		audited = "NOT audited: " + rel.AuditFile() + " cannot take records; the log has this one"
	}
	unanswered := ""
	if out.Unanswered > 0 {
		unanswered = fmt.Sprintf(", %d sent without an answer (they may have been removed or set: preview again to see)", out.Unanswered)
	}
	fmt.Fprintf(stdout, "%s: %d removed or set, %d kept (changed since the preview), %d already gone%s; %s\n",
		out.Result, out.Removed, out.Kept, out.Gone, unanswered, audited)
	if err != nil {
		verb := "failed"
		switch {
		case errors.Is(err, ErrRefused):
			verb = "refused"
		case out.Result == ResultReleased:
			verb = "released, but"
		}
		fmt.Fprintf(stderr, "%s: %s: %v\n", cmdName, verb, err)
		return 1
	}
	return 0
}

// printPlan writes a preview, one line per item, names quoted so that any
// byte in them stays visible.
func printPlan(w io.Writer, p *Plan, value int64) {
	fmt.Fprintf(w, "preview of family %s (%s), user %q, at %s (Redis time)\n", p.Family, p.Kind, p.User, FormatTime(float64(p.Now)))
	for _, k := range p.Keys {
		for _, m := range k.Remove {
			fmt.Fprintf(w, "would remove %q %q: %s, score %s, expiry %s\n", k.Key, m.Member, m.State, FormatScore(m.Score), FormatTime(m.Expiry))
		}
		for _, m := range k.Keep {
			if m.Cut {
				fmt.Fprintf(w, "would keep %q %q... (first %d of %d bytes): %s, longer than %d bytes, %s\n",
					k.Key, m.Member, len(m.Member), m.Size, m.State, MaxMemberBytes, CutRefusal)
				continue
			}
			fmt.Fprintf(w, "would keep %q %q: %s\n", k.Key, m.Member, m.State)
		}
		if p.Kind == config.KindCounter || p.Kind == config.KindRateLimit {
			fmt.Fprintf(w, "would set %q from %q to %d if unchanged\n", k.Key, k.Value, value)
		}
	}
}
