package config

import (
	"regexp"
	"regexp/syntax"
	"strings"
	"unicode/utf8"
)

// userShape is a user regexp recognised as one of the two forms nearly
// every family uses, so that UserOf can cut the user out with string
// operations: the regexp costs some hundreds of ns a key, and a sweep
// extracts the user of every key.
type userShape struct {
	kind   uint8 // shapeGlob or shapeBraces
	prefix string
	suffix string // shapeGlob only
	nl     bool   // shapeGlob: the group may hold '\n'
	// keyPrefix and keySuffix around a user make its canonical key
	// (UserKey): made once here, not for every key a sweep reads.
	keyPrefix, keySuffix string
}

const (
	// `^prefix(.*)suffix$`, as GlobToRegexp writes a glob whose only
	// wildcard is one *.
	shapeGlob uint8 = 1 + iota
	// `^prefix\{?([^}]+)\}?$`: a hash-tagged id, braces optional.
	shapeBraces
)

// UserKey returns how the family's canonical key names a user: prefix +
// user + suffix. For the glob shape it is every key of the user (the
// only one); for the braces shape the key with both braces, the form
// the limiter libraries write, though `prefixuser` names the same user.
// ok is false for any other user regexp: a key's name cannot be told
// from its user's. The sweep uses it to name a user by its canonical
// key's hash (docs/design.md, "Across sweeps").
func (f *Family) UserKey() (prefix, suffix string, ok bool) {
	if f.shape == nil {
		return "", "", false
	}
	return f.shape.keyPrefix, f.shape.keySuffix, true
}

// userOf applies the shape; it returns exactly what the regexp's first
// group would.
func (s *userShape) userOf(key string) (string, bool) {
	if !strings.HasPrefix(key, s.prefix) {
		return "", false
	}
	rest := key[len(s.prefix):]
	if s.kind == shapeGlob {
		if !strings.HasSuffix(rest, s.suffix) {
			return "", false
		}
		u := rest[:len(rest)-len(s.suffix)]
		if u == "" || !s.nl && strings.IndexByte(u, '\n') >= 0 {
			return "", false
		}
		return u, true
	}
	// \{? is greedy: the regexp first tries taking a '{', and only when
	// the rest cannot match does it give the '{' to the group.
	if strings.HasPrefix(rest, "{") {
		if u, ok := braceBody(rest[1:]); ok {
			return u, true
		}
	}
	return braceBody(rest)
}

// braceBody matches `([^}]+)\}?$` on s. '}' is ASCII, and [^}] matches
// each byte of invalid UTF-8, so bytes can be checked one by one.
func braceBody(s string) (string, bool) {
	s = strings.TrimSuffix(s, "}")
	if s == "" || strings.IndexByte(s, '}') >= 0 {
		return "", false
	}
	return s, true
}

// shapeOf recognises re's shape, or returns nil.
func shapeOf(re *regexp.Regexp) *userShape {
	p, err := syntax.Parse(re.String(), syntax.Perl)
	if err != nil {
		return nil
	}
	p = p.Simplify()
	if p.Op != syntax.OpConcat {
		return nil
	}
	sub := p.Sub
	if len(sub) < 3 || sub[0].Op != syntax.OpBeginText || sub[len(sub)-1].Op != syntax.OpEndText {
		return nil
	}
	sub = sub[1 : len(sub)-1]
	s := &userShape{}
	if lit, ok := literal(sub[0]); ok {
		s.prefix = lit
		sub = sub[1:]
	}
	switch {
	case len(sub) >= 1 && sub[0].Op == syntax.OpCapture:
		s.kind = shapeGlob
		g := sub[0].Sub[0]
		if g.Op != syntax.OpStar || g.Flags&syntax.NonGreedy != 0 {
			return nil
		}
		switch g.Sub[0].Op {
		case syntax.OpAnyChar:
			s.nl = true
		case syntax.OpAnyCharNotNL:
		default:
			return nil
		}
		switch len(sub) {
		case 1:
		case 2:
			lit, ok := literal(sub[1])
			if !ok {
				return nil
			}
			s.suffix = lit
		default:
			return nil
		}
	case len(sub) == 3 && isOptional(sub[0], '{') && isOptional(sub[2], '}') && sub[1].Op == syntax.OpCapture:
		s.kind = shapeBraces
		g := sub[1].Sub[0]
		if g.Op != syntax.OpPlus || g.Flags&syntax.NonGreedy != 0 {
			return nil
		}
		c := g.Sub[0]
		if c.Op != syntax.OpCharClass || len(c.Rune) != 4 ||
			c.Rune[0] != 0 || c.Rune[1] != '}'-1 || c.Rune[2] != '}'+1 || c.Rune[3] != utf8.MaxRune {
			return nil
		}
	default:
		return nil
	}
	s.keyPrefix, s.keySuffix = s.prefix, s.suffix
	if s.kind == shapeBraces {
		s.keyPrefix, s.keySuffix = s.prefix+"{", "}"
	}
	return s
}

// literal returns the text of a case-sensitive literal. A literal holding
// U+FFFD is refused: the regexp would match it against invalid UTF-8.
func literal(r *syntax.Regexp) (string, bool) {
	if r.Op != syntax.OpLiteral || r.Flags&syntax.FoldCase != 0 {
		return "", false
	}
	for _, c := range r.Rune {
		if c == utf8.RuneError {
			return "", false
		}
	}
	return string(r.Rune), true
}

// isOptional reports whether r is a greedy `c?`.
func isOptional(r *syntax.Regexp, c rune) bool {
	if r.Op != syntax.OpQuest || r.Flags&syntax.NonGreedy != 0 {
		return false
	}
	lit, ok := literal(r.Sub[0])
	return ok && lit == string(c)
}
