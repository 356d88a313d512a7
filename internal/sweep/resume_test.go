package sweep_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/redisproc"
	"github.com/slotexporter/slot_exporter/internal/redistest"
)

// The key budget and timeout of the cut-off exporter: an attempt reads at
// most budget × timeout plus the budget's burst (a tenth of a second's
// worth), 240 keys, whatever the machine's speed; resumeKeys keys take
// three attempts at least.
const (
	resumeKeys   = 600
	resumeBudget = 400
)

// resumeFamily is one family whose figures do not change with time for
// minutes, and how to write, change and touch (write without changing
// what is read) its key of user i.
type resumeFamily struct {
	fam    redisproc.Family
	write  func(c redis.Cmdable, i int)
	change func(c redis.Cmdable, i int)
	touch  func(c redis.Cmdable, i int)
	prefix string
}

func resumeFamilies(now int64) []resumeFamily {
	u := func(i int) string { return fmt.Sprintf("{u%04d}", i) }
	ctx := context.Background()
	score := float64(now + 9*60_000) // live for 4 min (ttl 10m, stale_after 5m)
	// One expiry for every key, set again by a touch: a lease whose
	// expiry moved would count a heartbeat, which an exporter that read
	// the key between a touch and a later write sees and a full read
	// before and after both does not.
	expiry := time.UnixMilli(now + 9*60_000)
	return []resumeFamily{
		{
			// Slot sets go over the raw connection.
			fam: redisproc.Family{Name: "slots", Kind: "slotset", Match: "s:*", Limit: 3, TTL: 10 * time.Minute,
				Heartbeat: time.Minute, MaxHold: 20 * time.Minute, Extra: []string{"stale_after: 5m"}},
			prefix: "s:",
			write: func(c redis.Cmdable, i int) {
				c.ZAdd(ctx, "s:"+u(i), redis.Z{Score: score, Member: "a" + u(i)}, redis.Z{Score: score, Member: "b" + u(i)})
				c.PExpireAt(ctx, "s:"+u(i), expiry)
			},
			change: func(c redis.Cmdable, i int) {
				c.ZAdd(ctx, "s:"+u(i), redis.Z{Score: score, Member: "c" + u(i)})
				c.ZRem(ctx, "s:"+u(i), "a"+u(i))
			},
			touch: func(c redis.Cmdable, i int) { c.PExpireAt(ctx, "s:"+u(i), expiry) },
		},
		{
			// Locks and queues through go-redis pipelines.
			fam:    redisproc.Family{Name: "locks", Kind: "lock", Match: "l:*", TTL: 10 * time.Minute, MaxHold: 20 * time.Minute},
			prefix: "l:",
			write: func(c redis.Cmdable, i int) {
				c.Set(ctx, "l:"+u(i), "token-"+u(i), 0)
				c.PExpireAt(ctx, "l:"+u(i), expiry)
			},
			change: func(c redis.Cmdable, i int) {
				c.Set(ctx, "l:"+u(i), "other-"+u(i), 0)
				c.PExpireAt(ctx, "l:"+u(i), expiry)
			},
			touch: func(c redis.Cmdable, i int) { c.PExpireAt(ctx, "l:"+u(i), expiry) },
		},
		{
			fam:    redisproc.Family{Name: "queue", Kind: "list", Match: "q:*", Extra: []string{"max_wait: 10m"}},
			prefix: "q:",
			write: func(c redis.Cmdable, i int) {
				c.RPush(ctx, "q:"+u(i), "job-a"+u(i), "job-b"+u(i))
				c.PExpireAt(ctx, "q:"+u(i), expiry)
			},
			change: func(c redis.Cmdable, i int) { c.RPush(ctx, "q:"+u(i), "job-c"+u(i)) },
			touch:  func(c redis.Cmdable, i int) { c.PExpireAt(ctx, "q:"+u(i), expiry) },
		},
	}
}

// cutOffPair dials two exporters of rf's family on srv: full reads every
// key in one sweep; every attempt of cut is cut off at 500ms, within
// which its key budget reads at most a third of resumeKeys. Its log is
// in logs.
func cutOffPair(t *testing.T, srv *redistest.Server, rf resumeFamily, track bool) (full, cut *exportertest.Harness, logs *exportertest.Logs) {
	t.Helper()
	yaml := func(sampling ...string) string {
		return redisproc.Config{
			Redis:    standaloneSection(srv.Addr),
			Sampling: append([]string{"interval: 1s", "window: 10m", "redis_cpu_share: 0", fmt.Sprintf("track_changes: %v", track)}, sampling...),
			Leaks:    []string{"per_user_series: 1000"},
			Families: []redisproc.Family{rf.fam},
		}.YAML()
	}
	logs = exportertest.NewLogs()
	return exportertest.Dial(t, yaml()), exportertest.Dial(t, yaml("timeout: 500ms", fmt.Sprintf("max_keys_per_second: %d", resumeBudget)), logs.Logger()), logs
}

// pipelined runs fn for i in [from, to) in one pipeline.
func pipelined(t *testing.T, c redis.UniversalClient, from, to int, fn func(c redis.Cmdable, i int)) {
	t.Helper()
	pipe := c.Pipeline()
	for i := from; i < to; i++ {
		fn(pipe, i)
	}
	if _, err := pipe.Exec(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestCutOffSweepGoesOn: a family whose every attempt is cut off at
// sampling.timeout (a key budget that reads a third of its keys at most
// in one) still gets a complete picture, each attempt going on from where
// the last stopped; that picture is the one a full read gives at the same
// Redis state, and every key is read once. Keys deleted, added and changed
// between the attempts of a sweep end up as a full read has them by the
// sweep after: nothing read in an earlier attempt is ended as released
// for not being read again, nothing deleted stays counted. With change
// tracking off and on; slot sets (raw connection), locks and queues.
func TestCutOffSweepGoesOn(t *testing.T) {
	srv := redistest.Start(t)
	rc := srv.Client()
	for _, track := range []bool{false, true} {
		for _, rf := range resumeFamilies(exportertest.RedisTime(t, rc)) {
			t.Run(fmt.Sprintf("%s/track_changes=%v", rf.fam.Name, track), func(t *testing.T) {
				if err := rc.FlushAll(context.Background()).Err(); err != nil {
					t.Fatal(err)
				}
				testCutOffSweep(t, rc, standaloneSection(srv.Addr), rf, track)
			})
		}
	}
}

// TestClusterCutOffSweepGoesOn is TestCutOffSweepGoesOn on a cluster of
// three masters, where each node's read goes on from its own cursor.
func TestClusterCutOffSweepGoesOn(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3, 0)
	cc := cl.Client()
	testCutOffSweep(t, cc, clusterSection(cl, "primary"), resumeFamilies(exportertest.RedisTime(t, cc))[0], false)
}

// testCutOffSweep runs TestCutOffSweepGoesOn's checks for one family, on
// the Redis of the redis block redisSection, which rc writes to.
func testCutOffSweep(t *testing.T, rc redis.UniversalClient, redisSection []string, rf resumeFamily, track bool) {
	began := time.Now()
	pipelined(t, rc, 0, resumeKeys, rf.write)
	yaml := func(sampling ...string) string {
		return redisproc.Config{
			Redis: redisSection,
			Sampling: append([]string{"interval: 1s", "window: 10m", "redis_cpu_share: 0",
				fmt.Sprintf("track_changes: %v", track)}, sampling...),
			Leaks:    []string{"per_user_series: 1000"},
			Families: []redisproc.Family{rf.fam},
		}.YAML()
	}
	full := exportertest.Dial(t, yaml())
	logs := exportertest.NewLogs()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("cut-off exporter's log:\n%s", logs.String())
		}
	})
	cut := exportertest.Dial(t, yaml("timeout: 500ms", fmt.Sprintf("max_keys_per_second: %d", resumeBudget)), logs.Logger())
	name := rf.fam.Name
	series := func(m string) string { return fmt.Sprintf(`%s{family=%q}`, m, name) }

	// sweep runs attempts until one completes, and returns how many were
	// cut off, and when the first returned and the last was called.
	sweep := func(what string) (cutOffs int, firstReturned, lastCalled time.Time) {
		t.Helper()
		deadline := time.Now().Add(3 * time.Minute)
		for {
			lastCalled = time.Now()
			err := cut.Sweeper.SweepOnce(context.Background())
			if firstReturned.IsZero() {
				firstReturned = time.Now()
			}
			if err == nil {
				return cutOffs, firstReturned, lastCalled
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("%s: attempt %d: %v", what, cutOffs+1, err)
			}
			cutOffs++
			if cutOffs == 1 && what == "first sweep" {
				if v, ok := cut.Metrics()[series("slot_sets")]; ok {
					t.Errorf("slot_sets = %v after the first attempt was cut off: only a complete sweep publishes", v)
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no complete sweep after %d attempts cut off at sampling.timeout", what, cutOffs)
			}
		}
	}

	// A sweep over several attempts: the same picture as a full read,
	// every key read once.
	cutOffs, firstReturned, lastCalled := sweep("first sweep")
	if cutOffs < 2 {
		t.Fatalf("the first sweep was cut off %d times; %d keys at %d keys/s within 500ms take 3 attempts at least: the test proves nothing",
			cutOffs, resumeKeys, resumeBudget)
	}
	full.Sweep()
	got := cut.Metrics()
	sameFiguresWithin(t, "a sweep over several attempts", full.Metrics(), got, time.Since(began).Seconds())
	if n := got[series("slot_exporter_keys_scanned_total")]; n != resumeKeys {
		t.Errorf("%d attempts read %v keys, want each of the %d keys read once", cutOffs+1, n, resumeKeys)
	}
	// The period runs from the first attempt's start: longer than the
	// last attempt, and than the attempts between the first and the last.
	period, dur := got[series("slot_exporter_sampling_period_seconds")], got[series("slot_exporter_sweep_duration_seconds")]
	if between := lastCalled.Sub(firstReturned).Seconds(); period <= dur || period < between {
		t.Errorf("sampling period %vs after %d attempts (the last %vs, %vs between the first and the last): it must span them all",
			period, cutOffs+1, dur, between)
	}
	if l := logs.Lines("sweep cut off at sampling.timeout; the next attempt goes on"); len(l) == 0 {
		t.Error("no warning that the sweep was cut off and goes on")
	}
	if l := logs.Lines("sweep completed over several attempts"); len(l) != 1 {
		t.Errorf("want one line saying the sweep completed over several attempts, got %q", l)
	}

	// Every key written, so that with change tracking too the next sweep
	// has them all to read: it is cut off like the first.
	pipelined(t, rc, 0, resumeKeys, rf.touch)
	if err := cut.Sweeper.SweepOnce(context.Background()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the first attempt of a sweep of %d keys returned %v, want a cut-off", resumeKeys, err)
	}
	// Between its attempts: keys deleted, added and changed, on both
	// sides of where the reads stopped.
	for i := 0; i < resumeKeys; i += 5 {
		if err := rc.Del(context.Background(), rf.prefix+fmt.Sprintf("{u%04d}", i)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	pipelined(t, rc, resumeKeys, resumeKeys+30, rf.write)
	pipelined(t, rc, 0, resumeKeys, func(c redis.Cmdable, i int) {
		if i%7 == 3 {
			rf.change(c, i)
		}
	})
	sweep("the sweep written through")
	// The sweep after it reads what changed while it ran.
	sweep("the next sweep")
	full.Sweep()
	sameFiguresWithin(t, "the sweep after keys were deleted, added and changed between attempts", full.Metrics(), cut.Metrics(),
		time.Since(began).Seconds())
}

// TestFlushOfOwnDatabaseCutOffGoesOn: with change tracking, a FLUSHDB of
// the family's own database, new holds written at once. The sweep after
// it reads what changed and its probes, finds no hold survived, and
// reads every key in the same sweep, over several attempts cut off at
// sampling.timeout: each new key read once, every old hold lost, the
// picture a full read gives.
func TestFlushOfOwnDatabaseCutOffGoesOn(t *testing.T) {
	srv := redistest.Start(t)
	rc := srv.Client()
	ctx := context.Background()
	began := time.Now()
	rf := resumeFamilies(exportertest.RedisTime(t, rc))[0]
	pipelined(t, rc, 0, resumeKeys, rf.write)
	yaml := func(sampling ...string) string {
		return redisproc.Config{
			Redis:    standaloneSection(srv.Addr),
			Sampling: append([]string{"interval: 1s", "window: 10m", "redis_cpu_share: 0"}, sampling...),
			Leaks:    []string{"per_user_series: 1000"},
			Families: []redisproc.Family{rf.fam},
		}.YAML()
	}
	full := exportertest.Dial(t, yaml("track_changes: false"))
	logs := exportertest.NewLogs()
	cut := exportertest.Dial(t, yaml("track_changes: true", "timeout: 500ms", fmt.Sprintf("max_keys_per_second: %d", resumeBudget)), logs.Logger())
	series := func(m string) string { return fmt.Sprintf(`%s{family=%q}`, m, rf.fam.Name) }
	sweep := func(what string) (cutOffs int) {
		t.Helper()
		exportertest.WaitFor(t, 0, what+": a complete sweep", func() bool {
			err := cut.Sweeper.SweepOnce(ctx)
			if err != nil && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("%s: %v", what, err)
			}
			if err != nil {
				cutOffs++
			}
			return err == nil
		})
		return cutOffs
	}
	sweep("first sweep")
	full.Sweep()

	if err := rc.FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	pipelined(t, rc, 0, resumeKeys, rf.change)
	before := cut.Metrics()[series("slot_exporter_keys_scanned_total")]
	// The names first, then every key: 1200 reads at 240 an attempt at
	// most.
	if n := sweep("the sweep after a FLUSHDB"); n < 4 {
		t.Errorf("the sweep after a FLUSHDB was cut off %d times; reading %d keys twice at %d keys/s within 500ms takes 5 attempts at least",
			n, resumeKeys, resumeBudget)
	}
	full.Sweep()
	got := cut.Metrics()
	sameFiguresWithin(t, "after a FLUSHDB of the family's own database", full.Metrics(), got, time.Since(began).Seconds())
	if n := got[series("slot_exporter_keys_scanned_total")] - before; n != resumeKeys {
		t.Errorf("the sweep after a FLUSHDB read %v keys, want each of the %d keys once", n, resumeKeys)
	}
	if lost := got[`slot_holds_ended_total{family="slots",outcome="lost"}`]; lost != 2*resumeKeys {
		t.Errorf("lost = %v, want every one of the %d holds", lost, 2*resumeKeys)
	}
	if l := logs.Lines("every key is read again"); len(l) != 1 {
		t.Errorf("want one line that every key is read again, got %q", l)
	}
}

// TestCutOffSweepGoesOnThroughAFlush: a sweep cut off at sampling.timeout,
// and a FLUSHDB before its next attempt. Of another database: the sweep
// goes on, each key read once, the picture a full read gives. Of the
// family's own database: it starts over. Slot sets, locks and list
// queues, with change tracking off and on. A queue's keys prove they
// survived only through the change feed (probe.go): without it, the
// sweep starts over, and its picture is still a full read's.
func TestCutOffSweepGoesOnThroughAFlush(t *testing.T) {
	srv := redistest.Start(t)
	rc := srv.Client()
	ctx := context.Background()
	cache := srv.ClientOf(5)
	for _, fam := range []int{0, 1, 2} {
		for _, track := range []bool{false, true} {
			for _, own := range []bool{false, true} {
				rf := resumeFamilies(exportertest.RedisTime(t, rc))[fam]
				t.Run(fmt.Sprintf("%s/track_changes=%v/own_database=%v", rf.fam.Name, track, own), func(t *testing.T) {
					exportertest.Must(t, rc.FlushAll(ctx).Err())
					began := time.Now()
					pipelined(t, rc, 0, resumeKeys, rf.write)
					full, cut, logs := cutOffPair(t, srv, rf, track)
					if err := cut.Sweeper.SweepOnce(ctx); !errors.Is(err, context.DeadlineExceeded) {
						t.Fatalf("the first attempt of a sweep of %d keys returned %v, want a cut-off", resumeKeys, err)
					}
					if own {
						exportertest.Must(t, rc.FlushDB(ctx).Err())
						pipelined(t, rc, 0, resumeKeys, rf.change)
					} else {
						exportertest.Must(t, cache.Set(ctx, "page:/", "<html>", 0).Err())
						exportertest.Must(t, cache.FlushDB(ctx).Err())
					}
					exportertest.WaitFor(t, 0, "a complete sweep", func() bool {
						err := cut.Sweeper.SweepOnce(ctx)
						if err != nil && !errors.Is(err, context.DeadlineExceeded) {
							t.Fatal(err)
						}
						return err == nil
					})
					full.Sweep()
					got := cut.Metrics()
					over, on := logs.Lines("starts over"), logs.Lines("emptied another database, and the sweep cut off at sampling.timeout goes on")
					if own {
						// What the first attempt read is gone: its holds are
						// lost (a full read never saw them), and the picture
						// is of the keys written after the flush.
						if len(over) != 1 || len(on) != 0 {
							t.Errorf("after a FLUSHDB of its own database the sweep must start over: %q, %q", over, on)
						}
						if sets := got[fmt.Sprintf(`slot_sets{family=%q}`, rf.fam.Name)]; sets != resumeKeys {
							t.Errorf("slot_sets = %v, want the %d written after the flush", sets, resumeKeys)
						}
						return
					}
					sameFiguresWithin(t, "a sweep through a FLUSHDB", full.Metrics(), got, time.Since(began).Seconds())
					if rf.fam.Kind == "list" && !track {
						if len(over) != 1 || len(on) != 0 {
							t.Errorf("without change tracking nothing shows a queue's keys survived: the sweep must start over: %q, %q", over, on)
						}
						return
					}
					if len(over) != 0 || len(on) != 1 {
						t.Errorf("after a FLUSHDB of another database the sweep must go on: %q, %q", over, on)
					}
					if n := got[fmt.Sprintf(`slot_exporter_keys_scanned_total{family=%q}`, rf.fam.Name)]; n != resumeKeys {
						t.Errorf("the sweep read %v keys, want each of the %d keys once", n, resumeKeys)
					}
				})
			}
		}
	}
}

// TestFlushInsideACutOffAttempt: a FLUSHDB of the family's own database
// lands inside an attempt of the sweep after a complete one, and every key
// is written again at once with holds named afresh. The attempt is cut
// off, and the next one's check finds the flush. Every hold of the sweep
// before must end as lost, as a full read has them:
//   - before_its_reads: the attempt reads the new holds alone, its probes
//     among them. Read again, the probes hold what this sweep read, which
//     proves nothing: it read them after the flush. Before, the sweep
//     went on as though another database had been flushed.
//   - after_its_first_batch: the attempt read its first keys before the
//     flush, and the rest after it. Before, every hold ended as released:
//     the sweep went on on probes read after the flush, and the old holds
//     it had read before it proved the flush "emptied another database";
//     or, with every probe read before it, it started over, and the new
//     holds read again proved the same (kind.Survivals.Unproven).
func TestFlushInsideACutOffAttempt(t *testing.T) {
	srv := redistest.Start(t)
	rc := srv.Client()
	ctx := context.Background()
	for fi, name := range []string{"slots", "locks"} { // resumeFamilies' first two
		for _, track := range []bool{false, true} {
			for _, afterBatch := range []bool{false, true} {
				where := map[bool]string{false: "before_its_reads", true: "after_its_first_batch"}[afterBatch]
				t.Run(fmt.Sprintf("%s/track_changes=%v/%s", name, track, where), func(t *testing.T) {
					exportertest.Must(t, rc.FlushAll(ctx).Err())
					began := time.Now()
					rf := resumeFamilies(exportertest.RedisTime(t, rc))[fi]
					perKey := map[string]float64{"slots": 2, "locks": 1}[rf.fam.Name]
					pipelined(t, rc, 0, resumeKeys, rf.write)
					full, cut, logs := cutOffPair(t, srv, rf, track)
					complete := func(what string) {
						t.Helper()
						exportertest.WaitFor(t, 0, what, func() bool {
							err := cut.Sweeper.SweepOnce(ctx)
							if err != nil && !errors.Is(err, context.DeadlineExceeded) {
								t.Fatalf("%s: %v", what, err)
							}
							return err == nil
						})
					}
					complete("a first complete sweep")
					full.Sweep()
					// With change tracking, every key named: the next
					// sweep reads them all, over several attempts.
					pipelined(t, rc, 0, resumeKeys, rf.touch)

					armed := true
					flush := func() {
						if !armed {
							return
						}
						armed = false
						// In one transaction: a SCAN between the two
						// would find no key and end the read.
						_, err := rc.TxPipelined(ctx, func(p redis.Pipeliner) error {
							p.FlushDB(ctx)
							for i := range resumeKeys {
								rf.change(p, i)
							}
							return nil
						})
						exportertest.Must(t, err)
					}
					if afterBatch {
						cut.Sweeper.AfterBatch(flush)
					} else {
						cut.Sweeper.AfterLostCheck(flush)
					}
					if err := cut.Sweeper.SweepOnce(ctx); !errors.Is(err, context.DeadlineExceeded) {
						t.Fatalf("the first attempt of the sweep after the flush returned %v, want a cut-off", err)
					}
					if armed {
						t.Fatal("the sweep did not flush")
					}
					complete("a complete sweep after the flush")
					full.Sweep()
					got := cut.Metrics()
					series := func(outcome string) string {
						return fmt.Sprintf(`slot_holds_ended_total{family=%q,outcome=%q}`, rf.fam.Name, outcome)
					}
					if lost, released := got[series("lost")], got[series("released")]; lost != perKey*resumeKeys || released != 0 {
						t.Errorf("lost %v and released %v, want all %v holds of the sweep before lost", lost, released, perKey*resumeKeys)
					}
					if on := logs.Lines("emptied another database"); len(on) != 0 {
						t.Errorf("holds read after the flush proved it emptied another database: %q", on)
					}
					sameFiguresWithin(t, "a sweep whose attempt a FLUSHDB landed in", full.Metrics(), got, time.Since(began).Seconds())
				})
			}
		}
	}
}
