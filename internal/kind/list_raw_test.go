package kind

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/slotexporter/slot_exporter/internal/heaptest"
	"github.com/slotexporter/slot_exporter/internal/redisread"
	"github.com/slotexporter/slot_exporter/internal/redistest"
	"github.com/slotexporter/slot_exporter/internal/resp"
)

// TestListRawReadsMatchGoRedis: a list read over a raw connection gives
// what go-redis gives, key by key, for each pop side, with PTTL and
// without: a queue, one with an expiry, one that does not exist, a string,
// and one whose next element is 16 MB; and the raw read never holds that
// element (it allocates a fraction of it).
func TestListRawReadsMatchGoRedis(t *testing.T) {
	rc := redistest.Start(t).Client()
	ctx := context.Background()
	big := strings.Repeat("h", 16<<20)
	mustNil(t, rc.RPush(ctx, "q:a", "x", "y", "z").Err())
	mustNil(t, rc.RPush(ctx, "q:ttl", "1", "2").Err())
	mustNil(t, rc.PExpire(ctx, "q:ttl", time.Hour).Err())
	mustNil(t, rc.Set(ctx, "q:str", "not a list", 0).Err())
	mustNil(t, rc.RPush(ctx, "q:big", big, big, "small").Err())
	keys := []string{"q:a", "q:ttl", "q:none", "q:str", "q:big"}
	conn, err := resp.Dial(ctx, rc, false)
	mustNil(t, err)
	defer conn.Close()
	for _, l := range []listReads{{left: false}, {left: true}, {left: true, withTTL: true}, {withTTL: true}} {
		want := make([]redisread.KeyRead, len(keys))
		mustNil(t, l.Read(ctx, rc, keys, want))
		got := make([]redisread.KeyRead, len(keys))
		mustNil(t, l.ReadRaw(ctx, conn, keys, got))
		for i := range keys {
			w, g := want[i], got[i]
			if d := g.PTTL - w.PTTL; d < -1000 || d > 1000 {
				t.Errorf("%+v %s: PTTL %d, go-redis %d", l, keys[i], g.PTTL, w.PTTL)
			}
			w.PTTL, g.PTTL = 0, 0
			if g.Key != w.Key || g.Status != w.Status || g.Skip != w.Skip || g.Value != w.Value || g.Extra != w.Extra {
				t.Errorf("%+v %s: raw %+v, go-redis %+v", l, keys[i], g, w)
			}
		}
	}
	// The 16 MB head (left) read alone: allocated in part, never whole.
	l := listReads{left: true}
	got := make([]redisread.KeyRead, 1)
	if n := heaptest.Allocated(func() { mustNil(t, l.ReadRaw(ctx, conn, []string{"q:big"}, got)) }); n > 4<<20 {
		t.Errorf("reading a 16 MB head allocated %d bytes", n)
	}
	if got[0].Status != redisread.OK || got[0].Value != 3 {
		t.Errorf("the big queue: %+v", got[0])
	}
}

// TestClusterListKeysReadRawByNode: in a cluster, lists read by name (a
// literal match, keys read every sweep) are read raw from each key's own
// node: the same as go-redis through the cluster client, key by key, and
// a 16 MB head is never held whole.
func TestClusterListKeysReadRawByNode(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 0)
	cc := cl.Client()
	ctx := context.Background()
	big := strings.Repeat("h", 16<<20)
	var keys []string
	for i := range 30 {
		k := fmt.Sprintf("q:%d", i)
		mustNil(t, cc.RPush(ctx, k, i, "y").Err())
		keys = append(keys, k)
	}
	mustNil(t, cc.RPush(ctx, "q:big", big, "small").Err())
	mustNil(t, cc.Set(ctx, "q:str", "not a list", 0).Err())
	keys = append(keys, "q:big", "q:str", "q:none")
	l := listReads{left: true}
	want := make([]redisread.KeyRead, len(keys))
	mustNil(t, l.Read(ctx, cc, keys, want))
	rd := redisread.NewReader(false)
	defer rd.Close()
	read := func(keys []string) []redisread.KeyRead {
		t.Helper()
		out := make(chan []redisread.KeyRead, len(keys))
		mustNil(t, rd.ReadKeysFrom(ctx, cc, &redisread.Plan{Reads: &l}, keys, nil, out))
		close(out)
		var got []redisread.KeyRead
		for b := range out {
			got = append(got, b...)
		}
		return got
	}
	got := read(keys)
	if len(got) != len(keys) {
		t.Fatalf("%d reads of %d keys", len(got), len(keys))
	}
	for i := range keys {
		if g, w := got[i], want[i]; g.Key != w.Key || g.Status != w.Status || g.Skip != w.Skip || g.Value != w.Value || g.Extra != w.Extra {
			t.Errorf("%s: raw by node %+v, go-redis %+v", keys[i], g, w)
		}
	}
	if n := heaptest.Allocated(func() { got = read([]string{"q:big"}) }); n > 4<<20 {
		t.Errorf("reading a 16 MB head in a cluster allocated %d bytes", n)
	}
	if got[0].Status != redisread.OK || got[0].Value != 2 {
		t.Errorf("the big queue: %+v", got[0])
	}

	// A key whose slot is being migrated, already moved: the raw read by
	// node is redirected (ASK) and misses it; ReadBatch, which reads again
	// what moved, follows the redirection through go-redis.
	slot64, err := cc.ClusterKeySlot(ctx, "q:0").Result()
	mustNil(t, err)
	slot := int(slot64)
	from := cl.SlotOwner(slot)
	to := cl.OtherMaster(from)
	mustNil(t, cl.BeginMigration(ctx, slot, from, to))
	if _, err := cl.MoveKeys(ctx, slot, from, to, 100, 0); err != nil {
		t.Fatal(err)
	}
	if got := read([]string{"q:0"}); got[0].Status != redisread.Missed {
		t.Errorf("a key migrated away, read raw by node: %+v, want missed", got[0])
	}
	again, err := rd.ReadBatch(ctx, cc, &redisread.Plan{Reads: &l}, []string{"q:0"})
	mustNil(t, err)
	if again[0].Status != redisread.OK || again[0].Value != 2 {
		t.Errorf("a key migrated away, read again through the cluster client: %+v", again[0])
	}
}
