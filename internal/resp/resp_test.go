package resp

import (
	"math"
	"testing"
)

func TestParseScore(t *testing.T) {
	for in, want := range map[string]float64{
		"0": 0, "-5": -5, "1764532123456": 1764532123456, "123456789012345": 123456789012345,
		"1234567890123456789": 1234567890123456789, "1.5": 1.5, "1e-3": 1e-3, "inf": math.Inf(1),
		"-inf": math.Inf(-1), "1.7645321234560001e+18": 1.7645321234560001e+18,
	} {
		got, err := parseScore([]byte(in))
		if err != nil || got != want {
			t.Errorf("parseScore(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "x", "1..2", "--1"} {
		if _, err := parseScore([]byte(bad)); err == nil {
			t.Errorf("parseScore(%q): no error", bad)
		}
	}
}
