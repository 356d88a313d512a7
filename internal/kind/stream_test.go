package kind

import (
	"context"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/redisread"
	"github.com/slotexporter/slot_exporter/internal/redistest"
	"github.com/slotexporter/slot_exporter/internal/snapshot"
	"github.com/slotexporter/slot_exporter/internal/track"
)

// TestStreamReadsBothProtocols reads the same streams over RESP2 and RESP3
// (XINFO GROUPS is a list of pairs in one, a map in the other): a lag Redis
// cannot tell (after an XDEL) is absent, not 0; a group name that is not
// UTF-8 comes out escaped as a label value; a stream without groups is
// bad_value, a list wrong_type, a missing key gone.
func TestStreamReadsBothProtocols(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	rc := srv.Client()
	for _, id := range []string{"1-1", "2-1", "3-1"} {
		if err := rc.XAdd(ctx, &redis.XAddArgs{Stream: "s:a", ID: id, Values: []string{"f", "v"}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, g := range [][2]string{{"g0", "0"}, {"g\xff", "0"}, {"g2", "$"}} {
		if err := rc.XGroupCreate(ctx, "s:a", g[0], g[1]).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := rc.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g0", Consumer: "c1", Streams: []string{"s:a", ">"}, Count: 1, Block: -1}).Err(); err != nil {
		t.Fatal(err)
	}
	// An entry deleted after g0's and g\xff's last delivered one: Redis can
	// no longer tell their lag. g2 starts after it and still can.
	rc.XDel(ctx, "s:a", "2-1")
	rc.XAdd(ctx, &redis.XAddArgs{Stream: "s:none", Values: []string{"f", "v"}})
	rc.RPush(ctx, "s:list", "x")

	for _, proto := range []int{2, 3} {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr, Protocol: proto})
		defer c.Close()
		keys := []string{"s:a", "s:none", "s:list", "s:gone"}
		reads := make([]redisread.KeyRead, len(keys))
		if err := (&streamReads{maxHold: 60_000, maxDeliveries: 5, passes: &pelPasses{m: map[string]*pelPass{}}}).Read(ctx, c, keys, reads); err != nil {
			t.Fatalf("RESP%d: %v", proto, err)
		}
		if r := reads[1]; r.Status != redisread.Skipped || r.Skip != redisread.SkipBadValue {
			t.Errorf("RESP%d: stream without groups: %+v, want skipped bad_value", proto, r)
		}
		if r := reads[2]; r.Status != redisread.Skipped || r.Skip != redisread.SkipWrongType {
			t.Errorf("RESP%d: list: %+v, want skipped wrong_type", proto, r)
		}
		if r := reads[3]; r.Status != redisread.Gone {
			t.Errorf("RESP%d: missing key: %+v, want gone", proto, r)
		}
		info, ok := reads[0].Extra.(*streamInfo)
		if reads[0].Status != redisread.OK || !ok {
			t.Fatalf("RESP%d: s:a: %+v", proto, reads[0])
		}
		want := map[string]groupInfo{
			"g0":    {name: "g0", pending: 1, lag: -1, oldest: 1},
			"g\xff": {name: "g\xff", pending: 0, lag: -1, oldest: -1},
			"g2":    {name: "g2", pending: 0, lag: 0, oldest: -1},
		}
		if info.length != 2 || len(info.groups) != len(want) {
			t.Fatalf("RESP%d: %+v", proto, info)
		}
		for _, g := range info.groups {
			if g != want[g.name] {
				t.Errorf("RESP%d: group %q: %+v, want %+v", proto, g.name, g, want[g.name])
			}
		}

		tr := newStream(&config.Family{Kind: config.KindStream, MaxHold: time.Minute, MaxDeliveries: 5}, nil)
		now := time.Now().UnixMilli()
		sw := &Sweep{Now: now, Floor: track.NewFloorTracker(), Carry: track.Carry{}}
		tr.Begin(sw)
		tr.Apply(sw, Key{Read: &reads[0], Hash: 1, User: "a", UserHash: xxhash.Sum64String("a")})
		tr.End(sw, false, false)
		var f snapshot.Family
		tr.Publish(&f)
		if v := find(f.Gauges, snapshot.StreamLag); v == nil || v.V != 0 {
			t.Errorf("RESP%d: lag %+v, want 0 (g2 only)", proto, v)
		}
		extra := tr.UserExtra(track.UserView{User: "a", ID: xxhash.Sum64String("a")})
		got := map[string]float64{}
		for _, v := range extra {
			got[v.Labels[0]] = v.V
		}
		if len(got) != 3 || got[`g\xff`] != 0 || got["g2"] != 0 || got["g0"] != float64(now-1)/1000 {
			t.Errorf("RESP%d: oldest by group %v", proto, got)
		}
	}
}

func find(vs []snapshot.Value, m *snapshot.Metric) *snapshot.Value {
	for i := range vs {
		if vs[i].Metric == m {
			return &vs[i]
		}
	}
	return nil
}
