package changefeed

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"
)

// TestNameSet: each name once, in the order first named, through the
// index's growth, with names longer than a chunk and an empty one; and
// the strings handed out must keep their bytes while the set goes on
// filling (the next sweep's names are gathered while this one reads).
func TestNameSet(t *testing.T) {
	s := newNameSet()
	add := func(name string) { s.add([]byte(name), xxhash.Sum64String(name)) }
	var want []string
	long := strings.Repeat("L", nameChunk+1)
	for i := range 50000 {
		name := fmt.Sprintf("slots:user:%d", i)
		switch i {
		case 3:
			name = strings.Repeat("m", longKeyName) // longer than the first chunks
		case 7:
			name = ""
		case 100, 20000:
			name = long + fmt.Sprint(i)
		}
		want = append(want, name)
		add(name)
		if i%3 == 0 {
			add(want[i/2]) // named again
		}
	}
	got := s.names()
	if !slices.Equal(got, want) {
		t.Fatalf("%d names, want %d; first difference at %d", len(got), len(want), firstDiff(got, want))
	}
	for i := range 50000 {
		add(fmt.Sprintf("other:%d", i))
	}
	if !slices.Equal(got, want) {
		t.Fatal("the names handed out changed while the set went on filling")
	}
	if n := len(s.names()); n != 100000 {
		t.Errorf("%d names after 50000 more, want 100000", n)
	}
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
