package jsonfields

// The scan itself: one byte at a time, what encoding/json's scanner
// checks, and what a Scan keeps of it.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
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
	if s.long[i] {
		return
	}
	if len(s.vals[i])+len(b) > FieldMax {
		s.long[i], s.vals[i] = true, nil
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
	switch {
	case len(s.stack) == 0:
		s.top = b
	case len(s.stack) == 1 && s.stack[0] == '[':
		if s.count < len(s.elems) {
			s.next = s.elems[s.count]
		}
		s.count++
	}
	if i := s.next; i >= 0 {
		s.next = -1
		switch {
		case i == s.nestedAt && s.merge:
			if b == '{' {
				s.nested.restart()
				s.feedRaw = true
			}
			// A null adds nothing; a value of another type fails the
			// decoding, whatever comes after it.
			if k := s.nestedKind; k == 0 || k == 'n' || k == '{' && b != 'n' {
				s.nestedKind = b
			}
		case i == s.nestedAt:
			// The last of duplicates wins.
			s.nested.Reset()
			s.nestedKind, s.nestedErr = b, nil
			s.feedRaw, s.feedString = b == '{', b == '"'
		default:
			if s.vals[i] != nil {
				s.keep(i, []byte(`,"`+s.names[i]+`":`))
			}
			s.capture = i
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
			if err := s.nested.Finish(); s.nestedErr == nil {
				s.nestedErr = err // a merged field's first error stands
			}
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
