package release

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/topology"
)

// How a user's keys were found, in the order they are tried. A user id is
// what the family's user regexp extracts from a key; there is no inverse in
// general, so the likely names come first and a bounded SCAN last.
const (
	FoundByPattern = "the match pattern with the user in place of its first *"
	FoundByHashTag = "the match pattern with {user} (a cluster hash tag) in place of its first *"
	FoundByScan    = "a SCAN of the family's keys for this user"
)

// Scan bounds: the SCAN fallback stops after this many calls per node or
// at the deadline, and says so on the page.
const (
	scanCallsPerNode = 100
	scanDeadline     = 3 * time.Second
)

// candidate is a key name worth trying, with how it was derived.
type candidate struct {
	key, how string
}

// candidates are the keys a user's key is most likely called: the match
// glob with the user (or the user in a hash tag) in place of its first *.
// Only names that the family would itself attribute to the user are kept.
func candidates(f *config.Family, user string) []candidate {
	var out []candidate
	for _, c := range []candidate{{user, FoundByPattern}, {"{" + user + "}", FoundByHashTag}} {
		key, ok := literalKey(f.Match, c.key)
		if !ok || !belongs(f, key, user) {
			continue
		}
		dup := false
		for _, o := range out {
			dup = dup || o.key == key
		}
		if !dup {
			out = append(out, candidate{key, c.how})
		}
	}
	return out
}

// belongs reports whether the family would read key and attribute it to
// user.
func belongs(f *config.Family, key, user string) bool {
	if f.MatchRegexp != nil && !f.MatchRegexp.MatchString(key) {
		return false
	}
	u, ok := f.UserOf(key)
	return ok && u == user
}

// literalKey returns glob with its first * replaced by sub, as a key name,
// or false when glob has another wildcard (then it names many keys).
func literalKey(glob, sub string) (string, bool) {
	var b strings.Builder
	star := false
	for i := 0; i < len(glob); i++ {
		switch c := glob[i]; c {
		case '*':
			if star {
				return "", false
			}
			star = true
			b.WriteString(sub)
		case '?', '[':
			return "", false
		case '\\':
			if i+1 < len(glob) {
				i++
			}
			b.WriteByte(glob[i])
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), star
}

// EscapeGlob escapes s so that a SCAN MATCH pattern matches it literally.
func EscapeGlob(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '*', '?', '[', ']', '\\', '^', '-':
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// scanPattern is the SCAN MATCH pattern for a user's keys. When the user is
// what the first * matched, that * becomes the escaped user; with a user
// regexp of its own, the user may come from anywhere in the key, so the
// pattern is any key containing it and belongs filters the rest.
func scanPattern(f *config.Family, user string) string {
	if f.User != "" {
		return "*" + EscapeGlob(user) + "*"
	}
	var b strings.Builder
	star := false
	for i := 0; i < len(f.Match); i++ {
		c := f.Match[i]
		switch {
		case c == '\\' && i+1 < len(f.Match):
			b.WriteByte(c)
			i++
			b.WriteByte(f.Match[i])
		case c == '[':
			// Copy the class whole: a * inside it is no wildcard.
			j := classEnd(f.Match, i)
			b.WriteString(f.Match[i:j])
			i = j - 1
		case c == '*' && !star:
			star = true
			b.WriteString(EscapeGlob(user))
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// classEnd returns the index just past the class that opens at glob[i].
func classEnd(glob string, i int) int {
	j := i + 1
	if j < len(glob) && glob[j] == '^' {
		j++
	}
	for ; j < len(glob); j++ {
		switch glob[j] {
		case '\\':
			j++
		case ']':
			return j + 1
		}
	}
	return len(glob)
}

// Search says where a user's keys were looked for.
type Search struct {
	// How the keys were found (one of the FoundBy constants); empty when
	// none was.
	How string
	// Tried are the key names tried before the SCAN.
	Tried []string
	// Pattern is the SCAN MATCH pattern, when it came to a SCAN.
	Pattern string
	// Scanned is the number of keys the SCAN returned; Cut is set when it
	// stopped at its bounds before covering the keyspace.
	Scanned int
	Cut     bool
}

// scanForUser runs the bounded SCAN on every node.
func scanForUser(ctx context.Context, topo *topology.Topology, f *config.Family, user string, count int64, s *Search) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, scanDeadline)
	defer cancel()
	s.Pattern = scanPattern(f, user)
	nodes, err := topo.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var keys []string
	for _, n := range nodes {
		var cursor uint64
		for calls := 0; ; calls++ {
			if calls == scanCallsPerNode || ctx.Err() != nil {
				s.Cut = true
				break
			}
			batch, next, err := n.C.Scan(ctx, cursor, s.Pattern, count).Result()
			if err != nil {
				if ctx.Err() != nil {
					s.Cut = true
					break
				}
				return nil, fmt.Errorf("SCAN %s: %w", n.Addr, err)
			}
			s.Scanned += len(batch)
			for _, k := range batch {
				if !seen[k] && belongs(f, k, user) {
					seen[k] = true
					keys = append(keys, k)
				}
			}
			if cursor = next; cursor == 0 {
				break
			}
		}
	}
	return keys, nil
}
