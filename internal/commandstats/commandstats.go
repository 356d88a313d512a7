// Package commandstats reads INFO commandstats: how many calls of each
// command Redis ran and how long it spent inside them, whoever sent them.
package commandstats

import (
	"strconv"
	"strings"
)

// Stat is one command's line: calls, and the time spent in them (µs).
type Stat struct {
	Calls int64
	Usec  int64
}

// Plus is s and o together: one command's stats over several servers.
func (s Stat) Plus(o Stat) Stat { return Stat{Calls: s.Calls + o.Calls, Usec: s.Usec + o.Usec} }

// Parse reads an INFO commandstats reply into stats by lower-case command
// name ("zrange", "config|resetstat"). Lines it does not know are skipped.
func Parse(info string) map[string]Stat {
	out := map[string]Stat{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		var st Stat
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "calls":
				st.Calls, _ = strconv.ParseInt(v, 10, 64)
			case "usec":
				st.Usec, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		out[strings.TrimPrefix(name, "cmdstat_")] = st
	}
	return out
}

// PerCall is the mean time of one call between two readings of a
// command's stat (µs), and false if no call was counted between them or
// the counts went back (a restart, CONFIG RESETSTAT).
func PerCall(from, to Stat) (float64, bool) {
	calls, usec := to.Calls-from.Calls, to.Usec-from.Usec
	if calls <= 0 || usec < 0 {
		return 0, false
	}
	return float64(usec) / float64(calls), true
}
