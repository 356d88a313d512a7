package sweep_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/redisproc"
	"github.com/slotexporter/slot_exporter/internal/redistest"
)

// TestFlushBetweenCheckAndBarrier: a FLUSHDB that lands in a sweep after
// its check of the server's identity (INFO) and before the change feed's
// barrier, which names it. Of another database: the sweep reads what
// changed and the probes, and nothing is lost. Of the family's own: every
// hold is lost, not released, in that same sweep.
func TestFlushBetweenCheckAndBarrier(t *testing.T) {
	for _, own := range []bool{false, true} {
		t.Run(fmt.Sprintf("own_database=%v", own), func(t *testing.T) {
			srv := redistest.Start(t)
			rc := srv.Client()
			ctx := context.Background()
			cache := srv.ClientOf(5)
			rf := resumeFamilies(exportertest.RedisTime(t, rc))[0]
			const keys = 1000
			pipelined(t, rc, 0, keys, rf.write)
			h := exportertest.Dial(t, redisproc.Config{
				Redis:    standaloneSection(srv.Addr),
				Sampling: []string{"interval: 1m", "window: 10m", "full_scan_interval: 5h"},
				Families: []redisproc.Family{rf.fam},
			}.YAML())
			scanned := func() float64 { return h.Metrics()[`slot_exporter_keys_scanned_total{family="slots"}`] }
			h.Sweep()
			h.Sweep()

			flush := func() {
				if own {
					exportertest.Must(t, rc.FlushDB(ctx).Err())
					pipelined(t, rc, keys, keys+3, rf.write)
					return
				}
				exportertest.Must(t, cache.Set(ctx, "page:/", "<html>", 0).Err())
				exportertest.Must(t, cache.FlushDB(ctx).Err())
			}
			h.Sweeper.AfterLostCheck(func() {
				if flush != nil {
					flush()
					flush = nil
				}
			})
			before := scanned()
			h.Sweep()
			read := scanned() - before
			got := h.Metrics()
			lost, released := got[`slot_holds_ended_total{family="slots",outcome="lost"}`], got[`slot_holds_ended_total{family="slots",outcome="released"}`]
			if own {
				if lost != 2*keys || released != 0 {
					t.Errorf("lost %v and released %v, want all %d holds lost", lost, released, 2*keys)
				}
				if got[`slot_sets{family="slots"}`] != 3 {
					t.Errorf("slot_sets = %v, want the 3 written after the flush", got[`slot_sets{family="slots"}`])
				}
				return
			}
			if lost != 0 || released != 0 || read > 32 {
				t.Errorf("after a FLUSHDB of another database: lost %v, released %v, %v keys read; want nothing ended, and the probes read at most", lost, released, read)
			}
			// The sweep after it is as any other: nothing written, and
			// a slice of the reconciliation, one SCAN page (COUNT 10,
			// which SCAN may pass by a few keys).
			before = scanned()
			h.Sweep()
			if n := scanned() - before; n > 20 {
				t.Errorf("the sweep after read %v keys", n)
			}
		})
	}
}

// TestFlushOfAnotherDatabaseCounters: counters, whose values are not named
// afresh, after a FLUSHDB of another database: the probes exist and the
// feed has named none since, so the sweep reads what changed and them,
// with the figures of a full read. After a FLUSHDB of their own database
// they are gone, and the sweep reads every key.
func TestFlushOfAnotherDatabaseCounters(t *testing.T) {
	srv := redistest.Start(t)
	rc := srv.Client()
	ctx := context.Background()
	cache := srv.ClientOf(5)
	const keys = 1000
	pipe := rc.Pipeline()
	for i := range keys {
		pipe.Set(ctx, fmt.Sprintf("c:{u%04d}", i), i%4, 0)
	}
	_, err := pipe.Exec(ctx)
	exportertest.Must(t, err)
	yaml := func(track bool) string {
		return redisproc.Config{
			Redis:    standaloneSection(srv.Addr),
			Sampling: []string{"interval: 1m", "window: 10m", "full_scan_interval: 5h", fmt.Sprintf("track_changes: %v", track)},
			Leaks:    []string{"per_user_series: 1000"},
			Families: []redisproc.Family{{Name: "legacy", Kind: "counter", Match: "c:*", Limit: 3}},
		}.YAML()
	}
	full, logs := exportertest.Dial(t, yaml(false)), exportertest.NewLogs()
	h := exportertest.Dial(t, yaml(true), logs.Logger())
	scanned := func() float64 { return h.Metrics()[`slot_exporter_keys_scanned_total{family="legacy"}`] }
	h.Sweep()
	h.Sweep()
	full.Sweep()

	exportertest.Must(t, rc.Incr(ctx, "c:{u0001}").Err())
	exportertest.Must(t, rc.Del(ctx, "c:{u0002}").Err())
	exportertest.Must(t, cache.Set(ctx, "page:/", "<html>", 0).Err())
	exportertest.Must(t, cache.FlushDB(ctx).Err())
	before := scanned()
	h.Sweep()
	full.Sweep()
	if n := scanned() - before; n < 2 || n > 2+32 {
		t.Errorf("the sweep after a FLUSHDB of another database read %v keys; want the 2 written and at most 32 probes", n)
	}
	sameFiguresWithin(t, "after a FLUSHDB of another database", full.Metrics(), h.Metrics(), 1)
	if l := logs.Lines("left keys of this family in place"); len(l) != 1 {
		t.Errorf("want one line that the flush left the keys in place, got %q", l)
	}

	exportertest.Must(t, rc.FlushDB(ctx).Err())
	exportertest.Must(t, rc.Set(ctx, "c:{u0007}", 3, 0).Err())
	h.Sweep()
	full.Sweep()
	sameFiguresWithin(t, "after a FLUSHDB of their own database", full.Metrics(), h.Metrics(), 1)
	if l := logs.Lines("every key is read again"); len(l) != 1 {
		t.Errorf("want one line that every key is read again, got %q", l)
	}
}

// TestFlushWhileASweepReads: a FLUSHDB that lands while a sweep reads its
// keys, after the change feed's barrier. The keys it reads after the
// flush hold what was written since. Of the family's own database, with
// every key written again after it: each hold there before the flush is
// lost, none released, however the sweep's reads fell on either side of
// it; before, the sweep ended the holds it found gone as released, and
// the holds written after the flush that it read, read again by the
// sweep after, showed that the flush emptied another database (lost 0).
// Of another database: nothing is lost, a hold deleted meanwhile ends
// released, and the sweep after reads what changed and the probes. A
// flush in every sweep still lets holds end: a sweep leaves its ends to
// the next at most once in a row.
func TestFlushWhileASweepReads(t *testing.T) {
	cases := []struct {
		name       string
		own, every bool
	}{{"own_database", true, false}, {"another_database", false, false}, {"another_database_every_sweep", false, true}}
	for fi, name := range []string{"slots", "locks"} { // resumeFamilies' first two
		for _, tc := range cases {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				srv := redistest.Start(t)
				rc := srv.Client()
				ctx := context.Background()
				cache := srv.ClientOf(5)
				rf := resumeFamilies(exportertest.RedisTime(t, rc))[fi]
				perKey := map[string]float64{"slots": 2, "locks": 1}[rf.fam.Name]
				const keys = 2000
				pipelined(t, rc, 0, keys, rf.write)
				h := exportertest.Dial(t, redisproc.Config{
					Redis: standaloneSection(srv.Addr),
					// Pages of 10 keys: the readers hold a few pages ahead
					// of the batches applied, so most keys are read after
					// the flush.
					Sampling: []string{"interval: 1m", "window: 10m", "full_scan_interval: 5h", "scan_count: 10"},
					Families: []redisproc.Family{rf.fam},
				}.YAML())
				series := func(outcome string) string {
					return fmt.Sprintf(`slot_holds_ended_total{family=%q,outcome=%q}`, rf.fam.Name, outcome)
				}
				scanned := func() float64 {
					return h.Metrics()[fmt.Sprintf(`slot_exporter_keys_scanned_total{family=%q}`, rf.fam.Name)]
				}
				h.Sweep()
				h.Sweep()
				// 800 keys named by the feed (below its limit, 1024, past
				// which a sweep reads every key): the next sweep reads
				// them in batches, the flush after the first.
				pipelined(t, rc, 0, 800, rf.touch)
				armed := false
				h.Sweeper.AfterBatch(func() {
					if !armed {
						return
					}
					armed = false
					if tc.own {
						exportertest.Must(t, rc.FlushDB(ctx).Err())
						pipelined(t, rc, 0, keys, rf.change) // holds named afresh
						return
					}
					exportertest.Must(t, rc.Del(ctx, rf.prefix+"{u1999}").Err())
					exportertest.Must(t, cache.Set(ctx, "page:/", "<html>", 0).Err())
					exportertest.Must(t, cache.FlushDB(ctx).Err())
				})
				armed = true
				h.Sweep()
				if armed {
					t.Fatal("the sweep applied no batch")
				}
				// A flush in this sweep too (every): it ends what the one
				// before left to it all the same.
				armed = tc.every
				before := scanned()
				h.Sweep()
				read := scanned() - before
				got := h.Metrics()
				lost, released := got[series("lost")], got[series("released")]
				if tc.own {
					if lost != perKey*keys || released != 0 {
						t.Errorf("lost %v and released %v, want all %v holds lost", lost, released, perKey*keys)
					}
					return
				}
				if lost != 0 || released != perKey {
					t.Errorf("after a FLUSHDB of another database: lost %v and released %v, want the %v holds of the deleted key released", lost, released, perKey)
				}
				if !tc.every && read > 64 {
					t.Errorf("the sweep after the flush read %v keys, want what changed and the probes", read)
				}
			})
		}
	}
}
