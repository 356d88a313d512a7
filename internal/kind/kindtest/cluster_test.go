package kindtest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/redisproc"
	"github.com/slotexporter/slot_exporter/internal/redistest"
)

const clusterFamilies = `
  - name: api_rate
    kind: ratelimit
    match: "c:rl:*"
    limit: 5
    window: 1m
  - name: jobs_lock
    kind: lock
    match: "c:lock:*"
    ttl: 30s
    max_hold: 10m
  - name: queue
    kind: list
    match: "c:q:*"
    max_wait: 5m
  - name: events
    kind: stream
    match: "c:s:*"
    max_hold: 5m
  - name: rq
    kind: rq
`

// TestClusterEveryKind: in a cluster of three masters every kind reads
// its keys on every master, and the totals are those of the whole
// keyspace.
func TestClusterEveryKind(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3, 0)
	cc := cl.Client()
	ctx := context.Background()
	var yaml strings.Builder
	yaml.WriteString("redis:\n  mode: cluster\n  addrs:\n")
	for _, a := range cl.Addrs() {
		fmt.Fprintf(&yaml, "    - %q\n", a)
	}
	yaml.WriteString("sampling:\n  interval: 5s\nfamilies:\n" + clusterFamilies)
	h := exportertest.New(t, cc, yaml.String())

	const users = 60
	for i := range users {
		u := fmt.Sprintf("u%d", i)
		var ttl time.Duration
		if i%3 != 0 { // a third have no TTL
			ttl = 30 * time.Second
		}
		exportertest.Must(t, cc.Set(ctx, "c:rl:"+u, 7, ttl).Err())
		exportertest.Must(t, cc.Set(ctx, "c:lock:"+u, "tok-"+u, ttl).Err())
		exportertest.Must(t, cc.RPush(ctx, "c:q:"+u, "a", "b").Err())
		exportertest.Must(t, cc.XGroupCreateMkStream(ctx, "c:s:"+u, "g", "$").Err())
		exportertest.Must(t, cc.XAdd(ctx, &redis.XAddArgs{Stream: "c:s:" + u, Values: []string{"f", "v"}}).Err())
		exportertest.Must(t, cc.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: "c", Streams: []string{"c:s:" + u, ">"}, Count: 1, Block: -1}).Err())
	}
	// RQ's queues are named in one key, which lives on one master.
	exportertest.Must(t, cc.SAdd(ctx, "rq:queues", "rq:queue:default").Err())
	exportertest.Must(t, cc.RPush(ctx, "rq:queue:default", "j1", "j2").Err())
	for _, m := range cl.Masters() {
		exportertest.Must(t, cl.NodeClient(m).ConfigResetStat(ctx).Err())
	}
	h.Sweep()
	exportertest.Expect(t, h.Metrics(), map[string]float64{
		`slot_sets{family="api_rate"}`:                                            users,
		`slot_ratelimit_keys_without_ttl{family="api_rate"}`:                      users / 3,
		`slot_ratelimit_callers_locked_out{family="api_rate"}`:                    users / 3,
		`slot_users_at_limit{family="api_rate"}`:                                  users,
		`slot_sets{family="jobs_lock"}`:                                           users,
		`slot_members{family="jobs_lock",state="live"}`:                           users,
		`slot_sets_without_ttl{family="jobs_lock"}`:                               users / 3,
		`slot_acquires_total{family="jobs_lock"}`:                                 users,
		`slot_queue_items{family="queue"}`:                                        2 * users,
		`slot_sets{family="queue"}`:                                               users,
		`slot_stream_entries{family="events"}`:                                    users,
		`slot_stream_pending{family="events"}`:                                    users,
		`slot_stream_lag{family="events"}`:                                        0,
		`slot_users_active{family="events"}`:                                      users,
		`slot_exporter_keys_scanned_total{family="events"}`:                       users,
		`slot_exporter_keys_scanned_total{family="queue"}`:                        users,
		`slot_exporter_keys_scanned_total{family="jobs_lock"}`:                    users,
		`slot_exporter_keys_scanned_total{family="api_rate"}`:                     users,
		`slot_exporter_sweep_errors_total{family="events"}`:                       0,
		`slot_exporter_sweep_errors_total{family="jobs_lock"}`:                    0,
		`slot_exporter_keys_skipped_total{family="api_rate",reason="wrong_type"}`: 0,
		`slot_exporter_keys_scanned_total{family="rq"}`:                           1,
		`slot_exporter_sweep_errors_total{family="rq"}`:                           0,
		`slot_jobs{family="rq",state="waiting"}`:                                  2,
	})
	// Each kind's own reads reached every master.
	for _, m := range cl.Masters() {
		st, err := redisproc.CommandStats(ctx, cl.NodeClient(m))
		exportertest.Must(t, err)
		for _, cmd := range []string{"getrange", "pttl", "llen", "lindex", "xlen", "xinfo|groups", "xpending", "xinfo|consumers"} {
			if st[cmd].Calls == 0 {
				t.Errorf("master %s: no %s: the sweep did not read its keys there", m.Addr, cmd)
			}
		}
	}
}
