// Package demo runs an embedded Redis (miniredis) with simulated traffic
// for --demo: every recipe the exporter watches, healthy and with each of
// its failures, plus the faults no workload makes on its own (a restart
// that loses the data, keys of the wrong type, values that are not
// numbers), so that every trouble gauge of every kind is non-zero at least
// once in every minute. Tests use a real redis-server instead.
package demo

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Options is the demo's schedule; the zero value is --demo's.
type Options struct {
	// FirstLoss is when the first simulated data loss (a restart without
	// persistence) happens (default 35s); LossEvery is the time between
	// two (default 3m), restarts and FLUSHALLs in turn. Tests shorten
	// them so that a few minutes see several of each.
	FirstLoss, LossEvery time.Duration
}

// Run is an embedded Redis with simulated traffic.
type Run struct {
	// Config is the exporter config that watches the embedded Redis.
	Config []byte
	// Release is what the release button needs in the demo.
	Release *Release
	mr      *miniredis.Miniredis
	info    *identity
	client  *redis.Client
	o       Options
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	mu      sync.Mutex
	running []running
}

// Start starts the embedded Redis and the traffic.
func Start(ctx context.Context, logger *slog.Logger, o Options) (*Run, error) {
	if o.FirstLoss <= 0 {
		o.FirstLoss = 35 * time.Second
	}
	if o.LossEvery <= 0 {
		o.LossEvery = 3 * time.Minute
	}
	mr := miniredis.NewMiniRedis()
	if err := mr.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("embedded redis: %w", err)
	}
	rel, pw, pwFile, relFile, err := setupRelease(mr)
	if err != nil {
		mr.Close()
		return nil, err
	}
	d := &Run{mr: mr, info: newIdentity(), o: o, Release: rel, Config: []byte(config(mr.Addr(), pwFile, relFile))}
	d.info.serve(mr)
	d.client = redis.NewClient(&redis.Options{Addr: mr.Addr(), Password: pw, DisableIdentity: true})
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

	if err := d.startWorkloads(ctx); err != nil {
		d.Stop()
		return nil, err
	}
	d.faults(ctx, logger)
	logger.Info("demo: embedded Redis with simulated traffic", "addr", mr.Addr())
	return d, nil
}

// startWorkloads starts every workload; on an error, the ones started
// keep running until stopWorkloads.
func (d *Run) startWorkloads(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, w := range workloads {
		r, err := w.start(ctx, d.client)
		if err != nil {
			return fmt.Errorf("demo workload: %w", err)
		}
		d.running = append(d.running, r)
	}
	return nil
}

func (d *Run) stopWorkloads() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range d.running {
		r.Stop()
	}
	d.running = nil
}

// kill SIGKILLs share of the holders of every workload that has holders.
func (d *Run) kill(share float64) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, r := range d.running {
		if k, ok := r.(interface{ KillShare(float64) int }); ok {
			n += k.KillShare(share)
		}
	}
	return n
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
	d.wg.Wait()
	d.stopWorkloads()
	if d.client != nil {
		_ = d.client.Close()
	}
	d.mr.Close()
	// The folder holds the demo's passwords and its audit file, which
	// mean nothing once the embedded Redis is gone: kept, every demo run
	// (and every test that starts one) left a folder in the temp dir.
	if d.Release != nil {
		_ = os.RemoveAll(d.Release.Dir)
	}
}
