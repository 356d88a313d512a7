package config

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// GlobToRegexp translates a Redis glob (a SCAN MATCH pattern) into an
// anchored regexp that matches the same keys, with the first * as capture
// group 1: "joishi:streams:*" becomes `(?s)^joishi:streams:(.*)$`.
//
// It follows Redis' stringmatchlen: * is any run of characters, ? one
// character, [abc], [^abc] and [a-z] are classes (reversed ranges are
// swapped, [] matches nothing), and \ escapes the next character, in and out
// of classes. Unlike Redis, an unterminated class is an error. Redis matches
// bytes and the regexp matches UTF-8 characters; the two differ only for ?
// and classes against non-ASCII keys.
//
// hasStar reports whether the glob has a * wildcard (not escaped, not in a
// class).
func GlobToRegexp(glob string) (re string, hasStar bool, err error) {
	var b strings.Builder
	b.WriteString("(?s)^")
	for i := 0; i < len(glob); {
		switch glob[i] {
		case '*':
			if hasStar {
				b.WriteString(".*")
			} else {
				b.WriteString("(.*)")
				hasStar = true
			}
			i++
		case '?':
			b.WriteString(".")
			i++
		case '[':
			n, class, err := globClass(glob[i+1:])
			if err != nil {
				return "", false, err
			}
			b.WriteString(class)
			i += 1 + n
		case '\\':
			if i+1 < len(glob) {
				i++
			}
			fallthrough
		default:
			_, n := utf8.DecodeRuneInString(glob[i:])
			b.WriteString(regexp.QuoteMeta(glob[i : i+n]))
			i += n
		}
	}
	b.WriteString("$")
	return b.String(), hasStar, nil
}

// globClass translates the class whose body starts s (just after the [).
// It returns how many bytes of s the class used, ] included.
func globClass(s string) (int, string, error) {
	i := 0
	negate := i < len(s) && s[i] == '^'
	if negate {
		i++
	}
	var items []string
	for {
		if i >= len(s) {
			return 0, "", errors.New("unterminated [ class")
		}
		if s[i] == ']' {
			i++
			break
		}
		if s[i] == '\\' && i+1 < len(s) {
			r, n := utf8.DecodeRuneInString(s[i+1:])
			items = append(items, classChar(r))
			i += 1 + n
			continue
		}
		lo, n := utf8.DecodeRuneInString(s[i:])
		// Redis: "patternLen >= 3 && pattern[1] == '-'", so the character
		// after the - is always the range's end, even a ].
		if i+n+1 < len(s) && s[i+n] == '-' {
			hi, m := utf8.DecodeRuneInString(s[i+n+1:])
			if lo > hi {
				lo, hi = hi, lo
			}
			items = append(items, classChar(lo)+"-"+classChar(hi))
			i += n + 1 + m
			continue
		}
		items = append(items, classChar(lo))
		i += n
	}
	switch {
	case len(items) == 0 && negate:
		return i, ".", nil // [^] matches any one character
	case len(items) == 0:
		return i, `[^\x00-\x{10FFFF}]`, nil // [] matches nothing
	case negate:
		return i, "[^" + strings.Join(items, "") + "]", nil
	}
	return i, "[" + strings.Join(items, "") + "]", nil
}

func classChar(r rune) string { return fmt.Sprintf(`\x{%x}`, r) }

// compileUser returns the regexp whose first group is a key's user: User
// as given, or the regexp derived from Match. The error omits the field
// path.
func compileUser(f *Family) (*regexp.Regexp, error) {
	if f.User != "" {
		return regexp.Compile(f.User)
	}
	src, _, err := GlobToRegexp(f.Match)
	if err != nil {
		return nil, err
	}
	return regexp.Compile(src)
}
