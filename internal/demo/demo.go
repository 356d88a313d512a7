// Package demo runs an embedded Redis (miniredis) with simulated traffic
// for --demo: healthy holders, crashes, zombies, leaks and the other
// recipes' failures, so that every signal moves within a minute. Tests use
// a real redis-server instead.
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
	Config []byte
	mr     *miniredis.Miniredis
	client *redis.Client
	sim    *simulator.Sim
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// demoConfig uses short times so that every metric moves within minutes:
// ttl 20s, heartbeats every 4s, zombies after 90s, floors after 2m.
const demoConfig = `
redis:
  addr: %q
sampling:
  interval: 2s
  window: 30s
leaks:
  floor_window: 2m
  per_user_series: 50
families:
  - name: streams
    kind: slotset
    match: "joishi:streams:*"
    user: '^joishi:streams:\{?([^}]+)\}?$'
    limit: 3
    ttl: 20s
    heartbeat_interval: 4s
    max_hold: 90s
  - name: streams_legacy
    kind: counter
    match: "joishi:streams-legacy:*"
    user: '^joishi:streams-legacy:\{?([^}]+)\}?$'
    limit: 3
`

// Start starts the embedded Redis and the traffic; Config is the
// exporter config that watches it.
func Start(ctx context.Context, logger *slog.Logger) (*Run, error) {
	mr := miniredis.NewMiniRedis()
	if err := mr.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("embedded redis: %w", err)
	}
	d := &Run{mr: mr, Config: []byte(fmt.Sprintf(demoConfig, mr.Addr()))}
	d.client = redis.NewClient(&redis.Options{Addr: mr.Addr(), DisableIdentity: true})
	ctx, d.cancel = context.WithCancel(ctx)

	// miniredis expires keys only when its clock is advanced; keep it in
	// step with real time so that TTLs run out as they would in Redis.
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		last := time.Now()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				mr.FastForward(now.Sub(last))
				last = now
			}
		}
	}()

	sim, err := simulator.Run(ctx, d.client, simulator.Options{
		Users:             40,
		KeyPrefix:         "joishi:streams:",
		CounterPrefix:     "joishi:streams-legacy:",
		StreamRate:        3,
		StreamDuration:    30 * time.Second,
		TTL:               20 * time.Second,
		HeartbeatInterval: 4 * time.Second,
		CrashRate:         0.1,
		ZombieRate:        0.03,
		FutureRate:        0.02,
		NoRefreshRate:     0.1,
		CounterLeakRate:   0.1,
		Seed:              1,
	})
	if err != nil {
		d.Stop()
		return nil, fmt.Errorf("simulator: %w", err)
	}
	d.sim = sim

	// What the simulator does not produce on its own: a user written past
	// the cap, a slot set with no TTL, a counter decremented below zero.
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		bg := context.Background()
		d.client.ZAdd(bg, "joishi:streams:{u-import}", redis.Z{Score: float64(time.Now().Add(20 * time.Second).UnixMilli()), Member: "imported-without-ttl"})
		d.client.Set(bg, "joishi:streams-legacy:{u-neg}", -1, 0)
		t := time.NewTicker(4 * time.Second)
		defer t.Stop()
		for {
			exp := float64(time.Now().Add(20 * time.Second).UnixMilli())
			for i := 1; i <= 4; i++ {
				d.client.ZAdd(bg, "joishi:streams:{u-over}", redis.Z{Score: exp, Member: fmt.Sprintf("written-past-cap-%d", i)})
			}
			d.client.PExpire(bg, "joishi:streams:{u-over}", 40*time.Second)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()

	// A deploy's mass kill every three minutes, so the expiry spike shows.
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		t := time.NewTicker(3 * time.Minute)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				n := sim.KillShare(0.5)
				logger.Info("demo: simulated deploy killed holders mid-stream", "killed", n)
			}
		}
	}()
	logger.Info("demo: embedded Redis with simulated traffic", "addr", mr.Addr())
	return d, nil
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
