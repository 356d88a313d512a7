package sweep

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/redisread"
	"github.com/slotexporter/slot_exporter/internal/redistest"
	"github.com/slotexporter/slot_exporter/internal/topology"
)

// TestPacerCountsTheApplicationsCalls: on a real Redis, the application's
// calls are every command but those the slot-set reads and the pace send.
// 500 GETs and 200 SETs count; 300 reads' worth of SCAN, ZSCAN, ZRANGE,
// ZCOUNT and PTTL, and the pace's own INFOs, do not. A read counted as
// the application's would make it look unsteady while the reads go on.
func TestPacerCountsTheApplicationsCalls(t *testing.T) {
	srv := redistest.Start(t)
	rc := srv.Client()
	ctx := context.Background()
	p := newCPUPacer(0.1)
	p.setNodes([]topology.Node{{Addr: srv.Addr, C: rc}})
	p.setSources(nil, func() redisread.SlotReads { return redisread.SlotReads{} })
	logger := slog.New(slog.DiscardHandler)
	calls := func() int64 {
		p.tick(ctx, logger, true)
		p.mu.Lock()
		defer p.mu.Unlock()
		if !p.last.haveCmd {
			t.Fatal("the pacer read no INFO commandstats")
		}
		return p.last.appCalls
	}
	before := calls()
	for range 500 {
		if err := rc.Get(ctx, "app").Err(); err != nil && !errors.Is(err, redis.Nil) {
			t.Fatal(err)
		}
	}
	for range 200 {
		if err := rc.Set(ctx, "app", "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for range 300 {
		for _, err := range []error{
			rc.Scan(ctx, 0, "*", 10).Err(),
			rc.ZScan(ctx, "slots", 0, "", 10).Err(),
			rc.ZRangeWithScores(ctx, "slots", 0, -1).Err(),
			rc.ZCount(ctx, "slots", "-inf", "+inf").Err(),
			rc.PTTL(ctx, "slots").Err(),
		} {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	// The client's connection was made before the first count; nothing
	// else sends commands to this server.
	if got := calls() - before; got != 700 {
		t.Errorf("the application's calls rose by %d; it sent 700 GETs and SETs", got)
	}
}
