package config

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

func BenchmarkUserOf(b *testing.B) {
	for _, tc := range []struct{ name, match, user, key string }{
		{"explicit", "joishi:streams:*", `^joishi:streams:\{?([^}]+)\}?$`, "joishi:streams:{000000123456}"},
		{"glob", "jobs:*:slots", "", "jobs:u000000123456:slots"},
		{"glob-tail", "joishi:streams:*", "", "joishi:streams:{000000123456}"},
	} {
		f := &Family{Name: "f", Kind: KindCounter, Match: tc.match, User: tc.user, Limit: 1}
		re, err := validateFamily(f, "families[0]", present{"limit": true})
		if err != nil {
			b.Fatal(err)
		}
		f.UserRegexp = re
		b.Run(tc.name, func(b *testing.B) {
			for range b.N {
				if _, ok := f.UserOf(tc.key); !ok {
					b.Fatal("no user")
				}
			}
		})
	}
}

// refUserOf is UserOf by the regexp alone.
func refUserOf(re *regexp.Regexp, key string) (string, bool) {
	m := re.FindStringSubmatch(key)
	if len(m) < 2 || m[1] == "" {
		return "", false
	}
	return m[1], true
}

// TestUserOfShapes checks that the string fast path returns exactly what
// the regexp does, over hand-picked and random keys, and that it is taken
// for the forms it is meant for.
func TestUserOfShapes(t *testing.T) {
	for _, tc := range []struct {
		match, user string
		fast        bool
	}{
		{"joishi:streams:*", `^joishi:streams:\{?([^}]+)\}?$`, true},
		{"*", `^\{?([^}]+)\}?$`, true},
		{"*", `^é:\{?([^}]+)\}?$`, true},
		{"joishi:streams:*", "", true},
		{"jobs:*:slots", "", true},
		{"*", "", true},
		{"*:x", "", true},
		{"é{*}ü", "", true},
		{"*", `^a:(.*)b$`, true}, // no (?s): the group holds no newline
		{"*", `^a:(.*)$`, true},
		{"*", `^(?i)a:\{?([^}]+)\}?$`, false},
		{"*", `^a:\{??([^}]+)\}?$`, false},
		{"*", `^a:\{?([^}]+?)\}?$`, false},
		{"*", `^a:\{?([^{]+)\}?$`, false},
		{"*", `^a:\{?([^}]*)\}?$`, false},
		{"*", `a:\{?([^}]+)\}?$`, false},
		{"*", `^a:\{?([^}]+)\}?`, false},
		{"*", `(?m)^a:(.*)$`, false},
		{"*", `^a:(.*?)b$`, false},
		{"*", `^a:(.+)b$`, false},
		{"*", `^\x{FFFD}:(.*)$`, false},
		{"a*b*c", "", false},
		{"a?*", "", false},
		{"a[bc]*", "", false},
	} {
		f := &Family{Name: "f", Kind: KindCounter, Match: tc.match, User: tc.user, Limit: 1}
		re, err := validateFamily(f, "families[0]", present{"limit": true})
		if err != nil {
			t.Fatalf("match %q user %q: %v", tc.match, tc.user, err)
		}
		f.UserRegexp = re
		if got := shapeOf(re) != nil; got != tc.fast {
			t.Errorf("%s: fast path %v, want %v", re, got, tc.fast)
		}
		rng := rand.New(rand.NewPCG(1, uint64(len(tc.user)+len(tc.match))))
		lit := []string{"joishi:streams:", "jobs:", ":slots", "a:", "b", "é", "ü", "é:", "{", "}", "{}", "}}", "{{", "x", ":x", "\n", "\xff", "\xe2\x82", "\xac", "\x00", "\xef\xbf\xbd", "u1", "日本"}
		keys := []string{"", "{", "}", "{}", "{{}}", "a:", "a:{}", "a:{", "a:}", "a:{x}", "a:{x", "a:x}", "a:{}}", "a:{{x}", "a:{x}}", "a:\n", "a:\nb", "é{}ü", "é{u}ü", "joishi:streams:{u1}", "joishi:streams:{}", "jobs::slots", "jobs:u:slots"}
		for range 20000 {
			var b strings.Builder
			for range rng.IntN(6) {
				b.WriteString(lit[rng.IntN(len(lit))])
			}
			keys = append(keys, b.String())
		}
		for _, k := range keys {
			got, ok := f.UserOf(k)
			want, wok := refUserOf(re, k)
			if got != want || ok != wok {
				t.Errorf("%s: UserOf(%q) = %q, %v; the regexp says %q, %v", re, k, got, ok, want, wok)
			}
		}
	}
}
