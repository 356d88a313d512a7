package sweep_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/redisproc"
	"github.com/slotexporter/slot_exporter/internal/redistest"
	"github.com/slotexporter/slot_exporter/internal/topology"
)

// clusterConfig is the config of every cluster test: the common families
// with the given slot timings; redis is the redis block.
func clusterConfig(redis []string, ttl, hb time.Duration) string {
	slots, counters := redisproc.Slots(), redisproc.Counters()
	slots.TTL, slots.Heartbeat, slots.MaxHold = ttl, hb, time.Hour
	return redisproc.Config{
		Redis:    redis,
		Sampling: []string{"interval: 5s", "timeout: 20s", "scan_count: 50"},
		Leaks:    []string{"per_user_series: 100000"},
		Families: []redisproc.Family{slots, counters},
	}.YAML()
}

func standaloneSection(addr string) []string { return []string{fmt.Sprintf("addr: %q", addr)} }

func clusterSection(c *redistest.Cluster, readFrom string) []string {
	lines := []string{"mode: cluster", "read_from: " + readFrom, "addrs:"}
	for _, a := range c.Addrs() {
		lines = append(lines, fmt.Sprintf("  - %q", a))
	}
	return lines
}

// movedReports are the records in which a sweep said keys changed nodes.
func movedReports(recs []exportertest.Record) []exportertest.Record {
	var out []exportertest.Record
	for _, r := range recs {
		if strings.Contains(r.Msg, "moved between cluster nodes") && r.Attrs["family"] == "streams" {
			out = append(out, r)
		}
	}
	return out
}

// deferredReports counts the records in which a sweep said it could not
// account for every key that may have moved, and so ended nothing.
func deferredReports(recs []exportertest.Record) int {
	n := 0
	for _, r := range recs {
		if strings.Contains(r.Msg, "beyond key-by-key accounting") {
			n++
		}
	}
	return n
}

// newConfiguredHarness builds the client the way main.go does, through
// redisconn, so that cluster mode and read_from are the exporter's own.
func newConfiguredHarness(t *testing.T, yaml string, logs *exportertest.Logs) *exportertest.Harness {
	t.Helper()
	if logs == nil {
		logs = exportertest.NewLogs()
	}
	return exportertest.Dial(t, yaml, logs.Logger())
}

// redisTimeMs reads a server's clock: both setups get scores from the same
// base, so the same member is in the same state on both.
func redisTimeMs(t *testing.T, c redis.Cmdable) int64 {
	t.Helper()
	tm, err := c.Time(context.Background()).Result()
	if err != nil {
		t.Fatalf("TIME: %v", err)
	}
	return tm.UnixMilli()
}

const (
	wlUsers    = 240
	wlCounters = 60
	wlTTL      = 60 * time.Second
	wlHB       = 10 * time.Second
)

// writeWorkload writes the equality workload: per user, by i%6, one live
// slot; two live and a stale one; an expired and a live one; a future one;
// four live (over the limit of 3); only an expired one. Some keys have no
// TTL, some expire before their live slots. Counters run from -1 to 4, and
// a few keys are of the wrong type, carry a bad value or name no user.
func writeWorkload(t *testing.T, c redis.Cmdable, base int64) {
	t.Helper()
	ctx := context.Background()
	live := float64(base + 55_000)   // heartbeat 5s ago
	stale := float64(base + 30_000)  // heartbeat 30s ago, stale after 20s
	expired := float64(base - 5_000) // already past
	future := float64(base + 3_600_000)
	pipe := c.Pipeline()
	for i := range wlUsers {
		k := redisproc.SlotKey(fmt.Sprintf("u%03d", i))
		var zs []redis.Z
		switch i % 6 {
		case 0:
			zs = []redis.Z{{Score: live, Member: "a"}}
		case 1:
			zs = []redis.Z{{Score: live, Member: "a"}, {Score: live, Member: "b"}, {Score: stale, Member: "s"}}
		case 2:
			zs = []redis.Z{{Score: expired, Member: "x"}, {Score: live, Member: "a"}}
		case 3:
			zs = []redis.Z{{Score: future, Member: "f"}}
		case 4:
			zs = []redis.Z{{Score: live, Member: "a"}, {Score: live, Member: "b"}, {Score: live, Member: "c"}, {Score: live, Member: "d"}}
		case 5:
			zs = []redis.Z{{Score: expired, Member: "x"}}
		}
		pipe.ZAdd(ctx, k, zs...)
		switch i % 10 {
		case 7: // no TTL
		case 8:
			pipe.PExpire(ctx, k, 10*time.Second) // before its live slots
		default:
			pipe.PExpire(ctx, k, 2*wlTTL)
		}
	}
	for i := range wlCounters {
		pipe.Set(ctx, redisproc.CounterKey(fmt.Sprintf("c%03d", i)), i%6-1, 0)
	}
	pipe.Set(ctx, redisproc.SlotKey("wrongtype"), "1", 0)
	pipe.HSet(ctx, redisproc.CounterKey("hash"), "f", "v")
	pipe.Set(ctx, redisproc.CounterKey("bad"), "abc", 0)
	pipe.ZAdd(ctx, redisproc.SlotPrefix+"}", redis.Z{Score: live, Member: "a"})
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatalf("write workload: %v", err)
	}
}

// changeWorkload is the second round: releases, new acquires, heartbeats
// (20s = 2 intervals), a set whose only slot expired is deleted, counters
// move.
func changeWorkload(t *testing.T, c redis.Cmdable, base int64) {
	t.Helper()
	ctx := context.Background()
	pipe := c.Pipeline()
	for i := range wlUsers {
		k := redisproc.SlotKey(fmt.Sprintf("u%03d", i))
		switch i % 6 {
		case 0:
			pipe.ZAddArgs(ctx, k, redis.ZAddArgs{XX: true, GT: true, Members: []redis.Z{{Score: float64(base + 75_000), Member: "a"}}})
		case 1:
			pipe.ZRem(ctx, k, "a")
		case 3:
			pipe.ZAdd(ctx, k, redis.Z{Score: float64(base + 58_000), Member: "n"})
		case 5:
			pipe.Del(ctx, k)
		}
	}
	for i := 0; i < wlCounters; i += 4 {
		pipe.Decr(ctx, redisproc.CounterKey(fmt.Sprintf("c%03d", i)))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatalf("change workload: %v", err)
	}
}

// excludedFromEquality are the exporter's own timings: they differ between
// any two runs.
var excludedFromEquality = map[string]bool{
	"slot_exporter_sweep_duration_seconds":       true,
	"slot_exporter_last_sweep_timestamp_seconds": true,
	"slot_exporter_clock_skew_seconds":           true,
	"slot_exporter_sampling_period_seconds":      true,
	// Keys read: each reads only what changed on its own server or
	// nodes (client tracking), and what that is differs.
	"slot_exporter_keys_scanned_total": true,
}

func metricName(series string) string {
	if i := strings.IndexByte(series, '{'); i >= 0 {
		return series[:i]
	}
	return series
}

// expectSameDomain compares every slot_* series of two exporters. Floor
// ages are seconds since a sweep, so they may differ by the time between
// the two setups' sweeps.
func expectSameDomain(t *testing.T, what string, want, got map[string]float64) {
	t.Helper()
	keys := map[string]bool{}
	for k := range want {
		keys[k] = true
	}
	for k := range got {
		keys[k] = true
	}
	var sorted []string
	for k := range keys {
		if strings.HasPrefix(k, "slot_") && !excludedFromEquality[metricName(k)] {
			sorted = append(sorted, k)
		}
	}
	sort.Strings(sorted)
	bad := 0
	for _, k := range sorted {
		w, wok := want[k]
		g, gok := got[k]
		switch {
		case !wok || !gok:
			t.Errorf("%s: %s present on one side only (single node %v/%v, cluster %v/%v)", what, k, w, wok, g, gok)
			bad++
		case metricName(k) == "slot_user_floor_seconds":
			if math.Abs(w-g) > 2 {
				t.Errorf("%s: %s = %v, single node has %v", what, k, g, w)
				bad++
			}
		case w != g:
			t.Errorf("%s: %s = %v, single node has %v", what, k, g, w)
			bad++
		}
		if bad > 20 {
			t.Fatalf("%s: too many differences", what)
		}
	}
	if len(sorted) < 100 {
		t.Fatalf("%s: only %d series compared", what, len(sorted))
	}
}

// TestClusterSameTotalsAsSingleNode runs the same workload on a 3-master
// cluster and on a single server: after each of two sweeps, every domain
// metric is the same, so sweeping masters in parallel and merging neither
// loses nor double-counts anything.
func TestClusterSameTotalsAsSingleNode(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	cl := redistest.StartCluster(t, 3, 0)
	single := newConfiguredHarness(t, clusterConfig(standaloneSection(srv.Addr), wlTTL, wlHB), nil)
	cluster := newConfiguredHarness(t, clusterConfig(clusterSection(cl, "primary"), wlTTL, wlHB), nil)

	sc, cc := srv.Client(), cl.Client()
	base := redisTimeMs(t, sc)
	writeWorkload(t, sc, base)
	writeWorkload(t, cc, base)
	// The merge only means something if every master holds part of it.
	for _, m := range cl.Masters() {
		n, err := cl.NodeClient(m).DBSize(context.Background()).Result()
		if err != nil || n < 50 {
			t.Fatalf("master %s holds %d keys (%v): the workload is not spread", m.Addr, n, err)
		}
	}

	single.Sweep()
	cluster.Sweep()
	ms, mc := single.Metrics(), cluster.Metrics()
	// Known truth, so that equality is not that of two empty pages.
	exportertest.Expect(t, mc, map[string]float64{
		`slot_sets{family="streams"}`:                                            wlUsers,
		`slot_members{family="streams",state="live"}`:                            wlUsers / 6 * 8,
		`slot_members{family="streams",state="stale"}`:                           wlUsers / 6,
		`slot_members{family="streams",state="expired"}`:                         wlUsers / 6 * 2,
		`slot_members{family="streams",state="future"}`:                          wlUsers / 6,
		`slot_users_over_limit{family="streams"}`:                                wlUsers / 6,
		`slot_sets_without_ttl{family="streams"}`:                                wlUsers / 10,
		`slot_counters_negative{family="legacy"}`:                                wlCounters / 6,
		`slot_exporter_keys_skipped_total{family="streams",reason="wrong_type"}`: 1,
		`slot_exporter_keys_skipped_total{family="streams",reason="bad_user"}`:   1,
		`slot_exporter_keys_skipped_total{family="legacy",reason="wrong_type"}`:  1,
		`slot_exporter_keys_skipped_total{family="legacy",reason="bad_value"}`:   1,
		`slot_exporter_keys_scanned_total{family="streams"}`:                     wlUsers + 2,
		`slot_acquires_total{family="streams"}`:                                  wlUsers / 6 * 12,
	})
	if mc[`slot_sets_expiring_early{family="streams"}`] == 0 {
		t.Errorf("no set expiring early: the workload misses a case")
	}
	expectSameDomain(t, "first sweep", ms, mc)

	changeWorkload(t, sc, base)
	changeWorkload(t, cc, base)
	single.Sweep()
	cluster.Sweep()
	ms, mc = single.Metrics(), cluster.Metrics()
	exportertest.Expect(t, mc, map[string]float64{
		`slot_heartbeats_total{family="streams"}`:                     wlUsers / 6 * 2,
		`slot_holds_ended_total{family="streams",outcome="released"}`: wlUsers / 6,
		`slot_holds_ended_total{family="streams",outcome="expired"}`:  wlUsers / 6,
		`slot_holds_ended_total{family="streams",outcome="lost"}`:     0,
		`slot_acquires_total{family="streams"}`:                       wlUsers / 6 * 13,
	})
	expectSameDomain(t, "second sweep", ms, mc)
}

func resetStats(t *testing.T, cl *redistest.Cluster) {
	t.Helper()
	for _, s := range cl.Nodes {
		if err := cl.NodeClient(s).ConfigResetStat(context.Background()).Err(); err != nil {
			t.Fatalf("CONFIG RESETSTAT on %s: %v", s.Addr, err)
		}
	}
}

// expectReadsOn checks that the slot sets were read on exactly the nodes
// in on: PTTL calls (one a key read) there, none elsewhere.
func expectReadsOn(t *testing.T, cl *redistest.Cluster, on []*redistest.Server) {
	t.Helper()
	want := map[string]bool{}
	for _, s := range on {
		want[s.Addr] = true
	}
	for _, s := range cl.Nodes {
		n := exportertest.Calls(t, cl.NodeClient(s), "pttl")
		switch {
		case want[s.Addr] && n == 0:
			t.Errorf("%s: no PTTL, but the sweep should have read it", s.Addr)
		case !want[s.Addr] && n != 0:
			t.Errorf("%s: %d PTTL calls, but the sweep should not have read it", s.Addr, n)
		}
	}
}

// TestClusterReadFromReplica: with read_from: replica every shard is read
// on its replica, masters see no reads, and the totals are those read on
// the masters.
func TestClusterReadFromReplica(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3, 1)
	fromReplica := newConfiguredHarness(t, clusterConfig(clusterSection(cl, "replica"), wlTTL, wlHB), nil)
	fromMaster := newConfiguredHarness(t, clusterConfig(clusterSection(cl, "primary"), wlTTL, wlHB), nil)
	cc := cl.Client()
	writeWorkload(t, cc, redisTimeMs(t, cc))
	cl.WaitReplicated()

	resetStats(t, cl)
	fromReplica.Sweep()
	expectReadsOn(t, cl, cl.Replicas())

	resetStats(t, cl)
	fromMaster.Sweep()
	expectReadsOn(t, cl, cl.Masters())

	mr := fromReplica.Metrics()
	if mr[`slot_sets{family="streams"}`] != wlUsers {
		t.Errorf("replicas show %v sets, want %d", mr[`slot_sets{family="streams"}`], wlUsers)
	}
	expectSameDomain(t, "replica vs master", fromMaster.Metrics(), mr)

	// A replica that died is read around at once, on its master: the
	// cluster calls it online for its node timeout (5 s here), and every
	// sweep that read it failed meanwhile.
	dead := cl.Replicas()[0]
	master := cl.MasterOf(dead)
	dead.Kill()
	before := exportertest.Calls(t, cl.NodeClient(master), "pttl")
	fromReplica.Sweep()
	if n := exportertest.Calls(t, cl.NodeClient(master), "pttl"); n == before {
		t.Errorf("the master of the dead replica %s was not read", dead.Addr)
	}
	fromMaster.Sweep()
	expectSameDomain(t, "replica dead vs master", fromMaster.Metrics(), fromReplica.Metrics())
}

// TestClusterReplicaRestartedEmpty: reading replicas, a shard's replica
// restarts without its data (no persistence, its files gone with its pod)
// and waits for its sync: its master holds the fork back
// (repl-diskless-sync-delay), as a busy one would. Restarted while a
// sweep reads, after the sweep's check of the nodes, it was read empty
// and every hold of its shard ended as lost: the sweep fails instead, and
// the figures stay. Restarted before a sweep lists the nodes, it is read
// around, on its master, as ROLE says it is not connected. Once it has
// synced it is read again, and nothing was lost.
func TestClusterReplicaRestartedEmpty(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3, 1)
	ctx := context.Background()
	// Heartbeats 4 minutes apart: no hold goes stale however long a busy
	// machine takes.
	h := newConfiguredHarness(t, clusterConfig(clusterSection(cl, "replica"), longTTL, 4*time.Minute), nil)
	cc := cl.Client()
	var users []string
	for i := range 600 {
		users = append(users, fmt.Sprintf("u%04d", i))
	}
	sets, members := len(users), 2*len(users)
	writeLive(t, cc, users, redisTimeMs(t, cc))
	cl.WaitReplicated()
	h.Sweep()
	exact(t, "before", h.Metrics(), sets, members)

	replica := cl.Replicas()[0]
	master := cl.NodeClient(cl.MasterOf(replica))
	exportertest.Must(t, master.ConfigSet(ctx, "repl-diskless-sync-delay", "3600").Err())
	var once sync.Once
	h.Sweeper.AfterLostCheck(func() { once.Do(replica.RestartEmpty) })
	err := h.Sweeper.SweepOnce(ctx)
	if !errors.Is(err, topology.ErrUnsynced) || !strings.Contains(err.Error(), replica.Addr) {
		t.Fatalf("a sweep that read the replica restarted empty: %v; want %v naming %s; %v", err, topology.ErrUnsynced, replica.Addr,
			exportertest.Series(h.Metrics(), "slot_holds_ended_total"))
	}
	h.Sweeper.AfterLostCheck(nil)
	exact(t, "the sweep that failed", h.Metrics(), sets, members)

	before := exportertest.Calls(t, master, "pttl")
	h.Sweep()
	exact(t, "the replica unsynced", h.Metrics(), sets, members)
	if exportertest.Calls(t, master, "pttl") == before {
		t.Errorf("the master of the unsynced replica %s was not read", replica.Addr)
	}

	exportertest.Must(t, master.ConfigSet(ctx, "repl-diskless-sync-delay", "0").Err())
	// Synced, the replica is listed again (CLUSTER SLOTS leaves a replica
	// out until the gossip carries its replication offset), and read.
	rc := cl.NodeClient(replica)
	sweeps := 0
	exportertest.WaitFor(t, 2*time.Minute, "a sweep that reads the synced replica", func() bool {
		h.Sweep()
		sweeps++
		exact(t, fmt.Sprintf("the replica syncing or synced, sweep %d", sweeps), h.Metrics(), sets, members)
		return exportertest.Calls(t, rc, "pttl") > 0
	})
	t.Logf("the synced replica was read by the sweep %d after its sync began", sweeps)
}

// tagSlot is the hash slot of a key whose hash tag is tag.
func tagSlot(tag string) int { return topology.HashSlot("{" + tag + "}") }

// usersInSlot returns n user ids whose stream keys hash to slot.
func usersInSlot(slot, n int) []string {
	var out []string
	for i := 0; len(out) < n; i++ {
		u := "s" + strconv.Itoa(i)
		if tagSlot(u) == slot {
			out = append(out, u)
		}
	}
	return out
}

// writeLive gives each user two live slots that stay live for minutes.
func writeLive(t *testing.T, c redis.Cmdable, users []string, base int64) {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < len(users); i += 500 {
		pipe := c.Pipeline()
		for _, u := range users[i:min(i+500, len(users))] {
			k := redisproc.SlotKey(u)
			pipe.ZAdd(ctx, k, redis.Z{Score: float64(base + 9*60_000), Member: "a"}, redis.Z{Score: float64(base + 9*60_000), Member: "b"})
			pipe.PExpire(ctx, k, 20*time.Minute)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatalf("write: %v", err)
		}
	}
}

// steady is what a sweep of an unchanging keyspace of sets keys and
// members members must show while nodes trade keys: never more than the
// truth, nothing ended, no member acquired twice.
func steady(t *testing.T, what string, m map[string]float64, sets, members int) {
	t.Helper()
	if v := m[`slot_sets{family="streams"}`]; v > float64(sets) {
		t.Errorf("%s: slot_sets %v exceeds the %d keys: double-counted", what, v, sets)
	}
	if v := m[`slot_members{family="streams",state="live"}`]; v > float64(members) {
		t.Errorf("%s: %v live members, only %d exist: double-counted", what, v, members)
	}
	if v := m[`slot_acquires_total{family="streams"}`]; v > float64(members) {
		t.Errorf("%s: %v acquires for %d members", what, v, members)
	}
	for _, o := range []string{"released", "expired", "lost"} {
		if v := m[`slot_holds_ended_total{family="streams",outcome="`+o+`"}`]; v != 0 {
			t.Errorf("%s: %v holds ended as %s; nothing was released", what, v, o)
		}
	}
}

// sweepBoth sweeps the exporter reading masters and the one reading
// replicas, and checks that each counts every key and member.
func sweepBoth(t *testing.T, what string, primary, replica *exportertest.Harness, sets, members int) {
	t.Helper()
	primary.Sweep()
	replica.Sweep()
	exact(t, what, primary.Metrics(), sets, members)
	exact(t, what+" (replica)", replica.Metrics(), sets, members)
}

// exact is steady plus every key and member counted.
func exact(t *testing.T, what string, m map[string]float64, sets, members int) {
	t.Helper()
	steady(t, what, m, sets, members)
	exportertest.Expect(t, m, map[string]float64{
		`slot_sets{family="streams"}`:                 float64(sets),
		`slot_members{family="streams",state="live"}`: float64(members),
		`slot_acquires_total{family="streams"}`:       float64(members),
		`slot_users_active{family="streams"}`:         float64(sets),
	})
}

const longTTL, longHB = 10 * time.Minute, time.Minute

// TestClusterReshardDuringSweeps moves slots between masters while the
// exporter sweeps. First, frozen halfway through a slot's migration: a
// master sweep finds the moved keys through the redirection and reports
// them; a replica sweep, which cannot follow a migration, misses them,
// says so, and carries their members instead of ending them. Then a
// range of slots holding hundreds of keys is migrated while both sweep
// over and over: no sweep counts a key twice or ends a hold.
func TestClusterReshardDuringSweeps(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3, 1)
	ctx := context.Background()
	pLogs, rLogs := exportertest.NewLogs(), exportertest.NewLogs()
	primary := newConfiguredHarness(t, clusterConfig(clusterSection(cl, "primary"), longTTL, longHB), pLogs)
	replica := newConfiguredHarness(t, clusterConfig(clusterSection(cl, "replica"), longTTL, longHB), rLogs)
	cc := cl.Client()

	const slot = 100
	inSlot := usersInSlot(slot, 40)
	if n, err := cc.ClusterKeySlot(ctx, redisproc.SlotKey(inSlot[0])).Result(); err != nil || n != slot {
		t.Fatalf("CLUSTER KEYSLOT %s = %d (%v), want %d", redisproc.SlotKey(inSlot[0]), n, err, slot)
	}
	users := append([]string(nil), inSlot...)
	for i := range 4000 {
		users = append(users, fmt.Sprintf("u%04d", i))
	}
	sets, members := len(users), 2*len(users)
	writeLive(t, cc, users, redisTimeMs(t, cc))
	cl.WaitReplicated()
	sweepBoth(t, "before", primary, replica, sets, members)
	pLogs.Take()
	rLogs.Take()

	masters := cl.Masters()
	from := cl.SlotOwner(slot)
	to := cl.OtherMaster(from)

	// Halfway through migrating one slot.
	if err := cl.BeginMigration(ctx, slot, from, to); err != nil {
		t.Fatal(err)
	}
	if n, err := cl.MoveKeys(ctx, slot, from, to, 7, 20); err != nil || n != 20 {
		t.Fatalf("moved %d keys: %v", n, err)
	}
	cl.WaitReplicated()
	primary.Sweep()
	exact(t, "mid-migration", primary.Metrics(), sets, members)
	rep := movedReports(pLogs.Take())
	// Change tracking is on (the default): the 20 keys moved are named on
	// both nodes and redirected there; the slot's 20 others, which a
	// change-driven sweep did not read on their node (unless the slow
	// reconciliation's share met them), are read again by the settling,
	// being in a migrating slot. Each is read once, and none missed.
	if len(rep) != 1 {
		t.Errorf("mid-migration sweep should report keys redirected and read again once, logged %+v", rep)
	} else if keys, _ := strconv.Atoi(rep[0].Attrs["keys"]); keys < 20 || keys > 40 ||
		rep[0].Attrs["reread"] != rep[0].Attrs["keys"] || rep[0].Attrs["missed"] != "0" {
		t.Errorf("mid-migration sweep should read again the 20 keys redirected and at most the slot's 20 others, each once, none missed; logged %+v", rep)
	}
	// The replicas know nothing of the migration: the source's replica
	// no longer has the 20 keys moved, and the target's is not asked for
	// them (the slot is still the source's). Their masters are asked.
	// First the target refuses to be read: the 20 are carried.
	deny := func(rules ...any) {
		t.Helper()
		if err := cl.NodeClient(to).Do(ctx, append([]any{"ACL", "SETUSER", "default"}, rules...)...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	deny("-@read")
	replica.Sweep()
	deny("+@all")
	mr := replica.Metrics()
	steady(t, "mid-migration (replica), the target unreadable", mr, sets, members)
	exportertest.Expect(t, mr, map[string]float64{
		`slot_sets{family="streams"}`: float64(sets - 20),
		// Users of missed keys keep their last used: a floor age must
		// not restart because a slot was being migrated.
		`slot_users_active{family="streams"}`: float64(sets),
	})
	rep = movedReports(rLogs.Take())
	if len(rep) != 1 || rep[0].Level != slog.LevelWarn || rep[0].Attrs["missed"] != "20" ||
		!strings.Contains(rep[0].Attrs["masters_err"], "NOPERM") {
		t.Errorf("mid-migration replica sweep with the target unreadable should warn that 20 keys were missed, and why (the master's NOPERM); logged %+v", rep)
	}
	// Readable again, the masters, ASK followed, have them: none is
	// missed.
	replica.Sweep()
	exact(t, "mid-migration (replica)", replica.Metrics(), sets, members)
	rep = movedReports(rLogs.Take())
	if len(rep) != 1 || rep[0].Attrs["missed"] != "0" {
		t.Errorf("mid-migration replica sweep should read the keys moved from their masters, none missed; logged %+v", rep)
	}
	if _, err := cl.MoveKeys(ctx, slot, from, to, 100, 0); err != nil {
		t.Fatal(err)
	}
	if err := cl.FinishMigration(ctx, slot, from, to); err != nil {
		t.Fatal(err)
	}
	cl.WaitHealthy(2 * time.Minute)
	sweepBoth(t, "after one slot", primary, replica, sets, members)

	// Slots 0-999 (some 250 keys) go from their owners to the next
	// master while both exporters sweep without pause. The migration
	// waits for a sweep of each every 100 slots, so that over a dozen
	// sweeps overlap it whatever the machine's speed.
	const reshardSlots = 1000
	movingKeys := 0
	for _, u := range users {
		if tagSlot(u) < reshardSlots {
			movingKeys++
		}
	}
	began := time.Now()
	var sweepsMu sync.Mutex
	sweepCount := 0
	done := make(chan error, 1)
	go func() {
		defer close(done)
		wait := func(n int) error {
			deadline := time.Now().Add(3 * time.Minute)
			for {
				sweepsMu.Lock()
				c := sweepCount
				sweepsMu.Unlock()
				if c >= n {
					return nil
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("no sweep for 3 minutes")
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
		owner := cl.SlotOwners()
		next := map[*redistest.Server]*redistest.Server{masters[0]: masters[1], masters[1]: masters[2], masters[2]: masters[0]}
		for s := range reshardSlots {
			if s%100 == 0 {
				sweepsMu.Lock()
				target := sweepCount + 1
				sweepsMu.Unlock()
				if err := wait(target); err != nil {
					done <- err
					return
				}
			}
			if err := cl.MigrateSlot(ctx, s, owner[s], next[owner[s]]); err != nil {
				done <- err
				return
			}
		}
	}()
	var sweeps, errs int
	var migErr error
loop:
	for {
		select {
		case migErr = <-done:
			break loop
		default:
		}
		for _, h := range []*exportertest.Harness{primary, replica} {
			if err := h.Sweeper.SweepOnce(ctx); err != nil {
				errs++
				t.Logf("sweep during reshard failed: %v", err)
				continue
			}
			steady(t, fmt.Sprintf("sweep %d during reshard", sweeps), h.Metrics(), sets, members)
		}
		sweeps++
		sweepsMu.Lock()
		sweepCount = sweeps
		sweepsMu.Unlock()
	}
	if migErr != nil {
		t.Fatalf("reshard: %v", migErr)
	}
	recs := append(pLogs.Take(), rLogs.Take()...)
	reported, deferred := len(movedReports(recs)), deferredReports(recs)
	t.Logf("reshard of %d slots holding %d keys took %s: %d sweep pairs overlapped it; %d sweeps re-read keys that changed nodes, %d deferred ending holds, %d failed",
		reshardSlots, movingKeys, time.Since(began).Round(time.Millisecond), sweeps, reported, deferred, errs)
	if errs > 0 {
		t.Errorf("%d sweeps failed during the reshard", errs)
	}
	cl.WaitHealthy(2 * time.Minute)
	cl.WaitReplicated()
	sweepBoth(t, "after reshard", primary, replica, sets, members)
}

// TestClusterFailover promotes a replica with CLUSTER FAILOVER while the
// exporter sweeps, reading from masters and from replicas: sweeps go on,
// totals stay right, nothing counts as ended or lost, and afterwards the
// master sweep reads the promoted node.
func TestClusterFailover(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3, 1)
	ctx := context.Background()
	logs := exportertest.NewLogs()
	primary := newConfiguredHarness(t, clusterConfig(clusterSection(cl, "primary"), longTTL, longHB), logs)
	replica := newConfiguredHarness(t, clusterConfig(clusterSection(cl, "replica"), longTTL, longHB), logs)
	cc := cl.Client()
	var users []string
	for i := range 2000 {
		users = append(users, fmt.Sprintf("u%04d", i))
	}
	sets, members := len(users), 2*len(users)
	writeLive(t, cc, users, redisTimeMs(t, cc))
	cl.WaitReplicated()
	sweepBoth(t, "before", primary, replica, sets, members)

	promoted := cl.Replicas()[0]
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var sweepErrs []error
	sweeps := 0
	var once sync.Once
	halt := func() { once.Do(func() { close(stop); wg.Wait() }) }
	defer halt()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, h := range []*exportertest.Harness{primary, replica} {
				if err := h.Sweeper.SweepOnce(ctx); err != nil {
					mu.Lock()
					sweepErrs = append(sweepErrs, err)
					mu.Unlock()
				}
			}
			mu.Lock()
			sweeps++
			mu.Unlock()
		}
	}()
	pairs := func() int {
		mu.Lock()
		defer mu.Unlock()
		return sweeps
	}
	waitPairs := func(n int) {
		deadline := time.Now().Add(3 * time.Minute)
		for pairs() < n {
			if time.Now().After(deadline) {
				t.Fatalf("fewer than %d sweep pairs in 3 minutes", n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitPairs(1)
	old := cl.Failover(promoted, 2*time.Minute)
	// One more pair that starts after the failover is complete.
	waitPairs(pairs() + 2)
	halt()
	recs := logs.Take()
	deferred := deferredReports(recs)
	t.Logf("failover of %s to %s: %d sweep pairs ran meanwhile; %d sweeps re-read keys that changed nodes, %d deferred ending holds, %d failed",
		old.Addr, promoted.Addr, sweeps, len(movedReports(recs)), deferred, len(sweepErrs))
	for _, err := range sweepErrs {
		t.Errorf("sweep during failover failed: %v", err)
	}
	// The counters can only have grown; the gauges of the last sweeps
	// must be the whole truth.
	for i := range 3 {
		sweepBoth(t, fmt.Sprintf("after failover, sweep %d", i), primary, replica, sets, members)
	}
	resetStats(t, cl)
	primary.Sweep()
	expectReadsOn(t, cl, cl.Masters())
	if exportertest.Calls(t, cl.NodeClient(promoted), "pttl") == 0 {
		t.Errorf("the promoted master %s was not read", promoted.Addr)
	}
	resetStats(t, cl)
	replica.Sweep()
	expectReadsOn(t, cl, cl.Replicas())
}
