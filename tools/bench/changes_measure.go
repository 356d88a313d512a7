package main

import (
	"context"
	"time"

	"github.com/slotexporter/slot_exporter/internal/redisproc"
	"github.com/slotexporter/slot_exporter/internal/sweep"
)

// What the change-driven run measures of the exporter while a phase runs,
// beside Redis's CPU: its sweeps, and its commands as Redis counted them.

// watchSweeps notes when each sweep of s ends until ctx is done, and then
// hands over a function giving how many ended and the longest time
// without one.
func watchSweeps(ctx context.Context, s *sweep.Sweeper) <-chan func() (int, float64) {
	out := make(chan func() (int, float64), 1)
	go func() {
		start := time.Now()
		last, prev := start, s.Snapshot().Families[0].LastSuccess
		n, gap := 0, 0.0
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				gap = max(gap, time.Since(last).Seconds())
				out <- func() (int, float64) { return n, gap }
				return
			case <-t.C:
			}
			if ls := s.Snapshot().Families[0].LastSuccess; !ls.Equal(prev) {
				prev = ls
				n++
				gap = max(gap, ls.Sub(last).Seconds())
				last = ls
			}
		}
	}()
	return out
}

// exporterCommands is what the exporter's commands cost Redis between
// two readings of INFO commandstats: everything but the application's
// writes, the probe's and the bench's own INFO.
func exporterCommands(before, after map[string]redisproc.CommandStat) map[string]redisproc.CommandStat {
	out := map[string]redisproc.CommandStat{}
	for name, a := range after {
		switch name {
		case "zadd", "get", "set", "select":
			continue
		}
		b := before[name]
		if d := (redisproc.CommandStat{Calls: a.Calls - b.Calls, Usec: a.Usec - b.Usec}); d.Calls > 0 {
			out[name] = d
		}
	}
	return out
}

// awaitSweepBegunAfter waits until s has ended a sweep that began after
// t. The sweep that ends first after t may have begun before it, and
// judged its members then; the one after it did not. The last attempt's
// start does not tell: a sweep cut off at sampling.timeout goes on in its
// next attempt, and judges at its first attempt's start (at 25% written,
// members written after that start counted as future: 247900 against
// 15576).
func awaitSweepBegunAfter(s *sweep.Sweeper, t time.Time) {
	var endedAfter time.Time
	for {
		f := s.Snapshot().Families[0]
		if f.OK && f.LastSuccess.After(t) {
			if endedAfter.IsZero() {
				endedAfter = f.LastSuccess
			} else if f.LastSuccess.After(endedAfter) {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}
