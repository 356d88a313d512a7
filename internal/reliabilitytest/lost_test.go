package reliabilitytest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/redisinfo"
	"github.com/slotexporter/slot_exporter/internal/redistest"
	"github.com/slotexporter/slot_exporter/internal/topology"
)

// lostCase makes the family's data vanish; it returns the client that
// reaches where the family reads now.
type lostCase struct {
	name   string
	vanish func(t *testing.T, srv *redistest.Server, admin *redis.Client, e *exporter) *redis.Client
}

var ctx = context.Background()

// TestVanishedDataIsLost: 20 holds, one released, then the data vanishes
// in each way docs/design.md ("Lost, not released") lists and a few more.
// The 19 left must end as lost (not released, not expired), with one
// warning naming 19; and once that sweep is past, holds that end are
// judged as usual again (a release is a release).
func TestVanishedDataIsLost(t *testing.T) {
	reloadTo := func(e *exporter, yaml string) {
		if err := e.reload(yaml); err != nil {
			t.Fatalf("reload: %v", err)
		}
	}
	cases := []lostCase{
		{"FLUSHALL", func(t *testing.T, _ *redistest.Server, a *redis.Client, _ *exporter) *redis.Client {
			exportertest.Must(t, a.FlushAll(ctx).Err())
			return a
		}},
		{"FLUSHALL ASYNC", func(t *testing.T, _ *redistest.Server, a *redis.Client, _ *exporter) *redis.Client {
			exportertest.Must(t, a.FlushAllAsync(ctx).Err())
			return a
		}},
		{"FLUSHDB", func(t *testing.T, _ *redistest.Server, a *redis.Client, _ *exporter) *redis.Client {
			exportertest.Must(t, a.FlushDB(ctx).Err())
			return a
		}},
		// A monitoring tool resets the command counts, then someone
		// flushes: the flush count is back where it was.
		{"CONFIG RESETSTAT then FLUSHALL", func(t *testing.T, _ *redistest.Server, a *redis.Client, _ *exporter) *redis.Client {
			exportertest.Must(t, a.ConfigResetStat(ctx).Err())
			exportertest.Must(t, a.FlushAll(ctx).Err())
			return a
		}},
		// The family's database swapped with an empty one.
		{"SWAPDB", func(t *testing.T, _ *redistest.Server, a *redis.Client, _ *exporter) *redis.Client {
			exportertest.Must(t, a.Do(ctx, "SWAPDB", 0, 1).Err())
			return a
		}},
		{"restart empty", func(t *testing.T, srv *redistest.Server, a *redis.Client, _ *exporter) *redis.Client {
			srv.Restart()
			return a
		}},
		// The flush happens while the config is reloaded: the new
		// sweeper inherits what the old one knew of the server.
		{"FLUSHALL across a reload", func(t *testing.T, srv *redistest.Server, a *redis.Client, e *exporter) *redis.Client {
			exportertest.Must(t, a.FlushAll(ctx).Err())
			reloadTo(e, configYAML(addrBlock(srv.Addr), "  interval: 2s\n  timeout: 5s\n  window: 10s\n", streamsFamily))
			return a
		}},
		{"reload to another Redis", func(t *testing.T, _ *redistest.Server, _ *redis.Client, e *exporter) *redis.Client {
			other := redistest.Start(t)
			reloadTo(e, configYAML(addrBlock(other.Addr), quickSampling, streamsFamily))
			return other.Client()
		}},
		{"reload to another database", func(t *testing.T, srv *redistest.Server, _ *redis.Client, e *exporter) *redis.Client {
			reloadTo(e, configYAML(addrBlock(srv.Addr)+"  db: 3\n", quickSampling, streamsFamily))
			c := srv.ClientOf(3)
			return c
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := redistest.Start(t)
			admin := srv.Client()
			// A server that was flushed once before (at deployment): the
			// flush count does not start at 0.
			exportertest.Must(t, admin.FlushAll(ctx).Err())
			e := nineteenHolds(t, srv, admin)

			now := c.vanish(t, srv, admin, e)
			exportertest.WaitFor(t, 2*time.Minute, "a sweep of what the family reads now", func() bool { return e.trySweep() == nil })
			exportertest.Expect(t, e.metrics(), map[string]float64{
				lostS: 19, releasedS: 1, expiredS: 0, liveS: 0, upS: 1,
				`slot_hold_duration_seconds_count{family="streams"}`: 20,
			})
			if w := e.records(slog.LevelWarn, "holds lost"); len(w) != 1 || w[0].Attrs["lost"] != "19" {
				t.Errorf("want one warning naming 19 lost holds, got %+v", w)
			}

			// Afterwards, a release is a release again. (After a restart,
			// a raw connection pooled from before it fails the first sweep
			// that reads a key; at intervals above the pool's 2 s idle
			// time no connection outlives a sweep.)
			seedHolds(t, now, "v", 3, 1, exportertest.RedisTime(t, now)+115_000)
			exportertest.WaitFor(t, 2*time.Minute, "a sweep of the new holds", func() bool { return e.trySweep() == nil })
			exportertest.Must(t, now.ZRem(ctx, streamKey("v0"), "s0").Err())
			e.sweep()
			exportertest.Expect(t, e.metrics(), map[string]float64{lostS: 19, releasedS: 2, liveS: 2, acquiresS: 23})
		})
	}
}

// nineteenHolds starts an exporter on srv after 20 holds, of which it has
// seen one released.
func nineteenHolds(t *testing.T, srv *redistest.Server, admin *redis.Client) *exporter {
	t.Helper()
	seedHolds(t, admin, "u", 10, 2, exportertest.RedisTime(t, admin)+115_000)
	e := newExporter(t, configYAML(addrBlock(srv.Addr), quickSampling, streamsFamily))
	e.sweep()
	exportertest.Must(t, admin.ZRem(ctx, streamKey("u0"), "s0").Err())
	e.sweep()
	exportertest.Expect(t, e.metrics(), map[string]float64{releasedS: 1, lostS: 0, liveS: 19})
	e.logs.Take()
	return e
}

// TestReloadToTheSameRedisLosesNothing: a reload that changes the client
// but not the data it reads (a dial timeout, the sampling) is no loss:
// holds released around it are released.
func TestReloadToTheSameRedisLosesNothing(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client()
	seedHolds(t, admin, "u", 10, 2, exportertest.RedisTime(t, admin)+115_000)
	e := newExporter(t, configYAML(addrBlock(srv.Addr), quickSampling, streamsFamily))
	e.sweep()
	for u := range 10 {
		exportertest.Must(t, admin.Del(ctx, streamKey(fmt.Sprintf("u%d", u))).Err())
	}
	if err := e.reload(configYAML(addrBlock(srv.Addr)+"  dial_timeout: 3s\n", "  interval: 2s\n  timeout: 5s\n  window: 20s\n", streamsFamily)); err != nil {
		t.Fatal(err)
	}
	e.sweep()
	exportertest.Expect(t, e.metrics(), map[string]float64{releasedS: 20, lostS: 0})
	if w := e.records(slog.LevelWarn, "holds lost"); len(w) != 0 {
		t.Errorf("a reload to the same Redis logged %+v", w)
	}
}

// TestFailoverToALaggingReplicaIsLost: through Sentinel, the master takes
// 10 holds of which the replica has only 6 (the replica's link was cut
// before the last 4 were written) and dies; Sentinel promotes the replica.
// The 4 holds it never had are lost, the 6 it has are still live.
func TestFailoverToALaggingReplicaIsLost(t *testing.T) {
	master := redistest.Start(t)
	mc := master.Client()
	replica := redistest.StartReplica(t, master)
	sent := redistest.StartSentinel(t, "m", master, redistest.SentinelOptions{})
	sent.WaitReplicas(1, 10*time.Second)

	expiry := exportertest.RedisTime(t, mc) + 115_000
	seedHolds(t, mc, "a", 6, 1, expiry)
	redistest.WaitReplicated(t, master, 1)

	e := newExporter(t, configYAML("  mode: sentinel\n  master_name: m\n  addrs: [\""+sent.Addr+"\"]\n", quickSampling, streamsFamily))
	e.sweep()

	// Freeze the replica and cut its link, so that what follows never
	// reaches it; then the master takes 4 more holds and dies.
	stopReplica(t, replica, true)
	exportertest.Must(t, mc.ClientKillByFilter(ctx, "TYPE", "replica").Err())
	seedHolds(t, mc, "b", 4, 1, expiry)
	e.sweep()
	exportertest.Expect(t, e.metrics(), map[string]float64{liveS: 10, acquiresS: 10})
	e.logs.Take()
	master.Kill()
	stopReplica(t, replica, false)
	if m := sent.WaitMasterNot(master.Addr, 30*time.Second); m != replica.Addr {
		t.Fatalf("sentinel promoted %s, want %s", m, replica.Addr)
	}
	exportertest.WaitFor(t, 2*time.Minute, "a sweep of the promoted replica", func() bool { return e.trySweep() == nil })
	exportertest.Expect(t, e.metrics(), map[string]float64{lostS: 4, releasedS: 0, expiredS: 0, liveS: 6})
	if w := e.records(slog.LevelWarn, "holds lost"); len(w) != 1 || w[0].Attrs["lost"] != "4" {
		t.Errorf("want one warning naming 4 lost holds, got %+v", w)
	}
}

// stopReplica freezes (SIGSTOP) or thaws (SIGCONT) a server.
func stopReplica(t *testing.T, s *redistest.Server, stop bool) {
	t.Helper()
	sig := syscall.SIGCONT
	if stop {
		sig = syscall.SIGSTOP
	}
	exportertest.Must(t, syscall.Kill(s.PID(), sig))
}

// TestFlushOfAnotherDatabaseLosesNothing: a server with a cache in another
// database, which a deploy flushes. Redis counts the FLUSHDB without
// saying which database it emptied; the family's holds read again after it
// show it was not theirs, so a hold released beside it is released, not
// lost, and nobody is paged. A FLUSHDB of the family's own database, with
// new holds written at once, is still a loss.
func TestFlushOfAnotherDatabaseLosesNothing(t *testing.T) {
	cases := []struct {
		name  string
		flush func(t *testing.T, admin, cache *redis.Client)
		lost  float64
	}{
		{"FLUSHDB of the cache", func(t *testing.T, _, cache *redis.Client) {
			exportertest.Must(t, cache.FlushDB(ctx).Err())
		}, 0},
		{"SWAPDB of two other databases", func(t *testing.T, admin, _ *redis.Client) {
			exportertest.Must(t, admin.Do(ctx, "SWAPDB", 5, 6).Err())
		}, 0},
		{"CONFIG RESETSTAT then FLUSHDB of the cache", func(t *testing.T, admin, cache *redis.Client) {
			exportertest.Must(t, admin.ConfigResetStat(ctx).Err())
			exportertest.Must(t, cache.FlushDB(ctx).Err())
		}, 0},
		{"FLUSHDB of its own database, new holds written at once", func(t *testing.T, admin, _ *redis.Client) {
			exportertest.Must(t, admin.FlushDB(ctx).Err())
			seedHolds(t, admin, "w", 3, 1, exportertest.RedisTime(t, admin)+115_000)
		}, 19}, // the release just before the flush cannot be told apart
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := redistest.Start(t)
			admin := srv.Client()
			cache := srv.ClientOf(5)
			exportertest.Must(t, cache.Set(ctx, "page:/", "<html>", 0).Err())
			e := nineteenHolds(t, srv, admin)

			// A hold released in the same sweep as the flush.
			exportertest.Must(t, admin.ZRem(ctx, streamKey("u1"), "s0").Err())
			c.flush(t, admin, cache)
			e.sweep()
			if c.lost > 0 {
				exportertest.Expect(t, e.metrics(), map[string]float64{lostS: c.lost, releasedS: 1, liveS: 3})
				if w := e.records(slog.LevelWarn, "holds lost"); len(w) != 1 {
					t.Errorf("want one warning of lost holds, got %+v", w)
				}
				return
			}
			exportertest.Expect(t, e.metrics(), map[string]float64{lostS: 0, releasedS: 2, expiredS: 0, liveS: 18})
			recs := e.logs.Take()
			var warned, told int
			for _, r := range recs {
				switch {
				case r.Level == slog.LevelWarn && strings.Contains(r.Msg, "holds lost"):
					warned++
				case r.Level == slog.LevelInfo && strings.Contains(r.Msg, "emptied another database") && r.Attrs["holds_in_place"] == "18":
					told++
				}
			}
			if warned != 0 || told != 1 {
				t.Errorf("want no lost warning and one record of 18 holds in place, got %+v", recs)
			}

			// The next flush of the family's own database is a loss.
			exportertest.Must(t, admin.FlushDB(ctx).Err())
			e.sweep()
			exportertest.Expect(t, e.metrics(), map[string]float64{lostS: 18, releasedS: 2, liveS: 0})
		})
	}
}

// TestFlushOfAnotherDatabaseReadsWhatChanged: with change tracking (the
// default), a FLUSHDB of another database does not make the next sweep
// read every slot set. It reads what changed and a few held keys; one
// hold read again shows the flush emptied another database. A SWAPDB
// still reads everything, and a FLUSHDB of the family's own database,
// found when no hold survived, reads everything in the same sweep and
// ends every hold as lost.
func TestFlushOfAnotherDatabaseReadsWhatChanged(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client()
	cache := srv.ClientOf(5)
	const users = 2000
	expiry := exportertest.RedisTime(t, admin) + 115_000
	seedHolds(t, admin, "u", users, 2, expiry)
	e := newExporter(t, configYAML(addrBlock(srv.Addr), quickSampling, streamsFamily))
	const scannedS = `slot_exporter_keys_scanned_total{family="streams"}`
	sweepReads := func() float64 {
		t.Helper()
		before := e.metrics()[scannedS]
		e.sweep()
		return e.metrics()[scannedS] - before
	}
	if n := sweepReads(); n != users {
		t.Fatalf("the first sweep read %v keys, want %d", n, users)
	}
	// A sweep of what changed reads it, and a slice of the slow
	// reconciliation: a SCAN page of 10 keys or so.
	const few = 50
	if n := sweepReads(); n > few {
		t.Fatalf("a sweep with nothing written read %v keys", n)
	}
	e.logs.Take()

	// One hold released, one acquired, and the cache flushed.
	exportertest.Must(t, admin.ZRem(ctx, streamKey("u1"), "s0").Err())
	exportertest.Must(t, admin.ZAdd(ctx, streamKey("u2"), redis.Z{Score: float64(expiry), Member: "s9"}).Err())
	exportertest.Must(t, cache.Set(ctx, "page:/", "<html>", 0).Err())
	exportertest.Must(t, cache.FlushDB(ctx).Err())
	// It leaves the reconciliation to the next sweep.
	if n := sweepReads(); n < 2 || n > 2+32 {
		t.Errorf("the sweep after a FLUSHDB of another database read %v keys; want the 2 written and at most 32 held ones (sweep.maxProbes)", n)
	}
	exportertest.Expect(t, e.metrics(), map[string]float64{lostS: 0, releasedS: 1, liveS: 2 * users})
	if r := e.records(slog.LevelInfo, "emptied another database"); len(r) != 1 {
		t.Errorf("want one record that the flush emptied another database, got %+v", r)
	}

	// A SWAPDB puts another database's keys in place, unannounced.
	exportertest.Must(t, admin.Do(ctx, "SWAPDB", 5, 6).Err())
	if n := sweepReads(); n != users {
		t.Errorf("the sweep after a SWAPDB read %v keys, want all %d", n, users)
	}
	exportertest.Expect(t, e.metrics(), map[string]float64{lostS: 0, releasedS: 1, liveS: 2 * users})

	// The family's own database flushed, and new holds written at once:
	// the probes are gone, nothing survived, and the sweep reads every
	// key there is.
	exportertest.Must(t, admin.FlushDB(ctx).Err())
	seedHolds(t, admin, "w", 3, 1, expiry)
	if n := sweepReads(); n < 3 {
		t.Errorf("the sweep after a FLUSHDB of the family's database read %v keys, want the 3 new ones at least", n)
	}
	exportertest.Expect(t, e.metrics(), map[string]float64{lostS: 2 * users, releasedS: 1, liveS: 3})
	if r := e.records(slog.LevelInfo, "every key is read again"); len(r) != 1 {
		t.Errorf("want one record that every key is read again, got %+v", r)
	}
	// And tracking goes on: a write after it is read as changed.
	exportertest.Must(t, admin.ZRem(ctx, streamKey("w0"), "s0").Err())
	if n := sweepReads(); n < 1 || n > few {
		t.Errorf("a sweep after one write read %v keys", n)
	}
	exportertest.Expect(t, e.metrics(), map[string]float64{lostS: 2 * users, releasedS: 2, liveS: 2})
}

// TestEvictionsAreWarned: keys that maxmemory evicts vanish without a
// word from Redis about which they were (docs/design.md: they end as
// released), so the sweep after them warns once, naming how many, and a
// Redis that goes on evicting is not warned of every sweep.
func TestEvictionsAreWarned(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client()
	cache := srv.ClientOf(5)
	e := nineteenHolds(t, srv, admin)
	evict := func() int64 {
		t.Helper()
		exportertest.Must(t, admin.ConfigSet(ctx, "maxmemory-policy", "allkeys-random").Err())
		exportertest.Must(t, admin.ConfigSet(ctx, "maxmemory", "1").Err())
		// The write makes Redis evict everything it can, then refuses.
		_ = cache.Set(ctx, "page:/", "<html>", 0).Err()
		exportertest.Must(t, admin.ConfigSet(ctx, "maxmemory", "0").Err())
		info, err := admin.Info(ctx, "stats").Result()
		exportertest.Must(t, err)
		n, _ := strconv.ParseInt(redisinfo.Field(info, "evicted_keys"), 10, 64)
		return n
	}
	if n := evict(); n < 10 {
		t.Fatalf("Redis evicted %d keys, want the ten slot sets", n)
	}
	e.sweep()
	w := e.records(slog.LevelWarn, "Redis evicted keys")
	if len(w) != 1 || w[0].Attrs["evicted_keys"] != "10" {
		t.Errorf("want one warning naming 10 evicted keys, got %+v", w)
	}
	seedHolds(t, admin, "v", 2, 1, exportertest.RedisTime(t, admin)+115_000)
	e.sweep()
	evict()
	e.sweep()
	if w := e.records(slog.LevelWarn, "Redis evicted keys"); len(w) != 0 {
		t.Errorf("warned again within %v: %+v", 10*time.Minute, w)
	}
}

// TestReplicaRestartLosesNothing: a replica read for the family restarts
// and syncs its master's data again; nothing vanished, so what ends
// after it ends as usual. Its run_id is new, which read as a restart of
// the dataset and counted every hold that ended in the next sweep, on
// every shard, as lost; its master_replid, the history of its data, is
// the master's still.
func TestReplicaRestartLosesNothing(t *testing.T) {
	master := redistest.Start(t)
	admin := master.Client()
	replica := redistest.StartReplica(t, master)
	seedHolds(t, admin, "u", 10, 2, exportertest.RedisTime(t, admin)+115_000)
	redistest.WaitReplicated(t, master, 1)
	e := newExporter(t, configYAML(addrBlock(replica.Addr), quickSampling+"  track_changes: false\n", streamsFamily))
	e.sweep()
	exportertest.Expect(t, e.metrics(), map[string]float64{liveS: 20, lostS: 0})

	replica.Restart()
	waitInSync(t, replica)
	exportertest.Must(t, admin.ZRem(ctx, streamKey("u0"), "s0").Err())
	redistest.WaitReplicated(t, master, 1)
	e.sweep()
	exportertest.Expect(t, e.metrics(), map[string]float64{liveS: 19, releasedS: 1, lostS: 0})
	if w := e.records(slog.LevelWarn, "holds lost"); len(w) != 0 {
		t.Errorf("a replica that restarted and synced again: %+v", w)
	}
}

// TestUnsyncedReplicaIsNotRead: through Sentinel with read_from: replica,
// the replica restarts without its data (no persistence, its files gone
// with its pod) and waits for its sync: its master holds the fork back
// (repl-diskless-sync-delay), as a master stopped or busy would. Read, it
// had no keys, and the sweep ended all 20 holds as lost. The sweep now
// fails, saying why, or reads the master; the figures of the last sweep
// stay, and once the replica has synced nothing was lost.
func TestUnsyncedReplicaIsNotRead(t *testing.T) {
	master := redistest.Start(t)
	admin := master.Client()
	replica := redistest.StartReplica(t, master)
	sent := redistest.StartSentinel(t, "m", master, redistest.SentinelOptions{})
	sent.WaitReplicas(1, 10*time.Second)
	seedHolds(t, admin, "u", 10, 2, exportertest.RedisTime(t, admin)+115_000)
	redistest.WaitReplicated(t, master, 1)
	e := newExporter(t, configYAML("  mode: sentinel\n  master_name: m\n  read_from: replica\n  addrs: [\""+sent.Addr+"\"]\n",
		quickSampling, streamsFamily))
	e.sweep()
	want := map[string]float64{liveS: 20, lostS: 0, releasedS: 0, expiredS: 0}
	exportertest.Expect(t, e.metrics(), want)

	exportertest.Must(t, admin.ConfigSet(ctx, "repl-diskless-sync-delay", "3600").Err())
	replica.RestartEmpty()
	// Sentinel lists the replica again once it has reconnected to it:
	// until then go-redis, finding no replica, dials the master.
	waitReplicaListed(t, sent, replica.Addr)
	// Which of two right answers comes depends on when the Sentinel last
	// read the replica's INFO (every 10 s): while it still calls the
	// replica's link ok, the sweep picks it and fails, saying why; once
	// it has seen the link down, the sweep reads the master. Either way
	// nothing ends.
	switch err := e.trySweep(); {
	case err == nil:
	case errors.Is(err, topology.ErrUnsynced):
		if r := e.records(slog.LevelError, "sweep failed"); len(r) != 1 || !strings.Contains(r[0].Attrs["err"], "has not synced") {
			t.Errorf("want one error saying that the replica has not synced, got %+v", r)
		}
	default:
		t.Fatalf("a sweep with the replica restarted empty: %v, want none or %v; %v", err, topology.ErrUnsynced, exportertest.Series(e.metrics(), "slot_holds_ended_total"))
	}
	exportertest.Expect(t, e.metrics(), want)

	exportertest.Must(t, admin.ConfigSet(ctx, "repl-diskless-sync-delay", "0").Err())
	waitInSync(t, replica)
	exportertest.Must(t, admin.ZRem(ctx, streamKey("u0"), "s0").Err())
	redistest.WaitReplicated(t, master, 1)
	e.sweep()
	exportertest.Expect(t, e.metrics(), map[string]float64{liveS: 19, releasedS: 1, lostS: 0, expiredS: 0})
	if w := e.records(slog.LevelWarn, "holds lost"); len(w) != 0 {
		t.Errorf("a replica that synced after its restart: %+v", w)
	}
}

// waitReplicaListed waits until the sentinel names the replica at addr
// up: neither disconnected nor down.
func waitReplicaListed(t *testing.T, sent *redistest.Sentinel, addr string) {
	t.Helper()
	c := redis.NewSentinelClient(&redis.Options{Addr: sent.Addr, DisableIdentity: true})
	defer c.Close()
	exportertest.WaitFor(t, time.Minute, "the sentinel to list the replica", func() bool {
		rs, err := c.Replicas(ctx, sent.Name).Result()
		for _, r := range rs {
			if err == nil && net.JoinHostPort(r["ip"], r["port"]) == addr && r["flags"] == "slave" {
				return true
			}
		}
		return false
	})
}

// waitInSync waits until replica has its master's data again.
func waitInSync(t *testing.T, replica *redistest.Server) {
	t.Helper()
	c := replica.Client()
	exportertest.WaitFor(t, time.Minute, "the replica's sync", func() bool {
		info, err := c.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "master_link_status:up") && !strings.Contains(info, "master_sync_in_progress:1")
	})
}
