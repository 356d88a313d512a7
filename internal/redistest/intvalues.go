package redistest

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// IntEdgeValues are string values at the edges of what Redis takes as an
// integer (INCR's string2ll): spaces, signs, leading zeros, "-0", the
// int64 bounds and one past them, 20 and 21 characters, other digits
// than ASCII, exponents, NUL, and one value past the exporter's read
// bound. Which of them Redis takes is asked of Redis itself (RedisInt),
// never written down here.
var IntEdgeValues = []string{
	"7", "0", "-1", " 7", "7 ", "\t7", "7\n", "7\r\n", "+7", "07", "00", "-0", "-07", "--7", "-", "",
	"1e3", "0x10", "1.0", "1_000", "7\x00", "\xd9\xa1", "\xef\xbc\x97", // Arabic-Indic 1, fullwidth 7
	"9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
	"18446744073709551616", "00000000000000000001", "12345678901234567890", "-1234567890123456789",
	"123456789012345678901", "1" + strings.Repeat("0", 600),
}

// RedisInt asks Redis whether it takes v as an integer: SET scratch v,
// then INCRBY scratch 0, which answers the value or refuses it.
func RedisInt(t testing.TB, c *redis.Client, v string) (int64, bool) {
	t.Helper()
	ctx := context.Background()
	const scratch = "redistest:int-edge"
	if err := c.Set(ctx, scratch, v, 0).Err(); err != nil {
		t.Fatal(err)
	}
	defer c.Del(ctx, scratch)
	n, err := c.IncrBy(ctx, scratch, 0).Result()
	if err != nil {
		if !strings.Contains(err.Error(), "value is not an integer") {
			t.Fatalf("INCRBY %q 0: %v", v, err)
		}
		return 0, false
	}
	return n, true
}
