package redisread

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/slotexporter/slot_exporter/internal/redistest"
)

// TestIntReadsAsRedisParses: every value at the edges of an integer
// (redistest.IntEdgeValues) is read through the Reader as Redis's own
// INCRBY key 0 takes it: the same number, or skipped as bad_value when
// Redis refuses it (value_too_large when it is longer than MaxValueBytes),
// with PTTL and without.
func TestIntReadsAsRedisParses(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	ctx := context.Background()
	var keys []string
	for i, v := range redistest.IntEdgeValues {
		k := fmt.Sprintf("c:%02d", i)
		if err := c.Set(ctx, k, v, 0).Err(); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	for _, withTTL := range []bool{false, true} {
		reads, err := readKeys(ctx, goRedisOnly{c}, &Plan{Match: "c:*", ScanCount: 100, Reads: &IntReads{WithTTL: withTTL}}, keys)
		if err != nil {
			t.Fatal(err)
		}
		byKey := map[string]KeyRead{}
		for _, r := range reads {
			byKey[r.Key] = r
		}
		for i, v := range redistest.IntEdgeValues {
			r := byKey[keys[i]]
			n, ok := redistest.RedisInt(t, c, v)
			switch {
			case ok:
				if r.Status != OK || r.Value != n {
					t.Errorf("withTTL %v: %q: %+v, want %d as Redis reads it", withTTL, v, r, n)
				}
			case len(v) > MaxValueBytes:
				if r.Status != Skipped || r.Skip != SkipValueTooLarge {
					t.Errorf("withTTL %v: %d bytes: %v %v, want value_too_large", withTTL, len(v), r.Status, r.Skip)
				}
			case v == "" && !withTTL:
				// Without PTTL an empty value cannot be told from a
				// missing key (GETRANGE answers "" for both).
				if r.Status != Gone {
					t.Errorf("empty value without PTTL: %+v, want gone", r)
				}
			default:
				if r.Status != Skipped || r.Skip != SkipBadValue {
					t.Errorf("withTTL %v: %q: %+v, want bad_value (Redis refuses it)", withTTL, v, r)
				}
			}
		}
	}
}

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
