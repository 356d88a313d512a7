package kind

import "testing"

func TestParseRQTime(t *testing.T) {
	for v, want := range map[string]int64{
		// As RQ 1.13 wrote it in a real run (examples/frameworks/rq).
		"2026-12-02T03:47:58.567463Z": 1796183278567,
		"2026-12-02T03:47:58Z":        1796183278000,
	} {
		got, err := parseRQTime(v)
		if err != nil || got != want {
			t.Errorf("%s: %d, %v; want %d", v, got, err, want)
		}
	}
	for _, v := range []string{"", "1796183278", "2026-12-02 03:47:58"} {
		if _, err := parseRQTime(v); err == nil {
			t.Errorf("%q parsed", v)
		}
	}
}
