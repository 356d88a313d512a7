// Package jsonfields reads a JSON text as it streams in and keeps only
// the raw values of a few top-level fields: what a queue framework's job
// is read for (its enqueued time, its jid, a Celery message's task),
// whatever the size of its arguments.
package jsonfields

import (
	"errors"
	"strconv"
)

// Scan reads one JSON text as it streams in (an io.Writer, fed by
// resp.Conn.ReadBulkTo or with a whole value), checks its syntax as
// encoding/json does, and keeps only what its user reads of it: the raw
// values of a few top-level fields (an object's keys; a top-level
// array's elements, named by their index: "0", "1", ...; Top tells the
// two apart), and optionally the content of one field (an object, or a
// string holding a JSON text, as a Sidekiq work entry's payload), fed to
// a nested Scan. A job's JSON is as large as its arguments
// (internal/kind's framework_stream.go says what reading them whole
// cost); this holds at most FieldMax bytes a field kept and a byte a
// level of nesting, whatever the size of the text.
//
// Object turns what was kept back into a small JSON object, which the
// caller decodes with encoding/json as it decoded the whole text: the
// fields' types are checked as before. Keys match as encoding/json
// matches them (exactly, else ignoring case). A key that repeats is kept
// every time, in order, so that its decoding is encoding/json's: the last
// value wins, a null leaves a string or a number as it was, and a value of
// the wrong type fails the decoding wherever it stands.
type Scan struct {
	names []string
	// vals is the raw value kept per name, nil when absent; a key that
	// repeats adds `,"name":` and its next value, which Object gives as
	// they came.
	vals [][]byte
	// long: the name's values were longer than FieldMax, and are no
	// longer kept.
	long []bool
	// elems maps a top-level array's element index to its name's index
	// in names (-1: not kept).
	elems []int
	// nested is fed the content of names[nestedAt]; nestedKind is the
	// first byte of that value ('{', '"', 'n', ...), 0 when absent, and
	// nestedErr what nested found wrong with it. merge: MergeNested.
	nested     *Scan
	nestedAt   int
	nestedKind byte
	nestedErr  error
	merge      bool
	// top is the first byte of the text's value; count, how many
	// elements a top-level array has.
	top   byte
	count int

	stack []byte // '{' or '[' for each open container
	state jsonState
	lit   string // what is left of true, false or null
	// isKey: the string being read is an object's key; inKey: a
	// top-level object's, kept raw in key (up to jsonKeyMax bytes).
	isKey, inKey bool
	key          []byte
	keyLong      bool
	// next is the index in names of the key just read, or of the
	// element about to begin (-1: not one of them); capture is that of
	// the value being kept (-1: none).
	next, capture int
	// feedRaw: the nested field's value is an object, fed as it is;
	// feedString: a string, fed its unescaped content.
	feedRaw, feedString bool
	hex                 []byte // the digits of a \u escape
	surrogate           rune   // a high surrogate waiting for its low half
	off                 int64
	err                 error
	ended               bool
}

const (
	// FieldMax bounds one field kept: a jid, a class or queue name,
	// a number. A longer one is not what a framework writes there.
	FieldMax = 4 << 10
	// jsonKeyMax bounds a top-level key kept to be matched: a name of
	// up to 21 characters, each escaped as \uXXXX (6 bytes). At 64,
	// "enqueued_at" escaped whole (66 bytes) went unmatched, where
	// encoding/json reads it.
	jsonKeyMax = 6 * 21
	// jsonMaxDepth is encoding/json's own limit on nesting.
	jsonMaxDepth = 10000
)

// New keeps names; nested (nil: none) is fed the content of
// the field nestedName, one of names.
func New(names []string, nestedName string, nested *Scan) *Scan {
	s := &Scan{names: names, vals: make([][]byte, len(names)), long: make([]bool, len(names)), nested: nested, nestedAt: -1}
	for i, n := range names {
		if n == nestedName && nested != nil {
			s.nestedAt = i
		}
		if k, err := strconv.Atoi(n); err == nil && k >= 0 && k < maxElement && strconv.Itoa(k) == n {
			for len(s.elems) <= k {
				s.elems = append(s.elems, -1)
			}
			s.elems[k] = i
		}
	}
	s.Reset()
	return s
}

// maxElement bounds the index of an array element that can be kept: a
// framework's array is a tuple of a few.
const maxElement = 64

// MergeNested makes the nested field read as encoding/json reads one it
// decodes into a struct: each object given under its key adds to the
// fields of the ones before it (the nested scan keeps them all), a null
// is passed over, and a value of any other type stays NestedKind whatever
// follows it. Without it the field's last value is the one read, as
// encoding/json reads a json.RawMessage or a string. It returns s.
func (s *Scan) MergeNested() *Scan {
	s.merge = true
	return s
}

// Reset makes s ready for another text (its stack kept: a deep one is
// not allocated again for every job).
func (s *Scan) Reset() {
	for i := range s.vals {
		s.vals[i], s.long[i] = nil, false
	}
	s.nestedKind, s.nestedErr = 0, nil
	if s.nested != nil {
		s.nested.Reset()
	}
	s.restart()
}

// restart makes s ready to read another text whose fields add to those
// kept: the next object given under a merged nested field's key.
func (s *Scan) restart() {
	*s = Scan{names: s.names, vals: s.vals, long: s.long, elems: s.elems,
		nested: s.nested, nestedAt: s.nestedAt, nestedKind: s.nestedKind, nestedErr: s.nestedErr, merge: s.merge,
		stack: s.stack[:0], key: s.key[:0], hex: s.hex[:0], next: -1, capture: -1}
}

// Write feeds the next bytes of the text. It never fails, so that a
// reply is always read to its end: a syntax error is kept for Finish.
func (s *Scan) Write(p []byte) (int, error) {
	for i := 0; i < len(p) && s.err == nil; {
		if s.state == jsString {
			// Nearly all of a job is its arguments' strings: a plain
			// run is passed over, or kept, in one go.
			if n := plainRun(p[i:]); n > 0 {
				s.plain(p[i : i+n])
				s.off += int64(n)
				i += n
				continue
			}
		}
		b := p[i]
		capture, key := s.capture, s.inKey
		if again := s.step(b); again {
			// b ended a number: it is not the number's, and is read
			// again after it.
			continue
		}
		if capture < 0 {
			capture = s.capture // a value kept begins with b
		}
		if capture >= 0 {
			s.keep(capture, p[i:i+1])
		}
		if s.feedRaw {
			// The object's last byte went with its end (valueEnded).
			_, _ = s.nested.Write(p[i : i+1])
		}
		if key && s.inKey {
			s.keepKey(p[i : i+1])
		}
		s.off++
		i++
	}
	return len(p), nil
}

// Finish ends the text, and returns its syntax error.
func (s *Scan) Finish() error {
	if s.err != nil {
		return s.err
	}
	if len(s.stack) == 0 {
		switch s.state {
		case jsZero, jsInt, jsFrac, jsExp:
			s.valueEnded() // a number is the whole text
		}
	}
	if !s.ended {
		s.err = errors.New("unexpected end of JSON input")
	}
	return s.err
}

// Object is what was kept, as a JSON object of the fields found (the
// nested one left out), each key given as often as the text gave it.
func (s *Scan) Object() []byte {
	out := []byte{'{'}
	for i, v := range s.vals {
		if v == nil || i == s.nestedAt {
			continue
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, '"')
		out = append(out, s.names[i]...)
		out = append(out, '"', ':')
		out = append(out, v...)
	}
	return append(out, '}')
}

// Top is the first byte of the text's value ('{', '[', '"', 't', 'f',
// 'n' or a number's); 0 before any.
func (s *Scan) Top() byte { return s.top }

// TooLong is the name of a field kept whose value (its values, together,
// when its key repeats) was longer than FieldMax ("": none).
func (s *Scan) TooLong() string {
	for i, long := range s.long {
		if long {
			return s.names[i]
		}
	}
	return ""
}

// Len is how many elements a top-level array has (0 for any other
// value).
func (s *Scan) Len() int { return s.count }

// Nested is the scan fed the nested field's content (nil: none).
func (s *Scan) Nested() *Scan { return s.nested }

// NestedKind is the first byte of the nested field's value, 0 when the
// text has no such field; NestedErr is what the nested scan found wrong
// with it.
func (s *Scan) NestedKind() byte { return s.nestedKind }

// NestedErr is the nested field's own syntax error.
func (s *Scan) NestedErr() error { return s.nestedErr }

// KindOf names the JSON type a value's first byte starts, as
// encoding/json names it in its errors.
func KindOf(first byte) string {
	switch first {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "bool"
	case 'n':
		return "null"
	}
	return "number"
}
