package reliabilitytest

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/collector"
	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/snapshot"
	"github.com/slotexporter/slot_exporter/internal/sweep"
	"github.com/slotexporter/slot_exporter/redisconn"
)

// exporter is the exporter as main wires it, minus HTTP: a client from the
// config's redis block, a sweeper, a registry whose collector reads the
// current sweeper, and reloads that hand the old sweeper to the new one
// (and keep the client when the redis block is unchanged), as reload.go
// does. Sweeps are stepped by hand unless start is called.
type exporter struct {
	t      testing.TB
	logs   *exportertest.Logs
	reg    *prometheus.Registry
	cur    atomic.Pointer[sweep.Sweeper]
	cfg    *config.Config
	client redis.UniversalClient
}

func newExporter(t testing.TB, yaml string) *exporter {
	t.Helper()
	e := &exporter{t: t, logs: exportertest.NewLogs(), reg: prometheus.NewRegistry()}
	e.reg.MustRegister(collector.New(func() *snapshot.Snapshot {
		if s := e.cur.Load(); s != nil {
			return s.Snapshot()
		}
		return nil
	}, collector.Options{}))
	t.Cleanup(func() {
		if s := e.cur.Load(); s != nil {
			s.Stop()
		}
		if e.client != nil {
			_ = e.client.Close()
		}
	})
	if err := e.reload(yaml); err != nil {
		t.Fatalf("config: %v\n%s", err, yaml)
	}
	return e
}

// reload swaps in yaml. The new sweeper is not started: call start.
func (e *exporter) reload(yaml string) error {
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		return err
	}
	client := e.client
	if e.cfg == nil || !reflect.DeepEqual(e.cfg.Redis, cfg.Redis) {
		if client, err = redisconn.New(&cfg.Redis); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := sweep.New(ctx, cfg, client, e.logs.Logger(), e.cur.Load())
	if err != nil {
		if client != e.client {
			_ = client.Close()
		}
		return err
	}
	e.cur.Store(s)
	if e.client != nil && e.client != client {
		_ = e.client.Close()
	}
	e.client, e.cfg = client, cfg
	return nil
}

// start runs the current sweeper's loops, as the exporter does.
func (e *exporter) start() { e.cur.Load().Start() }

// trySweep sweeps every family once. The member table tells sweeps apart
// by their Redis TIME in ms, so two sweeps stepped by hand must not fall
// in the same millisecond: the second would read as the first one again.
func (e *exporter) trySweep() error {
	time.Sleep(2 * time.Millisecond)
	return e.cur.Load().SweepOnce(context.Background())
}

func (e *exporter) sweep() {
	e.t.Helper()
	if err := e.trySweep(); err != nil {
		e.t.Fatalf("sweep: %v", err)
	}
}

func (e *exporter) metrics() map[string]float64 {
	e.t.Helper()
	return exportertest.Gather(e.t, e.reg)
}

// records are the records logged since the last call, at level, whose
// message contains msg.
func (e *exporter) records(level slog.Level, msg string) []exportertest.Record {
	var out []exportertest.Record
	for _, r := range e.logs.Take() {
		if r.Level == level && strings.Contains(r.Msg, msg) {
			out = append(out, r)
		}
	}
	return out
}

// streamsFamily is one slot-set family; %s is the family's extra lines.
const streamsFamily = `
  - name: streams
    kind: slotset
    match: "t:streams:*"
    user: '^t:streams:\{([^}]+)\}$'
    limit: 5
    ttl: 120s
    heartbeat_interval: 20s
    max_hold: 15m
`

// config is a whole config: a redis block (indented lines), a sampling
// block and families.
func configYAML(redisBlock, sampling, families string) string {
	return "redis:\n" + redisBlock + "sampling:\n" + sampling + "families:" + families
}

func addrBlock(addr string) string { return fmt.Sprintf("  addr: %q\n", addr) }

const quickSampling = "  interval: 1s\n  timeout: 5s\n  window: 10s\n"

// Series of the streams family.
const (
	lostS     = `slot_holds_ended_total{family="streams",outcome="lost"}`
	releasedS = `slot_holds_ended_total{family="streams",outcome="released"}`
	expiredS  = `slot_holds_ended_total{family="streams",outcome="expired"}`
	liveS     = `slot_members{family="streams",state="live"}`
	acquiresS = `slot_acquires_total{family="streams"}`
	upS       = `slot_exporter_up`
)

// redisNow is Redis TIME in ms: scores are written in Redis's clock, as
// the limiter's scripts do.
func streamKey(user string) string { return "t:streams:{" + user + "}" }

// seedHolds writes users × per live slots expiring at expiry (ms), each
// key with a TTL of 240 s as acquire sets it.
func seedHolds(t testing.TB, c redis.Cmdable, prefix string, users, per int, expiry int64) {
	t.Helper()
	ctx := context.Background()
	pipe := c.Pipeline()
	for u := range users {
		k := streamKey(fmt.Sprintf("%s%d", prefix, u))
		for m := range per {
			pipe.ZAdd(ctx, k, redis.Z{Score: float64(expiry), Member: fmt.Sprintf("s%d", m)})
		}
		pipe.PExpire(ctx, k, 240*time.Second)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatalf("seeding: %v", err)
	}
}
