package resp

// ParseInt reads s as Redis reads an integer value (string2ll in its
// util.c, which INCR, INCRBY and DECR use): optional '-', then decimal
// digits with no leading zero, nothing else (no space, no '+', no "-0"),
// at most 20 characters, within int64. A value Redis refuses ("value is
// not an integer or out of range") is refused here, so that a counter the
// application can no longer INCR is skipped as bad_value rather than read
// as healthy.
func ParseInt(s string) (int64, bool) {
	// LONG_STR_SIZE (21) in Redis: longer never parses.
	if len(s) == 0 || len(s) > 20 {
		return 0, false
	}
	if s == "0" {
		return 0, true
	}
	neg := s[0] == '-'
	p := s
	if neg {
		p = s[1:]
	}
	if len(p) == 0 || p[0] < '1' || p[0] > '9' {
		return 0, false
	}
	var v uint64
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if v > (1<<64-1)/10 || v*10 > 1<<64-1-d {
			return 0, false
		}
		v = v*10 + d
	}
	if neg {
		if v > 1<<63 {
			return 0, false
		}
		return -int64(v-1) - 1, true
	}
	if v > 1<<63-1 {
		return 0, false
	}
	return int64(v), true
}
