package main

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/limiter"
)

// hbResult is what the limiter's calls cost Redis, from INFO commandstats
// (command execution only) and from the redis-server process's CPU time
// (everything: reading, parsing, replying, the event loop).
type hbResult struct {
	Holders int
	// Acquire: EVALSHA of acquire.lua, one round trip per call.
	AcquireUsec float64
	AcquireCPU  float64
	// Heartbeat: MULTI, ZADD XX GT CH, PEXPIRE GT, ZSCORE, EXEC in one
	// round trip per call.
	HBZaddUsec, HBPexpireUsec, HBZscoreUsec, HBExecUsec, HBMultiUsec float64
	HBCPU                                                            float64
	// HeartbeatMany: the same commands pipelined, 100 holders a round trip.
	ManyZaddUsec, ManyPexpireUsec, ManyZscoreUsec float64
	ManyCPU                                       float64
}

func perCall(st map[string]cmdStat, name string, n int) float64 {
	return float64(st[name].Usec) / float64(n)
}

func measureHeartbeats(ctx context.Context, holders int) (hbResult, error) {
	res := hbResult{Holders: holders}
	s, err := startServer()
	if err != nil {
		return res, err
	}
	defer s.Stop()
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer c.Close()
	admin := s.client()
	defer admin.Close()
	l := limiter.New(c, limiter.DefaultOptions())
	key := func(i int) string { return keyName(i / 2) } // two holders a user
	id := func(i int) string { return fmt.Sprintf("stream-%08d", i) }
	// Load the script once so the measured calls are EVALSHA hits.
	if _, _, err := l.Acquire(ctx, "joishi:streams:{warmup}", "w", 3); err != nil {
		return res, err
	}
	phase := func(f func() error) (map[string]cmdStat, time.Duration, error) {
		if err := admin.ConfigResetStat(ctx).Err(); err != nil {
			return nil, 0, err
		}
		c0 := procCPU(s.PID())
		if err := f(); err != nil {
			return nil, 0, err
		}
		c1 := procCPU(s.PID())
		st, err := commandStats(ctx, admin)
		return st, c1 - c0, err
	}
	us := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(holders) }

	st, cpu, err := phase(func() error {
		for i := range holders {
			granted, _, err := l.Acquire(ctx, key(i), id(i), 3)
			if err != nil {
				return err
			}
			if !granted {
				return fmt.Errorf("acquire %d not granted", i)
			}
		}
		return nil
	})
	if err != nil {
		return res, fmt.Errorf("acquire: %w", err)
	}
	res.AcquireUsec, res.AcquireCPU = perCall(st, "evalsha", holders), us(cpu)

	st, cpu, err = phase(func() error {
		for i := range holders {
			alive, err := l.Heartbeat(ctx, key(i), id(i))
			if err != nil {
				return err
			}
			if !alive {
				return fmt.Errorf("heartbeat %d: holder gone", i)
			}
		}
		return nil
	})
	if err != nil {
		return res, fmt.Errorf("heartbeat: %w", err)
	}
	res.HBZaddUsec, res.HBPexpireUsec = perCall(st, "zadd", holders), perCall(st, "pexpire", holders)
	res.HBZscoreUsec, res.HBExecUsec, res.HBMultiUsec = perCall(st, "zscore", holders), perCall(st, "exec", holders), perCall(st, "multi", holders)
	res.HBCPU = us(cpu)

	st, cpu, err = phase(func() error {
		const batch = 100
		beats := make([]limiter.Beat, 0, batch)
		for i := 0; i < holders; i += batch {
			beats = beats[:0]
			for j := i; j < min(i+batch, holders); j++ {
				beats = append(beats, limiter.Beat{Key: key(j), ID: id(j)})
			}
			alive, err := l.HeartbeatMany(ctx, beats)
			if err != nil {
				return err
			}
			for j, a := range alive {
				if !a {
					return fmt.Errorf("heartbeat %d: holder gone", i+j)
				}
			}
		}
		return nil
	})
	if err != nil {
		return res, fmt.Errorf("heartbeat many: %w", err)
	}
	res.ManyZaddUsec, res.ManyPexpireUsec = perCall(st, "zadd", holders), perCall(st, "pexpire", holders)
	res.ManyZscoreUsec, res.ManyCPU = perCall(st, "zscore", holders), us(cpu)
	return res, nil
}
