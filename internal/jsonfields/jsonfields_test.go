package jsonfields

import (
	"io"
	"strings"
	"testing"
)

// feed writes v into s in pieces of n bytes, and finishes it.
func feed(s *Scan, v string, n int) error {
	s.Reset()
	for rest := v; len(rest) > 0; {
		k := min(n, len(rest))
		_, _ = io.WriteString(s, rest[:k])
		rest = rest[k:]
	}
	return s.Finish()
}

// TestScanKeepsItsFields: in pieces of any size, the fields asked for are
// kept raw (the last of duplicates, a key matched ignoring case as
// encoding/json matches it), the rest passed over, a nested field's
// content (an object, or a string of escaped JSON) fed to its own scan,
// and a syntax error reported; a field longer than FieldMax is named,
// not kept.
func TestScanKeepsItsFields(t *testing.T) {
	for _, n := range []int{1, 2, 5, 1 << 20} {
		s := New([]string{"a", "b", "p"}, "p", New([]string{"jid"}, "", nil))
		if err := feed(s, `{"x":[1,{"a":9}],"A":1,"b":"s\"t","a":2,"p":"{\"jid\":\"j\\u0031\"}"}`, n); err != nil {
			t.Fatalf("%d-byte pieces: %v", n, err)
		}
		if got := string(s.Object()); got != `{"a":2,"b":"s\"t"}` || s.Top() != '{' {
			t.Errorf("%d-byte pieces: kept %s (top %q)", n, got, s.Top())
		}
		if got := string(s.Nested().Object()); got != `{"jid":"j\u0031"}` || s.NestedKind() != '"' || s.NestedErr() != nil {
			t.Errorf("%d-byte pieces: nested kept %s (kind %q, err %v)", n, got, s.NestedKind(), s.NestedErr())
		}
		if err := feed(s, `{"a":1,}`, n); err == nil {
			t.Errorf("%d-byte pieces: a trailing comma is no error", n)
		}
		if err := feed(s, `{"b":"`+strings.Repeat("x", FieldMax)+`"}`, n); err != nil || s.TooLong() != "b" || string(s.Object()) != `{}` {
			t.Errorf("%d-byte pieces: a field over FieldMax: err %v, too long %q, kept %s", n, err, s.TooLong(), s.Object())
		}
	}
	if KindOf('[') != "array" || KindOf('"') != "string" || KindOf('-') != "number" {
		t.Error("KindOf names a value's type wrongly")
	}
}
