package config

import (
	"fmt"
	"strconv"
	"strings"
)

// MaxShardCount is the number of cluster hash slots: a shard with no slot
// would read nothing.
const MaxShardCount = 16384

// shardRule is the one rule of sampling.shard, in the file and in the
// --sampling.shard flag that overrides it, so that both say it alike.
const shardRule = "want i/n with 0 <= i < n <= 16384, such as 0/3"

// ParseShard reads a shard, "i/n" with 0 <= i < n <= 16384; "" is 0/1, the
// whole keyspace. The error names sampling.shard.
func ParseShard(v string) (index, count int, err error) {
	if v == "" {
		return 0, 1, nil
	}
	a, b, ok := strings.Cut(v, "/")
	i, err1 := strconv.Atoi(strings.TrimSpace(a))
	n, err2 := strconv.Atoi(strings.TrimSpace(b))
	if !ok || err1 != nil || err2 != nil || n < 1 || n > MaxShardCount || i < 0 || i >= n {
		return 0, 0, fmt.Errorf("sampling.shard: %s, not %q", shardRule, v)
	}
	return i, n, nil
}

// CheckShardFlag validates the value of the --sampling.shard flag with the
// rule of sampling.shard. An explicit empty value is refused, though the
// file's "" means the whole keyspace: in a manifest it is what an unset
// variable such as $(POD_INDEX) leaves behind, and 0/1 says "whole" on purpose.
func CheckShardFlag(v string) error {
	if _, _, err := ParseShard(v); err != nil || v == "" {
		return fmt.Errorf("--sampling.shard: %s, not %q", shardRule, v)
	}
	return nil
}

// OverrideShard replaces the file's sampling.shard with v (the
// --sampling.shard flag), so that one config file can serve every replica
// and each replica is told its share on the command line.
func (c *Config) OverrideShard(v string) error {
	if err := CheckShardFlag(v); err != nil {
		return err
	}
	i, n, _ := ParseShard(v)
	c.Sampling.Shard, c.Sampling.ShardIndex, c.Sampling.ShardCount = v, i, n
	return nil
}
