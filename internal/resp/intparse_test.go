package resp

import (
	"strings"
	"testing"

	"github.com/slotexporter/slot_exporter/internal/redistest"
)

// TestParseIntAgreesWithRedis checks ParseInt itself on every value of
// the table, and on every prefix of them.
func TestParseIntAgreesWithRedis(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	seen := map[string]bool{}
	for _, v := range redistest.IntEdgeValues {
		if len(v) > 64 {
			v = v[:64]
		}
		for j := 0; j <= len(v); j++ {
			for _, s := range []string{v[:j], strings.TrimSpace(v[:j])} {
				if seen[s] {
					continue
				}
				seen[s] = true
				want, wok := redistest.RedisInt(t, c, s)
				got, ok := ParseInt(s)
				if ok != wok || got != want {
					t.Errorf("ParseInt(%q) = %d, %v; Redis: %d, %v", s, got, ok, want, wok)
				}
			}
		}
	}
}
