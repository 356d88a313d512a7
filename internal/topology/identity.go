package topology

import (
	"context"
	"errors"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/commandstats"
	"github.com/slotexporter/slot_exporter/internal/redisinfo"
)

// Identity is what a server says of itself: its run_id, which changes
// when it restarts (and differs on the server a failover promotes), and
// how often its data was flushed or swapped away (FLUSHALL, FLUSHDB and
// SWAPDB calls since it started). Together they tell vanished data from
// holds that ended.
type Identity struct {
	RunID string
	// Port is tcp_port: with RunID it names a server that its client's
	// address does not (a Sentinel's replica client).
	Port string
	// FlushAlls empty every database; DBFlushes (FLUSHDB) one and Swaps
	// (SWAPDB) two of them, which Redis does not say: maybe not the
	// family's.
	FlushAlls, DBFlushes, Swaps int64
	// Commands is total_commands_processed. CONFIG RESETSTAT zeroes it
	// with the flush counts; it never goes down otherwise, so a drop
	// says that the counts restarted from 0.
	Commands int64
	// Evictions is evicted_keys: keys maxmemory made Redis delete.
	Evictions int64
	// Replica: the server is a replica (role:slave); ReplID is its
	// master_replid, the history of its data, which a replica shares
	// with its master ("" when INFO replication cannot be read).
	Replica bool
	ReplID  string
	// ReplID2 is master_replid2: on a promoted replica, the history it
	// had as a replica, which its data continues.
	ReplID2 string
	// Unsynced: the server is a replica that holds none of its master's
	// data yet (unsynced). What it lacks is not gone: it must not be read.
	Unsynced bool
}

// ErrUnsynced is a server whose Identity is Unsynced.
var ErrUnsynced = errors.New("replica has not synced with its master since it started, and holds none of its data yet")

// Identify reads a server's identity in one round trip (INFO server,
// INFO commandstats, INFO stats and INFO replication).
func Identify(ctx context.Context, c redis.Cmdable) (Identity, error) {
	pipe := c.Pipeline()
	server := pipe.Info(ctx, "server")
	cmdStats := pipe.Info(ctx, "commandstats")
	stats := pipe.Info(ctx, "stats")
	repl := pipe.Info(ctx, "replication")
	_, _ = pipe.Exec(ctx)
	s, err := server.Result()
	if err != nil {
		return Identity{}, err
	}
	id := Identity{RunID: redisinfo.Field(s, "run_id"), Port: redisinfo.Field(s, "tcp_port")}
	if cs, err := cmdStats.Result(); err == nil {
		st := commandstats.Parse(cs)
		id.FlushAlls = st["flushall"].Calls
		id.DBFlushes = st["flushdb"].Calls
		id.Swaps = st["swapdb"].Calls
	}
	if st, err := stats.Result(); err == nil {
		id.Commands, _ = strconv.ParseInt(redisinfo.Field(st, "total_commands_processed"), 10, 64)
		id.Evictions, _ = strconv.ParseInt(redisinfo.Field(st, "evicted_keys"), 10, 64)
	}
	if r, err := repl.Result(); err == nil {
		id.Replica, id.ReplID = redisinfo.Field(r, "role") == "slave", redisinfo.Field(r, "master_replid")
		id.ReplID2 = redisinfo.Field(r, "master_replid2")
		id.Unsynced = unsynced(r, s)
	}
	return id, nil
}

// unsynced reports whether a server, by its INFO replication (repl) and
// INFO server, is a replica that has not synced with its master since it
// started and loaded nothing replicated from disk: one restarted without
// persistence (or without its files) whose first sync has not finished,
// its master stopped, refusing it or still sending. Read, every key looks
// gone, and every hold that ends counts as lost. Redis 7.0 shows it as
//
//	master_link_status:down
//	master_link_down_since_seconds:-1  (the link has not been up)
//	master_repl_offset:0               (no data to resync from)
//
// whether its master is stopped, refuses its PSYNC or is sending its
// data (master_sync_in_progress:1). That flag alone says nothing: a
// replica that had synced keeps its data through a full resync, with 1
// while it lasts, and a fresh one waiting for its master's fork shows 0.
// Nor does master_replid, new at every start without a file. A replica
// whose master died after the sync shows the link down since then and
// its offset: it holds the data. So does one that loaded the RDB file its
// last sync left (the file's offset), and it is read. One that loaded an
// AOF shows offset 0, as Redis keeps none there, and waits for its sync
// like an empty one. Before 7.0 a link never up is down since the epoch:
// longer than the server has been up.
func unsynced(repl, server string) bool {
	if redisinfo.Field(repl, "role") != "slave" || redisinfo.Field(repl, "master_link_status") == "up" ||
		redisinfo.Field(repl, "master_repl_offset") != "0" {
		return false
	}
	down, err := strconv.ParseInt(redisinfo.Field(repl, "master_link_down_since_seconds"), 10, 64)
	if err != nil {
		return false
	}
	up, err := strconv.ParseInt(redisinfo.Field(server, "uptime_in_seconds"), 10, 64)
	return down < 0 || err == nil && down > up
}

// SameData reports whether a server seen as prev and then as id holds the
// same data, as far as a restart or a swap of servers can change it: the
// same run_id; or for two replicas, the same master_replid. A replica that
// restarted and synced again, or another replica of the same master (a
// Sentinel's replica client picks one for each connection), has a new
// run_id and its master's data: read as a restart, every hold that ended
// in the next sweep counted as lost, on every shard. An Unsynced replica
// holds no data to compare: it is not to be read at all.
//
// Through Sentinel a sweep reads the master when no replica is usable,
// and a replica again once one is: a master and its replicas share a
// master_replid. A replica read before and promoted since keeps its data
// and its run_id, and its old master_replid becomes master_replid2: a
// replica that resynced from another master before its promotion keeps
// its run_id too, but not that history.
func SameData(prev, id Identity) bool {
	switch {
	case prev.Replica && id.Replica && prev.ReplID != "":
		return prev.ReplID == id.ReplID
	case prev.Replica != id.Replica && prev.ReplID != "" && prev.ReplID == id.ReplID:
		return true
	case prev.Replica && !id.Replica && prev.ReplID != "":
		return prev.RunID == id.RunID && id.ReplID2 == prev.ReplID
	}
	return prev.RunID == id.RunID
}

// Flushes is how often the server's data was flushed or swapped away.
func (id Identity) Flushes() int64 { return id.FlushAlls + id.DBFlushes + id.Swaps }
