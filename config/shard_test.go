package config

import (
	"strings"
	"testing"
)

// TestOverrideShard: the flag's value replaces the file's shard and is held
// to the file's rule, with the flag's name in the error.
func TestOverrideShard(t *testing.T) {
	c, err := Parse([]byte("redis: {addr: 'x:1'}\nsampling: {shard: 0/3}\nfamilies:\n  - {name: f, kind: counter, match: 'c:*', limit: 3}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Sampling.ShardIndex != 0 || c.Sampling.ShardCount != 3 {
		t.Fatalf("file shard parsed as %d/%d", c.Sampling.ShardIndex, c.Sampling.ShardCount)
	}
	if err := c.OverrideShard(" 2 / 5"); err != nil {
		t.Fatal(err)
	}
	if s := c.Sampling; s.ShardIndex != 2 || s.ShardCount != 5 || s.Shard != " 2 / 5" {
		t.Errorf("after the override: %q = %d/%d, want 2/5", s.Shard, s.ShardIndex, s.ShardCount)
	}
	for _, v := range []string{"5/5", "", "/5", "1/16385", "x/2"} {
		err := c.OverrideShard(v)
		want := `--sampling.shard: want i/n with 0 <= i < n <= 16384, such as 0/3, not "` + v + `"`
		if err == nil || err.Error() != want {
			t.Errorf("OverrideShard(%q) = %v, want %s", v, err, want)
		}
		if s := c.Sampling; s.ShardIndex != 2 || s.ShardCount != 5 {
			t.Errorf("a refused %q changed the shard to %d/%d", v, s.ShardIndex, s.ShardCount)
		}
		if _, _, err := ParseShard(v); v != "" && (err == nil || !strings.HasSuffix(err.Error(), strings.TrimPrefix(want, "--sampling.shard"))) {
			t.Errorf("ParseShard(%q) = %v: not the rule the flag gives", v, err)
		}
	}
}
