// Package jsonfields reads a JSON text as it streams in and keeps only
// the raw values of a few top-level fields: what a queue framework's job
// is read for (its enqueued time, its jid), whatever the size of its
// arguments.
package jsonfields

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Scan reads one JSON text as it streams in (an io.Writer, fed by
// resp.Conn.ReadBulkTo or with a whole value), checks its syntax as
// encoding/json does, and keeps only what its user reads of it: the raw
// values of a few top-level fields, and optionally the content of one
// field (an object, or a string holding a JSON text, as a Sidekiq work
// entry's payload), fed to a nested Scan. A job's JSON is as large as
// its arguments (internal/kind's framework_stream.go says what reading
// them whole cost); this holds at most FieldMax bytes a field kept and a
// byte a level of nesting, whatever the size of the text.
//
// Object turns what was kept back into a small JSON object, which the
// caller decodes with encoding/json as it decoded the whole text: the
// fields' types are checked as before. Keys match as encoding/json
// matches them (exactly, else ignoring case), and the last of duplicate
// keys wins.
type Scan struct {
	names []string
	vals  [][]byte // raw value per name; nil: absent
	// tooLong is the name whose value was longer than FieldMax ("":
	// none).
	tooLong string
	// nested is fed the content of names[nestedAt]; nestedKind is the
	// first byte of that value ('{', '"', 'n', ...), 0 when absent, and
	// nestedErr what nested found wrong with it.
	nested     *Scan
	nestedAt   int
	nestedKind byte
	nestedErr  error
	// top is the first byte of the text's value.
	top byte

	stack []byte // '{' or '[' for each open container
	state jsonState
	lit   string // what is left of true, false or null
	// isKey: the string being read is an object's key; inKey: a
	// top-level object's, kept raw in key (up to jsonKeyMax bytes).
	isKey, inKey bool
	key          []byte
	keyLong      bool
	// next is the index in names of the key just read (-1: not one of
	// them); capture is that of the value being kept (-1: none).
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
	// jsonKeyMax bounds a top-level key kept to be matched: longer than
	// any name looked for, escaped.
	jsonKeyMax = 64
	// jsonMaxDepth is encoding/json's own limit on nesting.
	jsonMaxDepth = 10000
)

type jsonState uint8

const (
	jsValue    jsonState = iota // a value is expected
	jsArrFirst                  // after '[': a value or ']'
	jsObjFirst                  // after '{': a key or '}'
	jsObjKey                    // after ',' in an object: a key
	jsColon                     // after a key
	jsAfter                     // after a value in a container
	jsEnd                       // after the text's value
	jsString                    // inside a string
	jsEscape                    // after '\' in a string
	jsHex                       // in the digits of \u
	jsNeg                       // after '-'
	jsZero                      // after a leading 0
	jsInt                       // in the integer part
	jsDot                       // after '.'
	jsFrac                      // in the fraction
	jsE                         // after 'e'
	jsESign                     // after the exponent's sign
	jsExp                       // in the exponent
	jsLiteral                   // in true, false or null
)

// New keeps names; nested (nil: none) is fed the content of
// the field nestedName, one of names.
func New(names []string, nestedName string, nested *Scan) *Scan {
	s := &Scan{names: names, vals: make([][]byte, len(names)), nested: nested, nestedAt: -1}
	if nested != nil {
		for i, n := range names {
			if n == nestedName {
				s.nestedAt = i
			}
		}
	}
	s.Reset()
	return s
}

// Reset makes s ready for another text (its stack kept: a deep one is
// not allocated again for every job).
func (s *Scan) Reset() {
	for i := range s.vals {
		s.vals[i] = nil
	}
	*s = Scan{names: s.names, vals: s.vals, nested: s.nested, nestedAt: s.nestedAt,
		stack: s.stack[:0], key: s.key[:0], hex: s.hex[:0], next: -1, capture: -1}
	if s.nested != nil {
		s.nested.Reset()
	}
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

// plainRun is how many bytes at the start of p are a string's plain
// content: no quote, no backslash, no control character.
func plainRun(p []byte) int {
	for i, b := range p {
		if b == '"' || b == '\\' || b < 0x20 {
			return i
		}
	}
	return len(p)
}

// plain takes a plain run of a string's content.
func (s *Scan) plain(b []byte) {
	switch {
	case s.inKey:
		s.keepKey(b)
	case s.capture >= 0:
		s.keep(s.capture, b)
	}
	switch {
	case s.feedRaw:
		_, _ = s.nested.Write(b)
	case s.feedString:
		s.feed(b)
	}
}

func (s *Scan) keep(i int, b []byte) {
	if s.tooLong == s.names[i] {
		return
	}
	if len(s.vals[i])+len(b) > FieldMax {
		s.tooLong, s.vals[i] = s.names[i], nil
		return
	}
	s.vals[i] = append(s.vals[i], b...)
}

func (s *Scan) keepKey(b []byte) {
	if len(s.key)+len(b) > jsonKeyMax {
		s.keyLong = true
		return
	}
	s.key = append(s.key, b...)
}

// feed passes unescaped content of the nested field's string on.
func (s *Scan) feed(b []byte) {
	if s.surrogate != 0 {
		s.surrogate = 0
		_, _ = s.nested.Write([]byte(string(utf8.RuneError)))
	}
	_, _ = s.nested.Write(b)
}

func (s *Scan) fail(format string, args ...any) {
	s.err = fmt.Errorf(format+" (at byte %d)", append(args, s.off)...)
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

// step reads one byte that is not part of a string's plain run; again is
// set when b ended a number and was not read.
func (s *Scan) step(b byte) (again bool) {
	switch s.state {
	case jsValue, jsArrFirst:
		switch {
		case isSpace(b):
		case b == ']' && s.state == jsArrFirst:
			s.pop()
		default:
			s.beginValue(b)
		}
	case jsObjFirst, jsObjKey:
		switch {
		case isSpace(b):
		case b == '"':
			s.state, s.isKey, s.inKey = jsString, true, len(s.stack) == 1
			s.key, s.keyLong = s.key[:0], false
		case b == '}' && s.state == jsObjFirst:
			s.pop()
		default:
			s.fail("invalid character %q looking for beginning of object key string", b)
		}
	case jsColon:
		switch {
		case isSpace(b):
		case b == ':':
			s.state = jsValue
		default:
			s.fail("invalid character %q after object key", b)
		}
	case jsAfter:
		top := s.stack[len(s.stack)-1]
		switch {
		case isSpace(b):
		case b == ',' && top == '{':
			s.state = jsObjKey
		case b == ',':
			s.state = jsValue
		case b == '}' && top == '{', b == ']' && top == '[':
			s.pop()
		case top == '{':
			s.fail("invalid character %q after object key:value pair", b)
		default:
			s.fail("invalid character %q after array element", b)
		}
	case jsEnd:
		if !isSpace(b) {
			s.fail("invalid character %q after top-level value", b)
		}
	case jsString:
		switch b {
		case '"':
			s.stringEnded()
		case '\\':
			s.state = jsEscape
		default:
			s.fail("invalid character %q in string literal", b)
		}
	case jsEscape:
		switch b {
		case 'u':
			s.state, s.hex = jsHex, s.hex[:0]
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			s.state = jsString
			if s.feedString {
				s.feed([]byte{unescaped[b]})
			}
		default:
			s.fail("invalid character %q in string escape code", b)
		}
	case jsHex:
		if !isHex(b) {
			s.fail("invalid character %q in \\u hexadecimal character escape", b)
			break
		}
		if s.hex = append(s.hex, b); len(s.hex) == 4 {
			s.state = jsString
			if s.feedString {
				s.feedRune()
			}
		}
	case jsNeg:
		switch {
		case b == '0':
			s.state = jsZero
		case '1' <= b && b <= '9':
			s.state = jsInt
		default:
			s.fail("invalid character %q in numeric literal", b)
		}
	case jsZero, jsInt, jsFrac:
		switch {
		case isDigit(b) && s.state != jsZero:
		case b == '.' && s.state != jsFrac:
			s.state = jsDot
		case b == 'e' || b == 'E':
			s.state = jsE
		default:
			s.valueEnded()
			return true
		}
	case jsDot:
		if !isDigit(b) {
			s.fail("invalid character %q after decimal point in numeric literal", b)
			break
		}
		s.state = jsFrac
	case jsE, jsESign:
		switch {
		case isDigit(b):
			s.state = jsExp
		case s.state == jsE && (b == '+' || b == '-'):
			s.state = jsESign
		default:
			s.fail("invalid character %q in exponent of numeric literal", b)
		}
	case jsExp:
		if !isDigit(b) {
			s.valueEnded()
			return true
		}
	case jsLiteral:
		if b != s.lit[0] {
			s.fail("invalid character %q in literal", b)
			break
		}
		if s.lit = s.lit[1:]; s.lit == "" {
			s.valueEnded()
		}
	}
	return false
}

var unescaped = map[byte]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// feedRune passes a \u escape on as UTF-8, pairing surrogates as
// encoding/json does: one without its other half is U+FFFD.
func (s *Scan) feedRune() {
	var r rune
	for _, h := range s.hex {
		r = r<<4 | rune(hexVal(h))
	}
	if s.surrogate != 0 {
		if d := utf16.DecodeRune(s.surrogate, r); d != utf8.RuneError {
			s.surrogate = 0
			_, _ = s.nested.Write([]byte(string(d)))
			return
		}
		s.feed(nil) // the high half alone
	}
	switch {
	case 0xD800 <= r && r < 0xDC00:
		s.surrogate = r
	case utf16.IsSurrogate(r):
		_, _ = s.nested.Write([]byte(string(utf8.RuneError)))
	default:
		_, _ = s.nested.Write([]byte(string(r)))
	}
}

// beginValue starts the value whose first byte is b.
func (s *Scan) beginValue(b byte) {
	if len(s.stack) == 0 {
		s.top = b
	}
	if i := s.next; i >= 0 {
		// A field looked for: the last of duplicates wins.
		s.next = -1
		if i == s.nestedAt {
			s.nested.Reset()
			s.nestedKind, s.nestedErr = b, nil
			s.feedRaw, s.feedString = b == '{', b == '"'
		} else {
			s.capture, s.vals[i] = i, s.vals[i][:0]
			if s.tooLong == s.names[i] {
				s.tooLong = ""
			}
		}
	}
	switch {
	case b == '{' || b == '[':
		if len(s.stack) >= jsonMaxDepth {
			s.fail("exceeded max depth")
			return
		}
		s.stack = append(s.stack, b)
		s.state = jsObjFirst
		if b == '[' {
			s.state = jsArrFirst
		}
	case b == '"':
		s.state, s.isKey = jsString, false
	case b == '-':
		s.state = jsNeg
	case b == '0':
		s.state = jsZero
	case '1' <= b && b <= '9':
		s.state = jsInt
	case b == 't':
		s.state, s.lit = jsLiteral, "rue"
	case b == 'f':
		s.state, s.lit = jsLiteral, "alse"
	case b == 'n':
		s.state, s.lit = jsLiteral, "ull"
	default:
		s.fail("invalid character %q looking for beginning of value", b)
	}
}

func (s *Scan) pop() {
	s.stack = s.stack[:len(s.stack)-1]
	s.valueEnded()
}

func (s *Scan) stringEnded() {
	if !s.isKey {
		s.valueEnded()
		return
	}
	s.state, s.isKey = jsColon, false
	if s.inKey {
		s.inKey = false
		s.next = s.match()
	}
}

// valueEnded: a value is complete.
func (s *Scan) valueEnded() {
	switch len(s.stack) {
	case 0:
		s.state, s.ended = jsEnd, true
		return
	case 1:
		// A top-level field's value.
		s.capture = -1
		if s.feedRaw || s.feedString {
			if s.feedRaw {
				_, _ = s.nested.Write([]byte{'}'})
			}
			if s.surrogate != 0 {
				s.feed(nil)
			}
			s.feedRaw, s.feedString = false, false
			s.nestedErr = s.nested.Finish()
		}
	}
	s.state = jsAfter
}

// match is the index in names of the top-level key just read, -1 when
// it is none of them.
func (s *Scan) match() int {
	if s.keyLong || s.stack[0] != '{' {
		return -1
	}
	key := string(s.key)
	if bytes.IndexByte(s.key, '\\') >= 0 {
		var ok bool
		if key, ok = unquoteKey(s.key); !ok {
			return -1
		}
	}
	for i, n := range s.names {
		if n == key {
			return i
		}
	}
	for i, n := range s.names {
		if strings.EqualFold(n, key) {
			return i
		}
	}
	return -1
}

// unquoteKey reads the escapes of a key (short, and already checked by
// the scan) as encoding/json does.
func unquoteKey(raw []byte) (string, bool) {
	var key string
	q := make([]byte, 0, len(raw)+2)
	q = append(append(append(q, '"'), raw...), '"')
	return key, json.Unmarshal(q, &key) == nil
}

// Object is what was kept, as a JSON object of the fields found (the
// nested one left out).
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

func isSpace(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\r' }
func isDigit(b byte) bool { return '0' <= b && b <= '9' }
func isHex(b byte) bool {
	return isDigit(b) || 'a' <= b && b <= 'f' || 'A' <= b && b <= 'F'
}

func hexVal(b byte) byte {
	switch {
	case isDigit(b):
		return b - '0'
	case 'a' <= b && b <= 'f':
		return b - 'a' + 10
	}
	return b - 'A' + 10
}

// Top is the first byte of the text's value ('{', '[', '"', 't', 'f',
// 'n' or a number's); 0 before any.
func (s *Scan) Top() byte { return s.top }

// TooLong is the name of the field kept whose value was longer than
// FieldMax ("": none).
func (s *Scan) TooLong() string { return s.tooLong }

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
