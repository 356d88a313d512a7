package redisread

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

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

// TestRawReadsLongMembers: members around the raw reader's 64 KiB buffer
// (one byte short, exact, one over, with the CRLF split across two reads)
// and one of 64 MB hash through the raw path as through go-redis: the raw
// path streams a member into its hash instead of holding it whole.
func TestRawReadsLongMembers(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	ctx := context.Background()
	const buf = 64 << 10
	var zs []redis.Z
	for i, n := range []int{buf - 3, buf - 2, buf - 1, buf, buf + 1, 2*buf - 1, 64 << 20} {
		zs = append(zs, redis.Z{Score: float64(i), Member: strings.Repeat(string(rune('a'+i)), n)})
	}
	if err := c.ZAdd(ctx, "s:{long}", zs...).Err(); err != nil {
		t.Fatal(err)
	}
	p := zsetPlan(10, 100, Edges{})
	raw, err := readKeys(ctx, c, p, []string{"s:{long}"})
	if err != nil {
		t.Fatal(err)
	}
	slow, err := readKeys(ctx, goRedisOnly{c}, p, []string{"s:{long}"})
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) != 1 || len(raw[0].Members) != len(zs) || !slices.Equal(inOrder(raw[0]).Members, inOrder(slow[0]).Members) {
		t.Errorf("raw %+v\ngo-redis %+v", raw, slow)
	}
}
