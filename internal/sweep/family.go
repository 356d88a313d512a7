package sweep

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/redisread"
	"github.com/slotexporter/slot_exporter/internal/snapshot"
	"github.com/slotexporter/slot_exporter/internal/track"
)

// family runs one family's sweeps. Only its own goroutine touches its
// state; the outside world sees published snapshots.
type family struct {
	cfg      *config.Family
	sampling *config.Sampling
	leaks    *config.Leaks
	s        *Sweeper // read-only: topology, reader, watcher, logger
	state    *state
	// mu is held while a sweep changes the state, so that the on-call
	// page can look a member up between sweeps. It goes with the state
	// to a reload's family: the page may still hold the old sweeper.
	mu *sync.Mutex
	// limits are the kind's, fixed when the family is built: scrapes
	// read them while a reload reconfigures the kind.
	limits track.Limits

	snap  atomic.Pointer[snapshot.Family]
	clock atomic.Pointer[clockReading]
}

// clockReading is the exporter clock minus Redis TIME, and when (exporter
// clock, Unix ns) it was measured.
type clockReading struct {
	skew time.Duration
	at   int64
}

func (f *family) log() *slog.Logger { return f.s.logger.With("family", f.cfg.Name) }

func (f *family) loop(ctx context.Context) {
	for {
		if wait := time.Until(f.state.next); wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
		if ctx.Err() != nil {
			return
		}
		start := time.Now()
		_ = f.sweepAndPublish(ctx)
		f.state.next = start.Add(f.retryAfter())
	}
}

// maxBackoff caps the wait between sweeps while Redis keeps failing: 8
// intervals, and never more than 30 s (or one interval, if longer), so
// that a Redis that comes back is seen within half a minute.
func (f *family) maxBackoff() time.Duration {
	return max(min(8*f.sampling.Interval, 30*time.Second), f.sampling.Interval)
}

// retryAfter is sampling.interval, doubled for each failure in a row up to
// maxBackoff: a Redis that is down is not hammered with reconnects, and
// comes back to the normal pace at once.
func (f *family) retryAfter() time.Duration {
	d, limit := f.sampling.Interval, f.maxBackoff()
	for i := 1; i < f.state.failures && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

func (f *family) sweepAndPublish(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.state
	start := time.Now()
	sctx, cancel := context.WithTimeout(ctx, f.sampling.Timeout)
	g, err := f.sweep(sctx)
	cancel()
	end := time.Now()
	dur := end.Sub(start)
	// A sweep cut off at sampling.timeout having moved on (keys read, or
	// SCAN pages walked through) goes on in the next attempt (resume.go):
	// Redis answers, so it is no failure; the figures of the last
	// complete sweep stay.
	var cut *cutOff
	continued := errors.As(err, &cut) && cut.moved && ctx.Err() == nil
	switch {
	case err != nil && ctx.Err() != nil:
		// Shutting down or reloading: not a Redis failure, and what the
		// sweep read is dropped with the config it was read under.
		st.partial = nil
		return err
	case continued:
		if st.failures > 0 {
			// Redis answers and the reads go on: no back-off.
			f.log().Info("sweep recovered", "failures_in_a_row", st.failures, "down_for", end.Sub(st.firstFailure))
			st.failures = 0
		}
		f.logCutOff(cut, dur)
	case err != nil:
		st.sweepErrors++
		// Keys the feed named for this sweep may not all have been read:
		// the next sweep reads everything.
		st.synced = nil
		if st.failures == 0 {
			st.firstFailure = start
		}
		st.failures++
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("cut off at sampling.timeout (%s): %w", f.sampling.Timeout, err)
		}
		// One line for the first failure, then one each time the run of
		// failures doubles: a Redis that is down for an hour logs a dozen
		// lines, not one per sweep.
		if n := st.failures; n&(n-1) == 0 {
			f.log().Error("sweep failed", "err", err, "duration", dur, "failures_in_a_row", n, "next_try_in", f.retryAfter())
		}
	default:
		if st.failures > 0 {
			f.log().Info("sweep recovered", "failures_in_a_row", st.failures, "down_for", end.Sub(st.firstFailure))
		}
		st.failures = 0
		st.lastSuccess = end
		st.lastGauges = g
		st.synced, st.pendingSync = st.pendingSync, nil
		st.known = g.sets
		// The period runs from the start of the sweep's first attempt:
		// a sweep read over several attempts is as old as that.
		if st.lastStart.IsZero() {
			st.period = end.Sub(g.began)
		} else {
			st.period = g.began.Sub(st.lastStart)
		}
		st.lastStart = g.began
		if g.attempts > 1 {
			f.log().Warn("sweep completed over several attempts, each cut off at sampling.timeout",
				"attempts", g.attempts, "read_for", end.Sub(g.began), "sampling_period", st.period)
		}
	}
	if dur > f.sampling.Interval {
		st.overruns++
		st.overrunsUnlogged++
		// One line in overrunLogEvery, counting those since the last:
		// an interval shorter than a sweep logged a line every sweep
		// (303 in 6 s at 1ns), and sweeps that overrun now and then
		// broke any run that could have spaced the lines.
		// slot_exporter_sweep_overruns_total counts each.
		if n := st.overrunsUnlogged; !continued && end.Sub(st.overrunLogged) >= overrunLogEvery {
			st.overrunLogged, st.overrunsUnlogged = end, 0
			// Blamed on what held the reads up: the budget when they
			// waited for it most of the time, else Redis (DEBUG SLEEP 5
			// was blamed on the budget ten times over).
			hint := "the read budget (sampling.redis_cpu_share, max_keys_per_second) is short of reading every changed key each interval; slot_exporter_sampling_period_seconds says what is achieved"
			if st.waited < dur/2 {
				hint = "Redis answered slowly (blocked by a slow command, loading, busy) or there are more keys than an interval reads; the reads waited little for the read budget"
			}
			f.log().Warn("sweep overran sampling.interval", "duration", dur, "interval", f.sampling.Interval,
				"waited_for_budget", st.waited.Round(time.Millisecond), "overruns_since_last_line", n, "hint", hint)
		}
	}
	fs := f.emptySnapshot(st.period)
	fs.OK, fs.LastSuccess, fs.Duration = err == nil || continued, st.lastSuccess, dur
	fs.SweepErrors, fs.Overruns, fs.KeysScanned = st.sweepErrors, st.overruns, st.keysScanned
	for i, name := range redisread.SkipReasonNames() {
		fs.Skipped = append(fs.Skipped, snapshot.Count{Label: name, N: st.skipped[i]})
	}
	if st.period > 0 {
		// Published with every attempt, fresh or not: the stale-sweep
		// alert compares the age of the last sweep with it.
		fs.Gauges = append(fs.Gauges, snapshot.Value{Metric: snapshot.SamplingPeriod, V: st.period.Seconds()})
	}
	if !st.lastSuccess.IsZero() {
		g := st.lastGauges
		fs.Sets, fs.Aggregates, fs.Users, fs.SeriesDropped = g.sets, g.users, g.userSeries, g.seriesDropped
		st.tracker.Publish(fs)
	}
	f.snap.Store(fs)
	return err
}

// staleAfter is how long a good sweep's domain values are served: two
// sampling periods (the interval, or the period achieved when sweeps take
// longer), plus the second the CPU pacer may hold the reads every
// quietEvery to measure Redis's own load, so that the series do not blink
// out at short intervals while it does.
func (f *family) staleAfter(period time.Duration) time.Duration {
	d := 2 * max(f.sampling.Interval, period)
	if f.s.pacer != nil {
		d += time.Second
	}
	return d
}

// emptySnapshot is the family's snapshot before any sweep: its config.
// period is the sampling period achieved so far (0 before the first
// sweep); it is passed in, not read from the state, because scrapes call
// this too while a sweep changes the state.
func (f *family) emptySnapshot(period time.Duration) *snapshot.Family {
	lim := f.limits
	return &snapshot.Family{
		Name: f.cfg.Name, Kind: string(f.cfg.Kind),
		Limit: float64(lim.Limit), HasLimit: lim.Limit > 0, FloorWindow: f.cfg.FloorWindow, MaxWait: f.cfg.MaxWait,
		StaleAfter: f.staleAfter(period), OverLimitShown: lim.OverLimitIsAnomaly,
	}
}

// overrunLogEvery spaces the lines of a family whose sweeps overrun.
const overrunLogEvery = 10 * time.Minute
