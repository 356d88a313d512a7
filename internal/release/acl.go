package release

import (
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/config"
)

// ACLCommand is one command the release user needs, and what for.
type ACLCommand struct {
	Command string
	// Kinds whose release needs it; nil: every releasable kind.
	Kinds []config.Kind
	Why   string
}

// ACLCommands is the exact command set of the release user (the one named
// by release.username): the preview reads with it, and the scripts write
// with it. Redis checks the ACL for the commands a script calls too, so
// the scripts' own commands are on the list. A test takes each one away
// and watches a release fail.
var ACLCommands = []ACLCommand{
	{"time", nil, "the preview classifies members at Redis time"},
	{"scan", nil, "finds the user's key when it is not at the name the match pattern gives (a user regexp of its own)"},
	{"zrange", []config.Kind{config.KindSlotSet}, "the preview reads the members"},
	{"getrange", []config.Kind{config.KindLock, config.KindCounter, config.KindRateLimit}, "the preview reads the token or value, and the scripts compare it, at most 513 bytes of it"},
	{"pttl", nil, "the preview reads the lease or TTL; the scripts tell an empty value from a missing key"},
	{"evalsha", nil, "runs the release scripts"},
	{"eval", nil, "loads a release script the server does not have cached (go-redis falls back to EVAL on NOSCRIPT)"},
	{"zscore", []config.Kind{config.KindSlotSet}, "the members script re-reads each score"},
	{"zrem", []config.Kind{config.KindSlotSet}, "the members script removes a member"},
	{"del", []config.Kind{config.KindLock}, "the lock script deletes the lock"},
	{"set", []config.Kind{config.KindCounter, config.KindRateLimit}, "the value script sets the new value (KEEPTTL)"},
}

// ACLRule is an ACL SETUSER rule list for the release user: no channels,
// no command but ACLCommands, and the given key patterns (the families'
// match patterns, or narrower).
func ACLRule(keyPatterns ...string) string {
	rules := []string{"resetchannels", "-@all"}
	for _, c := range ACLCommands {
		rules = append(rules, "+"+c.Command)
	}
	for _, p := range keyPatterns {
		rules = append(rules, "~"+p)
	}
	return strings.Join(rules, " ")
}

// refusedCommand finds the command in Redis's refusal of one ("NOPERM
// this user has no permissions to run the 'pttl' command", and the same
// from the release scripts' own check); "" when err is no refusal, and
// "?" for the one Redis sends from inside a script without naming the
// command (before Redis 7, whose scripts cannot check first).
func refusedCommand(err error) string {
	var re redis.Error
	if !errors.As(err, &re) {
		return ""
	}
	msg := re.Error()
	if strings.Contains(msg, "user executing the script can't run this command") {
		return "?"
	}
	if !strings.HasPrefix(strings.TrimPrefix(msg, "ERR "), "NOPERM") {
		return ""
	}
	_, rest, ok := strings.Cut(msg, "to run the '")
	if !ok {
		return ""
	}
	cmd, _, ok := strings.Cut(rest, "'")
	if !ok {
		return ""
	}
	return cmd
}

// aclHint turns Redis's refusal of a command the release needs into an
// error naming the command, the user, and the documented ACL line (README,
// "The release user's ACL"); any other error is returned as it is.
func aclHint(err error, user string) error {
	cmd := refusedCommand(err)
	if cmd == "" {
		return err
	}
	what := "+" + cmd
	if cmd == "?" {
		what = "one of the commands its scripts run"
	}
	return fmt.Errorf("the release user %q may not run %s (%w); its ACL must be exactly the documented line (README, \"The release user's ACL\"): ACL SETUSER %s on >PASSWORD %s",
		user, strings.TrimPrefix(what, "+"), err, user, ACLRule("<each family's match>"))
}
