package demo

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
)

// faults adds what no workload makes on its own, or not often enough: a
// user written past the cap, a score in microseconds, a set without TTL,
// a set that expires before its slots, a negative counter, keys of the wrong type and values that are not numbers; a
// deploy that kills half the holders; and, 35 s in and every 3 minutes
// after (Options), a restart that loses the data, then a FLUSHALL, in
// turn. After each data loss the workloads start again, as a deploy would
// after an outage: the failures they set up once (consumer groups, a
// crashed first hit, a consumer killed on its first read) come back with
// them.
func (d *Run) faults(ctx context.Context, logger *slog.Logger) {
	bg := context.Background()
	c := d.client
	static := func() {
		c.ZAdd(bg, "joishi:streams:{u-import}", redis.Z{Score: float64(time.Now().Add(6 * time.Second).UnixMilli()), Member: "imported-without-ttl"})
		c.Set(bg, "joishi:streams-legacy:{u-neg}", -1, 0)
		c.Set(bg, "joishi:streams:{u-wrongtype}", "a string where a slot set belongs", 0)
		c.Set(bg, "joishi:streams-legacy:{u-garbage}", "not a number", 0)
	}
	static()
	d.every(ctx, time.Second, func() {
		exp := float64(time.Now().Add(6 * time.Second).UnixMilli())
		for i := 1; i <= 4; i++ {
			c.ZAdd(bg, "joishi:streams:{u-over}", redis.Z{Score: exp, Member: fmt.Sprintf("written-past-cap-%d", i)})
		}
		c.PExpire(bg, "joishi:streams:{u-over}", 12*time.Second)
		// The unit bug (microseconds where milliseconds belong) in every
		// minute, not only when the workload's few such acquires happen.
		// NX: the score stays as first written, so that a release
		// previewed in the demo finds it unchanged.
		c.ZAddNX(bg, "joishi:streams:{u-micros}", redis.Z{Score: float64(time.Now().UnixMicro() + 6000), Member: "score-in-microseconds"})
		c.PExpire(bg, "joishi:streams:{u-micros}", 12*time.Second)
		// Its key expires in 2 s, its slot in 6 s: the set will vanish
		// with a live slot in it.
		c.ZAdd(bg, "joishi:streams:{u-early}", redis.Z{Score: exp, Member: "outlives-its-key"})
		c.PExpire(bg, "joishi:streams:{u-early}", 2*time.Second)
	})

	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		next := time.NewTimer(d.o.FirstLoss)
		defer next.Stop()
		kills := time.NewTicker(3 * time.Minute)
		defer kills.Stop()
		restart := true
		for {
			select {
			case <-ctx.Done():
				return
			case <-next.C:
				d.stopWorkloads()
				if restart {
					d.info.restart(d.mr)
					logger.Info("demo: simulated a Redis restart without persistence: the data is gone")
				} else {
					d.info.flush(d.mr)
					logger.Info("demo: simulated a FLUSHALL")
				}
				restart = !restart
				static()
				if err := d.startWorkloads(ctx); err != nil {
					logger.Error("demo: workloads did not start again after the data loss", "err", err)
				}
				next.Reset(d.o.LossEvery)
			case <-kills.C:
				n := d.kill(0.5)
				logger.Info("demo: simulated deploy killed holders mid-stream", "killed", n)
			}
		}
	}()
}
