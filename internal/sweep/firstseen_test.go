package sweep_test

import (
	"context"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/redistest"
	"github.com/slotexporter/slot_exporter/internal/track"
)

// TestFirstSeen: the on-call page asks the sweeper when a member was first
// seen; it answers with the Redis time of the sweep that first saw it, and
// not at all for members, families or kinds it does not track.
func TestFirstSeen(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	ctx := context.Background()
	h := exportertest.New(t, c, `
redis: {addr: "`+srv.Addr+`"}
families:
  - {name: streams, kind: slotset, match: "s:*", limit: 3, ttl: 60s, heartbeat_interval: 10s, max_hold: 10m}
  - {name: legacy, kind: counter, match: "c:*", limit: 3}
`)
	exp := float64(time.Now().Add(time.Minute).UnixMilli())
	c.ZAdd(ctx, "s:{u1}", redis.Z{Score: exp, Member: "m1"})
	c.Set(ctx, "c:{u1}", 1, 0)
	before, _ := c.Time(ctx).Result()
	h.Sweep()
	after, _ := c.Time(ctx).Result()
	c.ZAdd(ctx, "s:{u1}", redis.Z{Score: exp + 5000, Member: "m1"})
	h.Sweep()

	memberHash := func(key, member string) uint64 { return track.MemberHash(xxhash.New(), key, member) }
	at, ok := h.Sweeper.FirstSeen("streams", "s:{u1}", memberHash("s:{u1}", "m1"))
	if !ok || at < before.UnixMilli() || at > after.UnixMilli() {
		t.Errorf("FirstSeen(m1) = %d, %v; want the first sweep's time, in [%d, %d]", at, ok, before.UnixMilli(), after.UnixMilli())
	}
	for _, q := range [][3]string{
		{"streams", "s:{u1}", "m2"},
		{"streams", "s:{u2}", "m1"},
		{"legacy", "c:{u1}", ""},
		{"nosuch", "s:{u1}", "m1"},
	} {
		if _, ok := h.Sweeper.FirstSeen(q[0], q[1], memberHash(q[1], q[2])); ok {
			t.Errorf("FirstSeen%v answered for something not tracked", q)
		}
	}
}
