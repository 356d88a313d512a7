package kind

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

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
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(rc.RPush(ctx, "q:a", "x", "y", "z").Err())
	must(rc.RPush(ctx, "q:ttl", "1", "2").Err())
	must(rc.PExpire(ctx, "q:ttl", time.Hour).Err())
	must(rc.Set(ctx, "q:str", "not a list", 0).Err())
	must(rc.RPush(ctx, "q:big", big, big, "small").Err())
	keys := []string{"q:a", "q:ttl", "q:none", "q:str", "q:big"}
	conn, err := resp.Dial(ctx, rc, false)
	must(err)
	defer conn.Close()
	for _, l := range []listReads{{left: false}, {left: true}, {left: true, withTTL: true}, {withTTL: true}} {
		want := make([]redisread.KeyRead, len(keys))
		must(l.Read(ctx, rc, keys, want))
		got := make([]redisread.KeyRead, len(keys))
		must(l.ReadRaw(ctx, conn, keys, got))
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
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	must(l.ReadRaw(ctx, conn, []string{"q:big"}, got))
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 4<<20 {
		t.Errorf("reading a 16 MB head allocated %d bytes", n)
	}
	if got[0].Status != redisread.OK || got[0].Value != 3 {
		t.Errorf("the big queue: %+v", got[0])
	}
}
