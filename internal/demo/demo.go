// Package demo runs an embedded Redis (miniredis) with simulated traffic
// for --demo: every recipe the exporter watches, healthy and with each of
// its failures, plus the faults no workload makes on its own (a restart
// that loses the data, keys of the wrong type, values that are not
// numbers), so that every signal of the catalog moves within a minute.
// Tests use a real redis-server instead.
package demo

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/simulator"
)

// Run is an embedded Redis with simulated traffic.
type Run struct {
	// Config is the exporter config that watches the embedded Redis.
	Config []byte
	mr     *miniredis.Miniredis
	info   *identity
	client *redis.Client
	sim    *simulator.Sim
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Start starts the embedded Redis and the traffic.
func Start(ctx context.Context, logger *slog.Logger) (*Run, error) {
	mr := miniredis.NewMiniRedis()
	if err := mr.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("embedded redis: %w", err)
	}
	d := &Run{mr: mr, info: newIdentity(), Config: []byte(fmt.Sprintf(config, mr.Addr()))}
	d.info.serve(mr)
	d.client = redis.NewClient(&redis.Options{Addr: mr.Addr(), DisableIdentity: true})
	ctx, d.cancel = context.WithCancel(ctx)

	// miniredis expires keys only when its clock is advanced; keep it in
	// step with real time so that TTLs run out as they would in Redis.
	d.every(ctx, 100*time.Millisecond, func() func() {
		last := time.Now()
		return func() {
			now := time.Now()
			mr.FastForward(now.Sub(last))
			last = now
		}
	}())

	sim, err := simulator.Run(ctx, d.client, workload)
	if err != nil {
		d.Stop()
		return nil, fmt.Errorf("simulator: %w", err)
	}
	d.sim = sim
	d.faults(ctx, logger)
	logger.Info("demo: embedded Redis with simulated traffic", "addr", mr.Addr())
	return d, nil
}

// every runs f every d until ctx ends.
func (d *Run) every(ctx context.Context, period time.Duration, f func()) {
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				f()
			}
		}
	}()
}

// Stop ends the traffic and the embedded Redis.
func (d *Run) Stop() {
	if d.cancel != nil {
		d.cancel()
	}
	if d.sim != nil {
		d.sim.Stop()
	}
	d.wg.Wait()
	if d.client != nil {
		_ = d.client.Close()
	}
	d.mr.Close()
}
