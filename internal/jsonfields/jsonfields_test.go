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
// kept raw (every value of a key that repeats, in order; a key matched
// ignoring case as encoding/json matches it), the rest passed over, a
// nested field's
// content (an object, or a string of escaped JSON) fed to its own scan,
// and a syntax error reported; a field longer than FieldMax is named,
// not kept.
func TestScanKeepsItsFields(t *testing.T) {
	for _, n := range []int{1, 2, 5, 1 << 20} {
		s := New([]string{"a", "b", "p"}, "p", New([]string{"jid"}, "", nil))
		if err := feed(s, `{"x":[1,{"a":9}],"A":1,"b":"s\"t","a":2,"p":"{\"jid\":\"j\\u0031\"}"}`, n); err != nil {
			t.Fatalf("%d-byte pieces: %v", n, err)
		}
		if got := string(s.Object()); got != `{"a":1,"a":2,"b":"s\"t"}` || s.Top() != '{' {
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

// TestScanKeepsElements: the fields of a top-level array are its
// elements, named by their index, and Len counts them; a nested one is
// fed as a nested field is. An object's keys match the same names (Top
// tells the two apart), and count no elements.
func TestScanKeepsElements(t *testing.T) {
	for _, n := range []int{1, 3, 1 << 20} {
		s := New([]string{"0", "2", "7"}, "0", New([]string{"id"}, "", nil))
		if err := feed(s, ` [ {"id":"x","b":[1,"]"]} , [2,{"3":4}] ,"r\u0041", -1.5e3 ] `, n); err != nil {
			t.Fatalf("%d-byte pieces: %v", n, err)
		}
		if got := string(s.Object()); got != `{"2":"r\u0041"}` || s.Top() != '[' || s.Len() != 4 {
			t.Errorf("%d-byte pieces: kept %s of %d elements (top %q)", n, got, s.Len(), s.Top())
		}
		if got := string(s.Nested().Object()); got != `{"id":"x"}` || s.NestedKind() != '{' || s.NestedErr() != nil {
			t.Errorf("%d-byte pieces: element 0 kept %s (kind %q, err %v)", n, got, s.NestedKind(), s.NestedErr())
		}
		if err := feed(s, `{"0":{"id":"x"},"2":1}`, n); err != nil || string(s.Object()) != `{"2":1}` || s.Top() != '{' || s.Len() != 0 {
			t.Errorf("%d-byte pieces: an object's keys: %v, %s, top %q, %d elements", n, err, s.Object(), s.Top(), s.Len())
		}
		if err := feed(s, `[]`, n); err != nil || s.Len() != 0 || s.Top() != '[' {
			t.Errorf("%d-byte pieces: an empty array: %v, %d elements", n, err, s.Len())
		}
	}
}

// TestScanMergesNested: a merged nested field keeps the fields of every
// object given under its key, passes a null over, and reports the first
// value of another type; unmerged, the last value given is the one read.
func TestScanMergesNested(t *testing.T) {
	for _, n := range []int{1, 4, 1 << 20} {
		s := New([]string{"h"}, "h", New([]string{"id", "task"}, "", nil)).MergeNested()
		if err := feed(s, `{"h":{"id":"a","task":"t"},"H":null,"h":{"task":"u"}}`, n); err != nil {
			t.Fatalf("%d-byte pieces: %v", n, err)
		}
		if got := string(s.Nested().Object()); got != `{"id":"a","task":"t","task":"u"}` || s.NestedKind() != '{' {
			t.Errorf("%d-byte pieces: merged %s (kind %q)", n, got, s.NestedKind())
		}
		for v, kind := range map[string]byte{`{"h":null}`: 'n', `{"h":{},"h":5,"h":{}}`: '5', `{"h":"{}","h":{}}`: '"', `{"x":1}`: 0} {
			if err := feed(s, v, n); err != nil || s.NestedKind() != kind {
				t.Errorf("%d-byte pieces: %s: kind %q, want %q (%v)", n, v, s.NestedKind(), kind, err)
			}
		}
		u := New([]string{"h"}, "h", New([]string{"id"}, "", nil))
		if err := feed(u, `{"h":{"id":"a"},"h":{"task":"u"}}`, n); err != nil || string(u.Nested().Object()) != `{}` || u.NestedKind() != '{' {
			t.Errorf("%d-byte pieces: unmerged, kept %s (kind %q, %v)", n, u.Nested().Object(), u.NestedKind(), err)
		}
	}
}

// TestScanRepeatsAddUp: a key that repeats is kept within FieldMax for
// all its values together; past it, the field is too long, whatever
// comes after.
func TestScanRepeatsAddUp(t *testing.T) {
	s := New([]string{"a", "b"}, "", nil)
	half := `"` + strings.Repeat("x", FieldMax/2) + `"`
	if err := feed(s, `{"a":`+half+`,"a":`+half+`,"a":1,"b":2}`, 7); err != nil || s.TooLong() != "a" || string(s.Object()) != `{"b":2}` {
		t.Errorf("two halves of FieldMax: %v, too long %q, kept %s", err, s.TooLong(), s.Object())
	}
	if err := feed(s, `{"a":`+half+`,"a":1}`, 7); err != nil || s.TooLong() != "" || string(s.Object()) != `{"a":`+half+`,"a":1}` {
		t.Errorf("one half of FieldMax: %v, too long %q", err, s.TooLong())
	}
}
