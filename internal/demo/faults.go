package demo

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
)

// faults adds what no workload makes on its own: a user written past the
// cap, a set without TTL, a set that expires before its slots, a negative
// counter, keys of the wrong type and values that are not numbers; a
// deploy that kills half the holders; and, 35 s in and every 3 minutes
// after, a restart that loses the data, then a FLUSHALL, in turn.
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
		// Its key expires in 2 s, its slot in 6 s: the set will vanish
		// with a live slot in it.
		c.ZAdd(bg, "joishi:streams:{u-early}", redis.Z{Score: exp, Member: "outlives-its-key"})
		c.PExpire(bg, "joishi:streams:{u-early}", 2*time.Second)
	})

	// The simulated restart and flush take the consumer groups with
	// them; a deploy would create them again, so the demo does.
	d.every(ctx, 2*time.Second, func() {
		keys, _ := c.Keys(bg, "stream:events:*").Result()
		for _, k := range keys {
			if gs, err := c.XInfoGroups(bg, k).Result(); err == nil && len(gs) == 0 {
				c.XGroupCreate(bg, k, "workers", "0")
			}
		}
	})

	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		next := time.NewTimer(35 * time.Second)
		defer next.Stop()
		kills := time.NewTicker(3 * time.Minute)
		defer kills.Stop()
		restart := true
		for {
			select {
			case <-ctx.Done():
				return
			case <-next.C:
				if restart {
					d.info.restart(d.mr)
					logger.Info("demo: simulated a Redis restart without persistence: the data is gone")
				} else {
					d.info.flush(d.mr)
					logger.Info("demo: simulated a FLUSHALL")
				}
				restart = !restart
				static()
				next.Reset(3 * time.Minute)
			case <-kills.C:
				n := d.sim.KillShare(0.5)
				logger.Info("demo: simulated deploy killed holders mid-stream", "killed", n)
			}
		}
	}()
}
