package topology_test

import (
	"context"
	"fmt"
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

// TestUnsyncedReplica: a replica restarted without its data is Unsynced
// until its first sync is over, whether its master is stopped or sending
// it the data (master_sync_in_progress:1); a replica that had synced is
// not, while its master sends it a full resync nor once its master is
// gone. Each state is held by stopping the master (SIGSTOP) where it is,
// so that none ends while it is looked at.
func TestUnsyncedReplica(t *testing.T) {
	ctx := context.Background()
	master := redistest.Start(t)
	mc := master.Client()
	replica := redistest.StartReplica(t, master)
	rc := replica.Client()
	for i := range 60 {
		exportertest.Must(t, mc.Set(ctx, fmt.Sprintf("k%d", i), i, 0).Err())
	}
	redistest.WaitReplicated(t, master, 1)
	expectUnsynced(t, rc, false, "a synced replica")

	// A full sync takes about 60 keys x 50 ms from here on: long enough
	// to be caught, short enough to wait for.
	exportertest.Must(t, mc.ConfigSet(ctx, "rdb-key-save-delay", "50000").Err())

	// Its link cut while it is stopped, and more written than the
	// master's backlog keeps: it can only resync in full, and keeps its
	// data meanwhile.
	exportertest.Must(t, mc.ConfigSet(ctx, "repl-backlog-size", "16384").Err())
	signal(t, replica, syscall.SIGSTOP)
	exportertest.Must(t, mc.ClientKillByFilter(ctx, "TYPE", "replica").Err())
	exportertest.Must(t, mc.Set(ctx, "filler", strings.Repeat("x", 64<<10), 0).Err())
	signal(t, replica, syscall.SIGCONT)
	holdInTransfer(t, master, rc)
	expectUnsynced(t, rc, false, "a synced replica in a full resync")
	signal(t, master, syscall.SIGCONT)
	waitSynced(t, rc)

	// Restarted without its data while its master is stopped: the sync
	// cannot begin.
	signal(t, master, syscall.SIGSTOP)
	replica.RestartEmpty()
	expectUnsynced(t, rc, true, "a replica restarted empty, its master stopped")

	// The master back, sending the data.
	signal(t, master, syscall.SIGCONT)
	holdInTransfer(t, master, rc)
	expectUnsynced(t, rc, true, "a replica restarted empty, in its first sync")
	signal(t, master, syscall.SIGCONT)
	waitSynced(t, rc)
	id := expectUnsynced(t, rc, false, "a replica restarted empty, synced")
	if n, err := rc.DBSize(ctx).Result(); err != nil || n != 61 {
		t.Errorf("the synced replica holds %d keys (%v), want 61", n, err)
	}

	// Its master gone after the sync: the replica holds the data.
	master.Kill()
	exportertest.WaitFor(t, time.Minute, "the replica's link to be down", func() bool {
		return replField(rc, "master_link_status") == "down"
	})
	if after := expectUnsynced(t, rc, false, "a replica whose master died"); after.ReplID != id.ReplID {
		t.Errorf("master_replid %s once the master died, %s before", after.ReplID, id.ReplID)
	}
}

// expectUnsynced identifies the server behind c and checks its Unsynced.
func expectUnsynced(t *testing.T, c redis.Cmdable, want bool, what string) topology.Identity {
	t.Helper()
	id, err := topology.Identify(context.Background(), c)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if !id.Replica || id.Unsynced != want {
		info, _ := c.Info(context.Background(), "replication").Result()
		t.Errorf("%s: Replica %v, Unsynced %v; want a replica, Unsynced %v\n%s", what, id.Replica, id.Unsynced, want, info)
	}
	return id
}

// holdInTransfer waits until the replica behind rc receives its master's
// data, and stops the master there.
func holdInTransfer(t *testing.T, master *redistest.Server, rc *redis.Client) {
	t.Helper()
	exportertest.WaitFor(t, time.Minute, "the replica's sync to begin", func() bool {
		return replField(rc, "master_sync_in_progress") == "1"
	})
	signal(t, master, syscall.SIGSTOP)
	if v := replField(rc, "master_sync_in_progress"); v != "1" {
		t.Fatalf("the sync ended before the master could be stopped (master_sync_in_progress:%s): make it slower", v)
	}
}

func waitSynced(t *testing.T, rc *redis.Client) {
	t.Helper()
	exportertest.WaitFor(t, time.Minute, "the replica's sync", func() bool {
		return replField(rc, "master_link_status") == "up" && replField(rc, "master_sync_in_progress") == "0"
	})
}

func replField(c *redis.Client, name string) string {
	info, err := c.Info(context.Background(), "replication").Result()
	if err != nil {
		return ""
	}
	return redisinfo.Field(info, name)
}

// signal stops (SIGSTOP) or resumes (SIGCONT) a server.
func signal(t *testing.T, s *redistest.Server, sig syscall.Signal) {
	t.Helper()
	exportertest.Must(t, syscall.Kill(s.PID(), sig))
}

func TestSameDataAcrossRoles(t *testing.T) {
	replica := topology.Identity{RunID: "r", Replica: true, ReplID: "x"}
	master := topology.Identity{RunID: "m", ReplID: "x"}
	promoted := topology.Identity{RunID: "r", ReplID: "y", ReplID2: "x"}
	for _, c := range []struct {
		name     string
		prev, id topology.Identity
		want     bool
	}{
		{"replica, then its master", replica, master, true},
		{"master, then its replica", master, replica, true},
		{"replica, then itself promoted", replica, promoted, true},
		{"replica, then another promoted", replica, topology.Identity{RunID: "o", ReplID: "y", ReplID2: "x"}, false},
		{"replica, then itself master of other data", replica, topology.Identity{RunID: "r", ReplID: "y", ReplID2: "z"}, false},
		{"replica, then a replica of another history", replica, topology.Identity{RunID: "o", Replica: true, ReplID: "y"}, false},
	} {
		if got := topology.SameData(c.prev, c.id); got != c.want {
			t.Errorf("%s: SameData %v, want %v", c.name, got, c.want)
		}
	}
}
