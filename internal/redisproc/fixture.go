package redisproc

import (
	"fmt"
	"strings"
	"time"
)

// The key names of the common families: a slot set per user at
// SlotKey(user), a legacy counter per user at CounterKey(user), as the
// limiter, slotsim and the README write them.
const (
	SlotPrefix    = "joishi:streams:"
	CounterPrefix = "joishi:streams-legacy:"
)

// SlotKey is the common slot-set family's key of user.
func SlotKey(user string) string { return SlotPrefix + "{" + user + "}" }

// CounterKey is the common counter family's key of user.
func CounterKey(user string) string { return CounterPrefix + "{" + user + "}" }

// Family is one family of a config fixture. Zero fields are left out of
// the YAML, so that the config's own defaults apply.
type Family struct {
	Name  string
	Kind  string
	Match string
	// User is the user regexp; "" leaves the user to the first * of Match.
	User  string
	Limit int
	// Slot-set timings.
	TTL, Heartbeat, MaxHold, Skew time.Duration
	// Extra are more "key: value" lines of the family.
	Extra []string
}

// Slots is the common slot-set family: "streams", limit 3, ttl 120s,
// heartbeats every 20s, max_hold 15m, over SlotKey.
func Slots() Family {
	return Family{
		Name: "streams", Kind: "slotset", Match: SlotPrefix + "*", User: `^joishi:streams:\{?([^}]+)\}?$`,
		Limit: 3, TTL: 120 * time.Second, Heartbeat: 20 * time.Second, MaxHold: 15 * time.Minute,
	}
}

// Counters is the common counter family: "legacy", limit 3, over
// CounterKey.
func Counters() Family {
	return Family{
		Name: "legacy", Kind: "counter", Match: CounterPrefix + "*", User: `^joishi:streams-legacy:\{?([^}]+)\}?$`,
		Limit: 3,
	}
}

// Config is a whole exporter config file.
type Config struct {
	// Addr is redis.addr; Redis, when set, is the whole redis block
	// instead, one "key: value" line (or list item) each.
	Addr  string
	Redis []string
	// Sampling and Leaks are the lines of those blocks.
	Sampling []string
	Leaks    []string
	// Families nil is Slots and Counters.
	Families []Family
}

// quote makes s a single-quoted YAML scalar, where only ' needs escaping:
// regexps keep their backslashes as written.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func block(b *strings.Builder, name string, lines []string) {
	if len(lines) == 0 {
		return
	}
	b.WriteString(name + ":\n")
	for _, l := range lines {
		b.WriteString("  " + l + "\n")
	}
}

// YAML renders the config.
func (c Config) YAML() string {
	var b strings.Builder
	redis := c.Redis
	if redis == nil {
		redis = []string{"addr: " + quote(c.Addr)}
	}
	block(&b, "redis", redis)
	block(&b, "sampling", c.Sampling)
	block(&b, "leaks", c.Leaks)
	fams := c.Families
	if fams == nil {
		fams = []Family{Slots(), Counters()}
	}
	b.WriteString("families:\n")
	for _, f := range fams {
		b.WriteString(f.yaml())
	}
	return b.String()
}

// yaml renders one family as an item of the families block.
func (f Family) yaml() string {
	var b strings.Builder
	fmt.Fprintf(&b, "  - name: %s\n    kind: %s\n", f.Name, f.Kind)
	line := func(k, v string) { fmt.Fprintf(&b, "    %s: %s\n", k, v) }
	if f.Match != "" {
		// Queue frameworks take none: their keys follow from the kind.
		line("match", quote(f.Match))
	}
	if f.User != "" {
		line("user", quote(f.User))
	}
	if f.Limit != 0 {
		line("limit", fmt.Sprint(f.Limit))
	}
	for _, d := range []struct {
		k string
		v time.Duration
	}{{"ttl", f.TTL}, {"heartbeat_interval", f.Heartbeat}, {"max_hold", f.MaxHold}, {"clock_skew_tolerance", f.Skew}} {
		if d.v != 0 {
			line(d.k, d.v.String())
		}
	}
	for _, e := range f.Extra {
		b.WriteString("    " + e + "\n")
	}
	return b.String()
}
