package demo

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/simulator"
)

// header is the demo config's redis, release, sampling and leaks blocks:
// the embedded Redis's users (setupRelease), and short
// times, so that every signal moves within a minute (floors beyond their
// window after 20s, at most 8 per-user series per family, the rest
// dropped). The workloads' families follow it.
const header = `
redis:
  addr: %q
  password_file: %q
release:
  username: %q
  password_file: %q
sampling:
  interval: 1s
  window: 10s
  # The embedded Redis has neither client tracking nor INFO cpu: read
  # every key every sweep, paced by nothing but the interval.
  track_changes: false
  redis_cpu_share: 0
leaks:
  floor_window: 20s
  per_user_series: 8
families:
`

// A workload is traffic of its own in the embedded Redis, with the
// families that watch it. Some failures a workload sets up once (a caller
// that crashes on its first hit, a consumer killed on its first read): the
// demo starts every workload again after each data loss, so that they come
// back.
type workload interface {
	// families is the YAML list items of the families that watch it.
	families() string
	// start launches the traffic; Stop on what it returns ends it and
	// waits for it.
	start(ctx context.Context, c *redis.Client) (running, error)
}

type running interface{ Stop() }

// workloads is the demo's traffic. A workload of a new kind goes here, in
// its own file (appended from an init function), with its families.
var workloads = []workload{recipes{}}

// config is the whole demo config for the embedded Redis at addr.
func config(addr, passwordFile, releasePasswordFile string) string {
	var b strings.Builder
	fmt.Fprintf(&b, header, addr, passwordFile, releaseUser, releasePasswordFile)
	for _, w := range workloads {
		b.WriteString(w.families())
	}
	return b.String()
}

// recipes is the simulator: every recipe the exporter ships, healthy and
// with each of its failures.
type recipes struct{}

// slot ttl 6s with heartbeats every second (stale after 2s, zombies after
// 20s).
func (recipes) families() string {
	return `  - name: streams
    kind: slotset
    match: "joishi:streams:*"
    user: '^joishi:streams:\{?([^}]+)\}?$'
    limit: 3
    ttl: 6s
    heartbeat_interval: 1s
    max_hold: 20s
    clock_skew_tolerance: 500ms
  - name: streams_legacy
    kind: counter
    match: "joishi:streams-legacy:*"
    user: '^joishi:streams-legacy:\{?([^}]+)\}?$'
    limit: 3
  - name: api_rate
    kind: ratelimit
    match: "rl:api:*"
    user: '^rl:api:\{?([^}]+)\}?$'
    limit: 10
    window: 10s
  - name: jobs_lock
    kind: lock
    match: "lock:job:*"
    user: '^lock:job:\{?([^}]+)\}?$'
    ttl: 6s
    max_hold: 20s
  - name: mail_queue
    kind: list
    match: "queue:mail:{*}"
    max_wait: 10s
  - name: mail_processing
    kind: list
    match: "queue:mail:{*}:processing"
    max_wait: 10s
  - name: events
    kind: stream
    match: "stream:events:*"
    user: '^stream:events:\{?([^}]+)\}?$'
    max_hold: 10s
    max_deliveries: 5
`
}

func (recipes) start(ctx context.Context, c *redis.Client) (running, error) {
	return simulator.Run(ctx, c, simulation)
}

// simulation drives every recipe: slot-set streams with crashes, zombies,
// unit-bug scores and non-refreshing heartbeats; leaking counters; and one
// or more callers, holders, queues and streams for each failure of the
// other recipes. The thresholds it counts its truth with are the config's.
var simulation = simulator.Options{
	Users:             40,
	KeyPrefix:         "joishi:streams:",
	CounterPrefix:     "joishi:streams-legacy:",
	StreamRate:        3,
	StreamDuration:    10 * time.Second,
	TTL:               6 * time.Second,
	HeartbeatInterval: time.Second,
	CrashRate:         0.15,
	ZombieRate:        0.05,
	FutureRate:        0.03,
	NoRefreshRate:     0.2,
	CounterLeakRate:   0.15,
	Seed:              1,
	RateLimits: simulator.RateLimitWorkload{
		Limit: 10, Window: 10 * time.Second,
		Healthy: 4, NoExpire: 2, ExpireEveryHit: 1, SecondsAsMillis: 1, MillisAsSeconds: 1,
	},
	Locks: simulator.LockWorkload{
		TTL: 6 * time.Second, Hold: 4 * time.Second, MaxHold: 20 * time.Second, ClockSkewTolerance: 5 * time.Second,
		Healthy: 4, NoTTL: 1, Zombie: 1, WrongUnit: 1, Killed: 2,
	},
	ListQueues: simulator.ListQueueWorkload{
		PushInterval: time.Second, MaxWait: 10 * time.Second, LeaseTTL: 5 * time.Second,
		Healthy: 3, NoConsumer: 1, KilledWorker: 1,
	},
	StreamQueues: simulator.StreamQueueWorkload{
		AddInterval: time.Second, MaxHold: 10 * time.Second, MaxDeliveries: 5,
		Healthy: 3, DeadConsumer: 1, Poison: 1, Lagging: 1,
	},
}
