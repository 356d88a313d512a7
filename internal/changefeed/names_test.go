package changefeed

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"

	"github.com/slotexporter/slot_exporter/config"
)

// TestNameSet: each name once, in the order first named, through the
// index's growth, with names longer than a chunk, an empty one, the
// prefix alone and names without the set's prefix; each found by Index;
// and the strings handed out must keep their bytes while the set goes on
// filling (the next sweep's names are gathered while this one reads).
func TestNameSet(t *testing.T) {
	for _, prefix := range []string{"", "slots:"} {
		t.Run(fmt.Sprintf("prefix %q", prefix), func(t *testing.T) {
			s := newNameSet(prefix, 0)
			add := func(name string) { s.add([]byte(name), xxhash.Sum64String(name)) }
			var want []string
			long := strings.Repeat("L", nameChunk+1)
			for i := range 50000 {
				name := fmt.Sprintf("slots:user:%d", i)
				switch i {
				case 3:
					name = strings.Repeat("m", longKeyName) // longer than the first chunks
				case 5:
					name = "slots:" + strings.Repeat("m", longKeyName) // as long, past the prefix
				case 7:
					name = ""
				case 8:
					name = "slots:"
				case 9:
					name = "slots" // a part of the prefix
				case 10:
					name = "user:11" // what the prefix leaves of the next name
				case 100, 20000:
					name = long + fmt.Sprint(i)
				case 200, 20001:
					name = "slots:" + long + fmt.Sprint(i)
				}
				want = append(want, name)
				add(name)
				if i%3 == 0 {
					add(want[i/2]) // named again
				}
			}
			got := namesOf(Names{s})
			if !slices.Equal(got, want) {
				t.Fatalf("%d names, want %d; first difference at %d", len(got), len(want), firstDiff(got, want))
			}
			for i, name := range want {
				if at := (Names{s}).Index(name); at != i {
					t.Fatalf("Index(%.20q) = %d, want %d", name, at, i)
				}
			}
			for _, name := range []string{"slots:user:50000", "user:12", "slots:user:", "slot", long} {
				if at := (Names{s}).Index(name); at != -1 {
					t.Errorf("Index(%.20q) = %d of a name never added", name, at)
				}
			}
			for i := range 50000 {
				add(fmt.Sprintf("other:%d", i))
			}
			if !slices.Equal(got, want) {
				t.Fatal("the names handed out changed while the set went on filling")
			}
			if n := (Names{s}).Len(); n != 100000 {
				t.Errorf("%d names after 50000 more, want 100000", n)
			}
			(Names{s}).DropIndex()
			if got := namesOf(Names{s}); !slices.Equal(got[:len(want)], want) {
				t.Fatal("the names changed when the index was dropped")
			}
			func() {
				defer func() {
					if recover() == nil {
						t.Error("Index answered without its index")
					}
				}()
				(Names{s}).Index(want[0])
			}()
		})
	}
	if n := (Names{}).Len(); n != 0 || (Names{}).Index("a") != -1 {
		t.Errorf("no names: Len %d", n)
	}
}

// TestNameSetLimit: a set lists names up to its limit, a name already
// listed is no more past it, and one name more gives up: the set names
// everything and lists nothing. Its next set starts empty under the same
// limit; a limit lowered below what a set lists gives up at once, and 0
// lists without limit.
func TestNameSetLimit(t *testing.T) {
	s := newNameSet("slots:", 3)
	add := func(s *nameSet, name string) { s.add([]byte(name), xxhash.Sum64String(name)) }
	for _, k := range []string{"slots:a", "slots:b", "slots:c", "slots:a", "slots:c"} {
		add(s, k)
	}
	if n := (Names{s}); n.All() || n.Len() != 3 {
		t.Fatalf("3 names under a limit of 3: All %v, Len %d", n.All(), n.Len())
	}
	add(s, "slots:d")
	if n := (Names{s}); !n.All() || n.Len() != 0 || n.Index("slots:a") != -1 {
		t.Fatalf("a 4th name under a limit of 3: All %v, Len %d, Index %d", n.All(), n.Len(), n.Index("slots:a"))
	}
	if s.chunks != nil || s.refs != nil || s.index != nil {
		t.Error("a set that gave up keeps what it listed")
	}
	add(s, "slots:e")
	if n := (Names{s}); !n.All() || n.Len() != 0 {
		t.Fatal("a set that gave up listed again")
	}
	next := s.next()
	add(next, "slots:a")
	if n := (Names{next}); n.All() || n.Len() != 1 || next.limit != 3 {
		t.Fatalf("the next set: All %v, Len %d, limit %d", n.All(), n.Len(), next.limit)
	}
	add(next, "slots:b")
	next.setLimit(2)
	if n := (Names{next}); n.All() {
		t.Fatal("a limit lowered to what the set lists gave up")
	}
	next.setLimit(1)
	if n := (Names{next}); !n.All() {
		t.Fatal("a limit lowered below what the set lists did not give up")
	}
	free := newNameSet("", 0)
	for i := range 5000 {
		add(free, fmt.Sprint(i))
	}
	if n := (Names{free}); n.All() || n.Len() != 5000 {
		t.Fatalf("no limit: All %v, Len %d", n.All(), n.Len())
	}
	if (Names{}).All() {
		t.Error("no set is all")
	}
}

// namesOf is every name of n, in order.
func namesOf(n Names) []string {
	out := make([]string, n.Len())
	for i := range out {
		out[i] = n.At(i)
	}
	return out
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestFamilyMatches: a pattern that is a literal prefix and * is matched
// by its prefix, others by their regexp; either way as the pattern's
// regexp matches, for keys with newlines and bytes that are not UTF-8.
func TestFamilyMatches(t *testing.T) {
	keys := []string{"", "a", "a:", "a:1", "a:\n", "a:\xff", "b:1", "a:x:b", "a*", `a\*`, "ab"}
	for _, c := range []struct {
		match      string
		prefixOnly bool
	}{{"a:*", true}, {"*", true}, {"a:*:b", false}, {`a\*`, false}, {"a[:b]*", false}, {"a:?", false}, {"a*", true}} {
		src, _, err := config.GlobToRegexp(c.match)
		if err != nil {
			t.Fatal(err)
		}
		ff := newFeedFamily(Family{Name: "f", Match: c.match, Re: regexp.MustCompile(src)})
		if ff.prefixOnly != c.prefixOnly {
			t.Errorf("%q: prefixOnly %v, want %v", c.match, ff.prefixOnly, c.prefixOnly)
		}
		for _, k := range keys {
			if got, want := ff.matches([]byte(k)), ff.re.MatchString(k); got != want {
				t.Errorf("%q against %q: %v, its regexp says %v", c.match, k, got, want)
			}
		}
	}
}
