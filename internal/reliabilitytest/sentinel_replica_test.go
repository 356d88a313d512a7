package reliabilitytest

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/redisproc"
	"github.com/slotexporter/slot_exporter/internal/redistest"
)

// sweepCommands are the commands a sweep of the streams family sends to
// the server it reads, and that nothing else sends to a replica (Sentinel
// sends INFO, PING and PUBLISH; the master replicates writes).
var sweepCommands = []string{"scan", "zscan", "zrange", "pttl", "time"}

// sweepCalls is how many sweep commands the server behind c has run.
func sweepCalls(t *testing.T, c redis.Cmdable) int64 {
	t.Helper()
	st, err := redisproc.CommandStats(context.Background(), c)
	if err != nil {
		t.Fatalf("INFO commandstats: %v", err)
	}
	var n int64
	for _, cmd := range sweepCommands {
		n += st[cmd].Calls
	}
	return n
}

// sentinelTwoReplicas is a master with 2 replicas behind one Sentinel,
// holding users × 2 live holds, and an exporter reading the replicas
// through it with a SCAN of 10 keys a call: a sweep is dozens of
// SCAN pages, each of which a server hop would cut short or repeat.
func sentinelTwoReplicas(t *testing.T, users int) (master *redistest.Server, replicas [2]*redistest.Server, sent *redistest.Sentinel, e *exporter) {
	t.Helper()
	master = redistest.Start(t)
	admin := master.Client()
	seedHolds(t, admin, "u", users, 2, exportertest.RedisTime(t, admin)+115_000)
	replicas[0] = redistest.StartReplica(t, master)
	replicas[1] = redistest.StartReplica(t, master)
	redistest.WaitReplicated(t, master, 2)
	sent = redistest.StartSentinel(t, "m", master, redistest.SentinelOptions{})
	sent.WaitReplicas(2, 10*time.Second)
	waitReplicaListed(t, sent, replicas[0].Addr)
	waitReplicaListed(t, sent, replicas[1].Addr)
	e = newExporter(t, configYAML("  mode: sentinel\n  master_name: m\n  read_from: replica\n  addrs: [\""+sent.Addr+"\"]\n",
		"  interval: 1s\n  timeout: 5s\n  window: 10s\n  scan_count: 10\n", streamsFamily))
	return master, replicas, sent, e
}

// readers runs one sweep and says how many sweep commands each replica
// and the master ran for it.
func readers(t *testing.T, e *exporter, servers ...*redistest.Server) []int64 {
	t.Helper()
	before := make([]int64, len(servers))
	for i, s := range servers {
		before[i] = sweepCalls(t, s.Client())
	}
	e.sweep()
	out := make([]int64, len(servers))
	for i, s := range servers {
		out[i] = sweepCalls(t, s.Client()) - before[i]
	}
	return out
}

// TestSentinelSweepReadsOneReplica: with two replicas behind Sentinel and
// read_from: replica, every command of a sweep (its SCAN pages, the reads
// of its keys, TIME) goes to one replica. go-redis's replica client dials
// a replica at random for each new connection: a sweep's SCAN cursor
// was carried from one replica to the other, and its identity check read
// another server than its keys.
func TestSentinelSweepReadsOneReplica(t *testing.T) {
	const users = 300
	master, replicas, _, e := sentinelTwoReplicas(t, users)
	for i := range 8 {
		got := readers(t, e, replicas[0], replicas[1], master)
		if got[2] != 0 || (got[0] == 0) == (got[1] == 0) {
			t.Fatalf("sweep %d: sweep commands on replica %s, replica %s, master: %v; want all on one replica",
				i, replicas[0].Addr, replicas[1].Addr, got)
		}
		exportertest.Expect(t, e.metrics(), map[string]float64{liveS: 2 * users, acquiresS: 2 * users, lostS: 0, releasedS: 0, expiredS: 0,
			`slot_sets{family="streams"}`: users})
	}
}

// replicaFlagged waits until the sentinel says of the replica at addr
// what ok accepts (its SENTINEL REPLICAS entry).
func replicaFlagged(t *testing.T, sent *redistest.Sentinel, addr, what string, ok func(map[string]string) bool) {
	t.Helper()
	c := redis.NewSentinelClient(&redis.Options{Addr: sent.Addr, DisableIdentity: true})
	defer c.Close()
	exportertest.WaitFor(t, time.Minute, what, func() bool {
		rs, err := c.Replicas(ctx, sent.Name).Result()
		for _, r := range rs {
			if err == nil && net.JoinHostPort(r["ip"], r["port"]) == addr && ok(r) {
				return true
			}
		}
		return false
	})
}

// TestSentinelSweepSkipsAnUnusableReplica: the replica a sweep read goes
// down, then comes back restarted without its data and waiting for its
// sync. Once Sentinel says so, sweeps read the other replica alone, with
// the same figures and nothing lost; with both replicas unusable, the
// master.
func TestSentinelSweepSkipsAnUnusableReplica(t *testing.T) {
	const users = 100
	master, replicas, sent, e := sentinelTwoReplicas(t, users)
	want := map[string]float64{liveS: 2 * users, acquiresS: 2 * users, lostS: 0, releasedS: 0, expiredS: 0}
	got := readers(t, e, replicas[0], replicas[1], master)
	read, other := replicas[0], replicas[1]
	if got[0] == 0 {
		read, other = other, read
	}
	exportertest.Expect(t, e.metrics(), want)

	read.Kill()
	replicaFlagged(t, sent, read.Addr, "the sentinel to see the replica down", func(r map[string]string) bool {
		return strings.Contains(r["flags"], "s_down")
	})
	for range 3 {
		if got := readers(t, e, other, master); got[0] == 0 || got[1] != 0 {
			t.Fatalf("with replica %s down: sweep commands on %s and the master: %v", read.Addr, other.Addr, got)
		}
		exportertest.Expect(t, e.metrics(), want)
	}

	exportertest.Must(t, master.Client().ConfigSet(ctx, "repl-diskless-sync-delay", "3600").Err())
	read.RestartEmpty()
	replicaFlagged(t, sent, read.Addr, "the sentinel to list the restarted replica, its link down", func(r map[string]string) bool {
		return r["flags"] == "slave" && r["master-link-status"] == "err"
	})
	for range 3 {
		if got := readers(t, e, read, other, master); got[0] != 0 || got[1] == 0 || got[2] != 0 {
			t.Fatalf("with replica %s restarted empty: sweep commands on it, on %s and on the master: %v", read.Addr, other.Addr, got)
		}
		exportertest.Expect(t, e.metrics(), want)
	}

	other.Kill()
	replicaFlagged(t, sent, other.Addr, "the sentinel to see the other replica down", func(r map[string]string) bool {
		return strings.Contains(r["flags"], "s_down")
	})
	if got := readers(t, e, read, master); got[0] != 0 || got[1] == 0 {
		t.Fatalf("with no usable replica: sweep commands on %s and on the master: %v", read.Addr, got)
	}
	exportertest.Expect(t, e.metrics(), want)
	if w := e.records(slog.LevelWarn, "holds lost"); len(w) != 0 {
		t.Errorf("reading another server of the same data: %+v", w)
	}
}

// TestSentinelReplicaReadsAcrossAFailover: the master dies and Sentinel
// promotes a replica; sweeps read through the promoted master's replica
// (or the new master) without a restart, with the same figures.
func TestSentinelReplicaReadsAcrossAFailover(t *testing.T) {
	const users = 50
	master, _, sent, e := sentinelTwoReplicas(t, users)
	want := map[string]float64{liveS: 2 * users, acquiresS: 2 * users, lostS: 0, releasedS: 0, expiredS: 0}
	e.sweep()
	exportertest.Expect(t, e.metrics(), want)
	master.Kill()
	sent.WaitMasterNot(master.Addr, 30*time.Second)
	exportertest.WaitFor(t, 2*time.Minute, "a sweep after the failover", func() bool { return e.trySweep() == nil })
	exportertest.Expect(t, e.metrics(), want)
	e.sweep()
	exportertest.Expect(t, e.metrics(), want)
}
