package kind

import (
	"context"
	"strconv"
	"strings"
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

// TestStreamCountsPastOnePage: a group with 110,000 pending entries,
// stuck and poison ones spread over the whole PEL (set by XCLAIM IDLE and
// RETRYCOUNT, so no test waits on the clock), and a small group beside it.
// The stuck and redelivered counts are never above the truth, equal it once
// the first walk over the PEL has ended, and stay equal while later walks
// run, against XPENDING IDLE's own count. The walk's Redis cost per sweep
// is logged from INFO commandstats.
func TestStreamCountsPastOnePage(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	rc := srv.Client()
	const n = 110_000
	var ids []string
	for start := 0; start < n; start += 10_000 {
		pipe := rc.Pipeline()
		cmds := make([]*redis.StringCmd, 0, 10_000)
		for i := start; i < min(start+10_000, n); i++ {
			cmds = append(cmds, pipe.XAdd(ctx, &redis.XAddArgs{Stream: "s:big", Values: []string{"n", strconv.Itoa(i)}}))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
		for _, c := range cmds {
			ids = append(ids, c.Val())
		}
	}
	for _, k := range []string{"s:big", "s:small"} {
		if err := rc.XGroupCreateMkStream(ctx, k, "g", "0").Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := rc.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: "c1", Streams: []string{"s:big", ">"}, Count: n, Block: -1}).Err(); err != nil {
		t.Fatal(err)
	}
	// Every 7th entry fresh (idle 0), the others idle an hour; every
	// 10th delivered 9 times.
	var wantStuck, wantPoison int64
	claim := func(idle, retries int64, sel func(i int) bool) {
		pipe := rc.Pipeline()
		var batch []any
		flush := func() {
			if len(batch) > 0 {
				args := append([]any{"XCLAIM", "s:big", "g", "c1", 0}, batch...)
				pipe.Do(ctx, append(args, "IDLE", idle, "RETRYCOUNT", retries, "JUSTID")...)
				batch = nil
			}
		}
		for i, id := range ids {
			if sel(i) {
				batch = append(batch, id)
				if len(batch) == 1000 {
					flush()
				}
			}
		}
		flush()
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
	}
	claim(3_600_000, 1, func(i int) bool { return i%10 != 0 && i%7 != 0 })
	claim(3_600_000, 9, func(i int) bool { return i%10 == 0 && i%7 != 0 })
	claim(0, 1, func(i int) bool { return i%10 != 0 && i%7 == 0 })
	claim(0, 9, func(i int) bool { return i%10 == 0 && i%7 == 0 })
	for i := range ids {
		if i%7 != 0 {
			wantStuck++
		}
		if i%10 == 0 {
			wantPoison++
		}
	}
	// The small group: 3 entries, idle an hour, delivered 9 times.
	for range 3 {
		rc.XAdd(ctx, &redis.XAddArgs{Stream: "s:small", Values: []string{"n", "x"}})
	}
	small, err := rc.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: "c1", Streams: []string{"s:small", ">"}, Count: 3, Block: -1}).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range small[0].Messages {
		rc.Do(ctx, "XCLAIM", "s:small", "g", "c1", 0, m.ID, "IDLE", 3_600_000, "RETRYCOUNT", 9, "JUSTID")
	}
	wantStuck += 3
	wantPoison += 3

	// The truth as Redis itself counts it.
	idle, err := rc.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: "s:big", Group: "g", Idle: time.Minute, Start: "-", End: "+", Count: 2 * n}).Result()
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(idle))+3 != wantStuck {
		t.Fatalf("XPENDING IDLE counts %d stuck in s:big, the test expects %d", len(idle), wantStuck-3)
	}

	tr := newStream(&config.Family{Kind: config.KindStream, MaxHold: time.Minute, MaxDeliveries: 5}, nil)
	sweepOnce := func() (stuck, poison float64, usec int64) {
		rc.ConfigResetStat(ctx)
		sw := &Sweep{Now: time.Now().UnixMilli(), Floor: track.NewFloorTracker(), Carry: track.Carry{}}
		rd := tr.Begin(sw)
		keys := []string{"s:big", "s:small"}
		reads := make([]redisread.KeyRead, len(keys))
		if err := rd.Read(ctx, rc, keys, reads); err != nil {
			t.Fatal(err)
		}
		for i := range reads {
			if reads[i].Status != redisread.OK {
				t.Fatalf("%s: %+v", keys[i], reads[i])
			}
			tr.Apply(sw, Key{Read: &reads[i], Hash: uint64(i), User: keys[i], UserHash: xxhash.Sum64String(keys[i])})
		}
		tr.End(sw, false, false)
		var f snapshot.Family
		tr.Publish(&f)
		info := rc.Info(ctx, "commandstats").Val()
		if _, rest, ok := strings.Cut(info, "cmdstat_xpending:"); ok {
			_, rest, _ = strings.Cut(rest, "usec=")
			v, _, _ := strings.Cut(rest, ",")
			usec, _ = strconv.ParseInt(v, 10, 64)
		}
		return find(f.Gauges, snapshot.StreamStuck).V, find(f.Gauges, snapshot.StreamRedeliver).V, usec
	}
	// 110,000 entries in pages of 2000, 10 pages a sweep: the first walk
	// ends in the 6th sweep.
	walk := (n + streamPendingPage*streamPendingPages - 1) / (streamPendingPage * streamPendingPages)
	for i := 1; i <= 3*walk; i++ {
		stuck, poison, usec := sweepOnce()
		t.Logf("sweep %d: stuck %.0f, redelivered %.0f; XPENDING took Redis %d µs", i, stuck, poison, usec)
		if i < walk {
			if stuck > float64(wantStuck) || poison > float64(wantPoison) {
				t.Errorf("sweep %d, first walk under way: stuck %.0f, redelivered %.0f, above the truth %d, %d", i, stuck, poison, wantStuck, wantPoison)
			}
			continue
		}
		if stuck != float64(wantStuck) || poison != float64(wantPoison) {
			t.Errorf("sweep %d: stuck %.0f, redelivered %.0f; want %d, %d", i, stuck, poison, wantStuck, wantPoison)
		}
	}
}
