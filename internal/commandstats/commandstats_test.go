package commandstats

import "testing"

func TestParse(t *testing.T) {
	info := "# Commandstats\r\n" +
		"cmdstat_zrange:calls=1200,usec=3000,usec_per_call=2.50,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_config|resetstat:calls=1,usec=12,usec_per_call=12.00,rejected_calls=0,failed_calls=0\r\n" +
		"not a stat line\r\n" +
		"cmdstat_pttl:calls=oops,usec=7\r\n"
	got := Parse(info)
	want := map[string]Stat{"zrange": {1200, 3000}, "config|resetstat": {1, 12}, "pttl": {0, 7}}
	if len(got) != len(want) {
		t.Fatalf("Parse: %v, want %v", got, want)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("Parse[%q] = %v, want %v", k, got[k], w)
		}
	}
}

func TestPerCall(t *testing.T) {
	for _, c := range []struct {
		from, to Stat
		want     float64
		ok       bool
	}{
		{Stat{100, 250}, Stat{300, 750}, 2.5, true},
		{Stat{100, 250}, Stat{100, 250}, 0, false}, // no call between
		{Stat{100, 250}, Stat{10, 20}, 0, false},   // reset
	} {
		got, ok := PerCall(c.from, c.to)
		if got != c.want || ok != c.ok {
			t.Errorf("PerCall(%v, %v) = %v, %v; want %v, %v", c.from, c.to, got, ok, c.want, c.ok)
		}
	}
}

func TestPlus(t *testing.T) {
	if got := (Stat{3, 10}).Plus(Stat{4, 20}); got != (Stat{7, 30}) {
		t.Errorf("Plus = %v, want {7 30}", got)
	}
}
