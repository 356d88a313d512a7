package release

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// flows releases one thing of every releasable kind, each seeded afresh,
// and returns the first error or refusal.
func (f *fixture) flows(t *testing.T) error {
	t.Helper()
	ctx := context.Background()
	now := f.now(t)
	f.slotSet(t, "acl", map[string]float64{"dead": float64(now - 60_000)})
	f.admin.Set(ctx, "lock:job:eu-acl", "tok", time.Hour) // future: found by SCAN
	f.admin.Set(ctx, "legacy:acl", "4", 0)
	f.admin.Set(ctx, "rl:api:acl", "120", time.Minute)
	for _, fam := range []string{"streams", "jobs", "legacy", "api"} {
		p, err := f.rel.Preview(ctx, req(fam, "acl"))
		if err != nil {
			return fmt.Errorf("%s preview: %w", fam, err)
		}
		if p.Refusal != "" {
			return fmt.Errorf("%s preview: %s", fam, p.Refusal)
		}
		out, err := f.rel.Execute(ctx, p, confirm("acl test"))
		if err != nil {
			return fmt.Errorf("%s release: %w", fam, err)
		}
		if out.Removed != 1 {
			return fmt.Errorf("%s release: %+v", fam, out.Items)
		}
	}
	return nil
}

// TestACLMinimalCommandSet: the release user with exactly ACLCommands
// previews and releases every kind without a single ACL LOG entry, and
// taking any one command away breaks a release that needs it, with an
// error that names the command, the user and the documented ACL line:
// the list has nothing missing and nothing to spare.
func TestACLMinimalCommandSet(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if err := f.flows(t); err != nil {
		t.Fatalf("with the documented ACL: %v", err)
	}
	if log, err := f.admin.Do(ctx, "ACL", "LOG").Slice(); err != nil || len(log) != 0 {
		t.Fatalf("ACL LOG after good releases: %v %v; want empty", log, err)
	}
	for _, c := range ACLCommands {
		t.Run("without "+c.Command, func(t *testing.T) {
			if err := f.admin.Do(ctx, "ACL", "SETUSER", "releaser", "-"+c.Command).Err(); err != nil {
				t.Fatal(err)
			}
			defer f.admin.Do(ctx, "ACL", "SETUSER", "releaser", "+"+c.Command)
			// Without a cached script, go-redis falls back to EVAL.
			f.admin.ScriptFlush(ctx)
			f.admin.Do(ctx, "ACL", "LOG", "RESET")
			err := f.flows(t)
			if err == nil {
				t.Fatalf("every release succeeded without %s: it is not needed", c.Command)
			}
			// Redis's refusals inside a script do not name the command;
			// the ACL log does. The scripts check first (Redis 7+), which
			// the ACL log does not record, and name it themselves.
			if !aclLogged(t, f.admin, c.Command) && !strings.Contains(err.Error(), "(in the release script)") {
				t.Errorf("the release failed (%v), but the ACL log has no refusal of %s", err, c.Command)
			}
			// The operator is told which command, for which user, and
			// where the documented line is, whether the preview's reads
			// or a script were refused.
			msg := err.Error()
			for _, want := range []string{`the release user "releaser" may not run ` + c.Command + " ", `README, "The release user's ACL"`, ACLRule("<each family's match>")} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not say %q", msg, want)
				}
			}
		})
	}
	if err := f.flows(t); err != nil {
		t.Fatalf("with every command restored: %v", err)
	}
}

// aclLogged reports whether the ACL log holds a refusal of command.
func aclLogged(t *testing.T, c *redis.Client, command string) bool {
	t.Helper()
	entries, err := c.Do(context.Background(), "ACL", "LOG").Slice()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.Contains(fmt.Sprint(e), "object:"+command+" ") {
			return true
		}
	}
	return false
}
