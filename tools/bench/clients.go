package main

import (
	"context"
	"encoding/csv"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// naiveSweep is the obvious client: SCAN a page, then pipeline the page's
// reads (the same ZRANGE WITHSCORES and PTTL the exporter sends), strictly
// one after the other, with go-redis's own reply types. It tracks nothing:
// it is a floor for the simple design, not a second exporter.
func naiveSweep(ctx context.Context, c *redis.Client, maxMembers int64) (keys, members int, err error) {
	var cursor uint64
	for {
		page, next, err := c.Scan(ctx, cursor, keyMatch, 1000).Result()
		if err != nil {
			return keys, members, err
		}
		if len(page) > 0 {
			pipe := c.Pipeline()
			zs := make([]*redis.ZSliceCmd, len(page))
			for i, k := range page {
				zs[i] = pipe.ZRangeWithScores(ctx, k, 0, maxMembers)
				pipe.PTTL(ctx, k)
			}
			if _, err := pipe.Exec(ctx); err != nil {
				return keys, members, err
			}
			for _, z := range zs {
				members += len(z.Val())
			}
			keys += len(page)
		}
		if next == 0 {
			return keys, members, nil
		}
		cursor = next
	}
}

type naiveRun struct {
	Wall     float64
	RedisCPU float64
	Members  int
	Cmd      map[string]cmdStat
}

func measureNaive(ctx context.Context, s *server) (naiveRun, error) {
	c := redis.NewClient(&redis.Options{Addr: s.Addr, ReadTimeout: time.Minute})
	defer c.Close()
	admin := s.client()
	defer admin.Close()
	if err := c.Ping(ctx).Err(); err != nil {
		return naiveRun{}, err
	}
	if err := admin.ConfigResetStat(ctx).Err(); err != nil {
		return naiveRun{}, err
	}
	rc0 := procCPU(s.PID())
	t0 := time.Now()
	_, members, err := naiveSweep(ctx, c, 1000)
	if err != nil {
		return naiveRun{}, err
	}
	wall := time.Since(t0)
	rc1 := procCPU(s.PID())
	st, err := commandStats(ctx, admin)
	if err != nil {
		return naiveRun{}, err
	}
	return naiveRun{Wall: wall.Seconds(), RedisCPU: (rc1 - rc0).Seconds(), Members: members, Cmd: st}, nil
}

// benchRow is one test of redis-benchmark --csv.
type benchRow struct {
	RPS, Avg, P50, P95, P99, Max float64
}

// redisBenchmark runs redis-benchmark against s with args and returns its
// CSV rows by test name.
func redisBenchmark(ctx context.Context, s *server, args ...string) (map[string]benchRow, error) {
	host, port := splitAddr(s.Addr)
	full := append([]string{"-h", host, "-p", port, "--csv"}, args...)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "redis-benchmark", full...).Output()
	if err != nil {
		return nil, fmt.Errorf("redis-benchmark %s: %w", strings.Join(args, " "), err)
	}
	recs, err := csv.NewReader(strings.NewReader(string(out))).ReadAll()
	if err != nil || len(recs) < 2 {
		return nil, fmt.Errorf("redis-benchmark output: %v: %q", err, out)
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	f := func(r []string, name string) float64 {
		i, ok := col[name]
		if !ok || i >= len(r) {
			return 0
		}
		v, _ := strconv.ParseFloat(r[i], 64)
		return v
	}
	rows := map[string]benchRow{}
	for _, r := range recs[1:] {
		rows[r[0]] = benchRow{
			RPS: f(r, "rps"), Avg: f(r, "avg_latency_ms"), P50: f(r, "p50_latency_ms"),
			P95: f(r, "p95_latency_ms"), P99: f(r, "p99_latency_ms"), Max: f(r, "max_latency_ms"),
		}
	}
	return rows, nil
}

type floorRun struct {
	Seconds  float64 // time Redis needs for n requests at the measured rate
	RPS      float64
	RedisCPU float64 // Redis CPU per n requests
	Usec     float64 // commandstats usec per call
}

// measureFloor has redis-benchmark send n pipelined (-P 64) requests of
// command over the sweep's keys, and scales the measured rate to n.
// Small keyspaces get at least 200k requests so that the rate is steady.
func measureFloor(ctx context.Context, s *server, n int, command ...string) (floorRun, error) {
	admin := s.client()
	defer admin.Close()
	reqs := max(n, 200000)
	if err := admin.ConfigResetStat(ctx).Err(); err != nil {
		return floorRun{}, err
	}
	rc0 := procCPU(s.PID())
	args := append([]string{"-P", "64", "-n", strconv.Itoa(reqs), "-r", strconv.Itoa(n)}, command...)
	rows, err := redisBenchmark(ctx, s, args...)
	if err != nil {
		return floorRun{}, err
	}
	rc1 := procCPU(s.PID())
	st, err := commandStats(ctx, admin)
	if err != nil {
		return floorRun{}, err
	}
	var row benchRow
	for _, r := range rows {
		row = r
	}
	if row.RPS <= 0 {
		return floorRun{}, fmt.Errorf("redis-benchmark %v: no rate", command)
	}
	name := strings.ToLower(command[0])
	scale := float64(n) / float64(reqs)
	return floorRun{
		Seconds: float64(n) / row.RPS, RPS: row.RPS,
		RedisCPU: (rc1 - rc0).Seconds() * scale, Usec: st[name].Per,
	}, nil
}
