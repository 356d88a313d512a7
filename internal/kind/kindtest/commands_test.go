package kindtest

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/redisproc"
	"github.com/slotexporter/slot_exporter/internal/redistest"
)

// sweepCommands are what every sweep sends whatever the kind: the clock,
// the loss check (INFO server, commandstats), SCAN, and a new connection's
// handshake; client tracking's connections (sampling.track_changes: CLIENT
// ID, SUBSCRIBE __redis__:invalidate, CLIENT TRACKING, PING); and the
// test's own CONFIG RESETSTAT.
var sweepCommands = []string{"time", "info", "scan", "hello", "client|setinfo", "ping", "config|resetstat",
	"client|id", "client|tracking", "subscribe"}

// TestCommandsPerKind pins which commands each kind sends to read its keys,
// with every read path taken (a stream group with more pending entries
// than one read returns takes the IDLE one): the list the minimal ACL of
// each kind is made of.
func TestCommandsPerKind(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cases := []struct {
		family string
		setup  func(rc *redis.Client)
		want   []string
	}{
		{rateFamily, func(rc *redis.Client) {
			rc.Set(ctx, "t:rl:a", 3, time.Minute)
		}, []string{"getrange", "pttl"}},
		{lockFamily, func(rc *redis.Client) {
			rc.Set(ctx, "t:lock:a", "tok", time.Minute)
		}, []string{"getrange", "pttl", "time"}},
		{`
  - name: queue
    kind: list
    match: "t:q:*"
    max_wait: 1s
`, func(rc *redis.Client) {
			rc.RPush(ctx, "t:q:a", "x")
			// PTTL only with change tracking (the default), for the
			// expiry of the queues it replays; refused, they are read
			// every sweep.
		}, []string{"lindex", "llen", "pttl"}},
		{streamFamily, func(rc *redis.Client) {
			rc.XGroupCreateMkStream(ctx, "t:s:a", "g", "$")
			for i := range 1001 {
				rc.XAdd(ctx, &redis.XAddArgs{Stream: "t:s:a", Values: []string{"n", strconv.Itoa(i)}})
			}
			rc.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: "c", Streams: []string{"t:s:a", ">"}, Count: 1001, Block: -1})
		}, []string{"xinfo|consumers", "xinfo|groups", "xlen", "xpending"}},
	}
	for _, c := range cases {
		srv := redistest.Start(t)
		rc := srv.Client()
		c.setup(rc)
		h := exportertest.New(t, rc, config(srv.Addr, "30m", 100, c.family))
		exportertest.Must(t, rc.ConfigResetStat(ctx).Err())
		h.Sweep()
		if v := h.Metrics()[`slot_exporter_sweep_errors_total{family=`+strconv.Quote(familyName(c.family))+`}`]; v != 0 {
			t.Fatalf("%s: sweep errors %v", familyName(c.family), v)
		}
		st := checkReads(t, rc, familyName(c.family), c.want)
		// The sweep reads TIME once; PTTLs count from it.
		if n := st["time"].Calls; n != 1 {
			t.Errorf("%s: %d TIME calls, want 1", familyName(c.family), n)
		}
	}
}

// checkReads checks that the sweeps since CONFIG RESETSTAT sent, beyond
// every sweep's own commands, exactly want: what a family of the kind
// reads with, the list its minimal ACL (README, "Redis permissions") is
// made of. It returns the command stats.
func checkReads(t *testing.T, rc *redis.Client, family string, want []string) map[string]redisproc.CommandStat {
	t.Helper()
	st, err := redisproc.CommandStats(context.Background(), rc)
	exportertest.Must(t, err)
	var all, own []string
	for cmd := range st {
		all = append(all, cmd)
		if !slices.Contains(sweepCommands, cmd) || slices.Contains(want, cmd) {
			own = append(own, cmd)
		}
	}
	slices.Sort(all)
	slices.Sort(own)
	if !slices.Equal(own, want) {
		t.Errorf("%s reads with %v, want %v", family, own, want)
	}
	t.Logf("%s: the sweeps sent %v", family, all)
	return st
}

func familyName(yaml string) string {
	var name string
	fmt.Sscanf(yaml, "\n  - name: %s", &name)
	return name
}
