package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/redisproc"
	"github.com/slotexporter/slot_exporter/internal/sweep"
)

// notifyResult compares discovery: scan with discovery: notify on a Redis
// where the slot sets are a small part of a big, unrelated keyspace.
type notifyResult struct {
	Unrelated, Sets int
	Scan, Notify    []time.Duration // steady-state sweeps
	NotifyFull      time.Duration   // the first notify sweep: subscribe + full SCAN
	ScanCalls       [2]int64        // SCAN calls per steady sweep: scan, notify
	RedisCPU        [2]time.Duration
}

func runNotify(ctx context.Context, unrelated, sets, runs int) (*notifyResult, error) {
	s, err := startServer()
	if err != nil {
		return nil, err
	}
	defer s.Stop()
	c := s.client()
	defer c.Close()
	if err := c.ConfigSet(ctx, "notify-keyspace-events", "Kgxez").Err(); err != nil {
		return nil, err
	}
	// DEBUG POPULATE writes the unrelated keys server-side in seconds.
	if err := c.Do(ctx, "DEBUG", "POPULATE", unrelated, "unrelated").Err(); err != nil {
		return nil, fmt.Errorf("DEBUG POPULATE: %w", err)
	}
	now := time.Now()
	pipe := c.Pipeline()
	for i := 0; i < sets; i++ {
		pipe.ZAdd(ctx, keyName(i), redis.Z{Score: float64(now.Add(55 * time.Minute).UnixMilli()), Member: "m"})
		if i%1000 == 999 {
			if _, err := pipe.Exec(ctx); err != nil {
				return nil, err
			}
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	res := &notifyResult{Unrelated: unrelated, Sets: sets}
	for mode, discovery := range []string{"scan", "notify"} {
		f := redisproc.Slots()
		f.TTL, f.Heartbeat, f.MaxHold = time.Hour, 10*time.Minute, 2*time.Hour
		cfg, err := config.Parse([]byte(redisproc.Config{
			Addr:     s.Addr,
			Sampling: []string{"interval: 1h", "window: 1h", "timeout: 10m", "discovery: " + discovery, "full_scan_interval: 1h"},
			Leaks:    []string{"floor_window: 1h"},
			Families: []redisproc.Family{f},
		}.YAML()))
		if err != nil {
			return nil, err
		}
		// New refuses notify without keyspace events, as the exporter does.
		sw, err := sweep.New(ctx, cfg, c, slog.New(slog.DiscardHandler), nil)
		if err != nil {
			return nil, err
		}
		t0 := time.Now()
		if err := sw.SweepOnce(ctx); err != nil {
			return nil, err
		}
		if discovery == "notify" {
			res.NotifyFull = time.Since(t0)
		}
		before, _ := commandStats(ctx, c)
		cpu0 := procCPU(s.PID())
		var ds []time.Duration
		for r := 0; r < runs; r++ {
			t := time.Now()
			if err := sw.SweepOnce(ctx); err != nil {
				return nil, err
			}
			ds = append(ds, time.Since(t))
		}
		res.RedisCPU[mode] = (procCPU(s.PID()) - cpu0) / time.Duration(runs)
		after, _ := commandStats(ctx, c)
		res.ScanCalls[mode] = (after["scan"].Calls - before["scan"].Calls) / int64(runs)
		sw.Stop()
		if discovery == "scan" {
			res.Scan = ds
		} else {
			res.Notify = ds
		}
	}
	return res, nil
}

func (n *notifyResult) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## discovery: scan against discovery: notify\n\n")
	fmt.Fprintf(&b, "%d slot sets among %d unrelated keys (`DEBUG POPULATE`), `notify-keyspace-events Kgxez`, scan_count 1000. One sweep first (in notify mode: subscribe, then the full SCAN that fills the key set), then %d measured sweeps; medians. Redis CPU is the redis-server process's CPU time per sweep.\n\n",
		n.Sets, n.Unrelated, len(n.Scan))
	fmt.Fprintf(&b, "| discovery | sweep | SCAN calls per sweep | Redis CPU per sweep |\n|---|---:|---:|---:|\n")
	fmt.Fprintf(&b, "| scan | %s | %d | %s |\n", redisproc.Median(n.Scan).Round(time.Millisecond), n.ScanCalls[0], n.RedisCPU[0].Round(time.Millisecond))
	fmt.Fprintf(&b, "| notify | %s | %d | %s |\n", redisproc.Median(n.Notify).Round(100*time.Microsecond), n.ScanCalls[1], n.RedisCPU[1].Round(time.Millisecond))
	fmt.Fprintf(&b, "\nThe first notify sweep, with its full SCAN, took %s; after it, sweeps read only the %d known keys until full_scan_interval comes round. Notify mode is %.0f× faster per sweep here.\n",
		n.NotifyFull.Round(time.Millisecond), n.Sets, float64(redisproc.Median(n.Scan))/float64(max(redisproc.Median(n.Notify), 1)))
	return b.String()
}
