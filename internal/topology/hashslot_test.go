package topology

import (
	"context"
	"fmt"
	"testing"

	"github.com/slotexporter/slot_exporter/internal/redistest"
)

// TestHashSlotMatchesRedis asks a real Redis for CLUSTER KEYSLOT of keys
// with and without hash tags (an empty tag "{}" hashes the whole key).
func TestHashSlotMatchesRedis(t *testing.T) {
	// CLUSTER KEYSLOT needs a server with cluster support on; a lone
	// node answers it without slots assigned.
	srv := redistest.Start(t, "--cluster-enabled", "yes")
	c := srv.Client()
	ctx := context.Background()
	keys := []string{"", "a", "joishi:streams:{000000000123}", "{user1000}.following", "foo{}{bar}", "foo{{bar}}zap", "foo{bar}{zap}", "x{", "}{"}
	for i := range 200 {
		keys = append(keys, fmt.Sprintf("rate:%d:window", i), fmt.Sprintf("lock:{u%d}", i))
	}
	for _, k := range keys {
		want, err := c.ClusterKeySlot(ctx, k).Result()
		if err != nil {
			t.Fatalf("CLUSTER KEYSLOT %q: %v", k, err)
		}
		if got := HashSlot(k); int64(got) != want {
			t.Errorf("HashSlot(%q) = %d, Redis says %d", k, got, want)
		}
	}
}

func TestShardOwnsEachKeyOnce(t *testing.T) {
	const n = 3
	counts := make([]int, n)
	for i := range 3000 {
		k := fmt.Sprintf("joishi:streams:{%012d}", i)
		owners := 0
		for s := range n {
			if (Shard{Index: s, Count: n}).Owns(k) {
				owners++
				counts[s]++
			}
		}
		if owners != 1 {
			t.Fatalf("%s is owned by %d shards", k, owners)
		}
	}
	for s, c := range counts {
		if c < 800 || c > 1200 {
			t.Errorf("shard %d/%d owns %d of 3000 keys: the shards are uneven", s, n, c)
		}
	}
	if !(Shard{}).Owns("anything") {
		t.Error("the zero shard must own every key")
	}
}
