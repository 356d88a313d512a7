// Command slotsim drives a Redis with a simulated stream workload that holds
// crash-safe slots (and, optionally, legacy counters), and with the other
// recipes slot_exporter watches (rate limits, owner locks, list queues,
// streams with consumer groups), injects faults, and prints its ground truth
// as JSON: on stdout when it ends (after --duration, or on SIGINT/SIGTERM),
// and every second to --truth-file if given.
//
// The other recipes run when their --ratelimit.*, --lock.*, --list.* and
// --stream.* counts ask for actors: each count is the number of users whose
// key is driven healthy or with that failure.
//
// Scenarios:
//
//	steady    the workloads with the configured fault rates and counts.
//	incident  the same, and at --kill-at a share (--kill-share) of the
//	          in-flight holders is SIGKILLed at one instant, like a deploy's
//	          docker stop after its grace period; then it carries on.
//	recipes   steady, plus every recipe kind healthy and with each of its
//	          failures: the counts not given on the command line are set
//	          (5 healthy rate callers and lock holders, 3 healthy queues and
//	          streams, one of each failure).
//
// --pause-at pauses all traffic at that time after start: from then on the
// truth is exact (see simulator.Sim.Pause), and slotsim idles until it ends.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/simulator"
)

func main() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, sig))
}

type config struct {
	addr, username, passwordFile string
	scenario, truthFile          string
	duration, killAt, pauseAt    time.Duration
	killShare                    float64
	o                            simulator.Options
	// countSet records which recipe counts were given on the command line,
	// so that a scenario preset leaves them alone.
	countSet map[*int]*bool
}

func parse(args []string, stdout, stderr io.Writer) (*config, error) {
	app := kingpin.New("slotsim", "Workload and fault simulator for slot_exporter: streams holding crash-safe slots in Redis, SIGKILLed holders, zombie heartbeats, leaking legacy counters, unit-bug scores; and rate limits, owner locks, list queues and streams, healthy and broken. Prints its ground truth as JSON.")
	app.UsageWriter(stdout).ErrorWriter(stderr)
	app.HelpFlag.Short('h')
	var c config
	app.Flag("redis.addr", "Redis address, host:port.").Default("127.0.0.1:6379").StringVar(&c.addr)
	app.Flag("redis.username", "Redis ACL user name.").StringVar(&c.username)
	app.Flag("redis.password-file", "File holding the Redis password (also REDIS_PASSWORD).").StringVar(&c.passwordFile)
	app.Flag("users", "Number of users (u0, u1, ...).").Default("1000").IntVar(&c.o.Users)
	app.Flag("free-share", "Share of free users (limit 1); the others are paid (limit 3).").Default("0.5").Float64Var(&c.o.FreeShare)
	app.Flag("limit", "Every user's limit; overrides --free-share when > 0.").Default("0").IntVar(&c.o.Limit)
	app.Flag("key-prefix", "Slot-set key prefix: <prefix>{<user>}.").Default(simulator.DefaultKeyPrefix).StringVar(&c.o.KeyPrefix)
	app.Flag("counter-prefix", "Legacy counter key prefix: <prefix>{<user>}; empty disables counters.").Default("joishi:streams-legacy:").StringVar(&c.o.CounterPrefix)
	app.Flag("stream-rate", "New streams per second across all users.").Default("10").Float64Var(&c.o.StreamRate)
	app.Flag("stream-duration", "Mean stream duration (uniform 50%..150%).").Default("60s").DurationVar(&c.o.StreamDuration)
	app.Flag("ttl", "Slot ttl.").Default("120s").DurationVar(&c.o.TTL)
	app.Flag("heartbeat-interval", "Heartbeat interval.").Default("20s").DurationVar(&c.o.HeartbeatInterval)
	app.Flag("crash-rate", "Share of streams whose holder dies mid-stream.").Default("0.02").Float64Var(&c.o.CrashRate)
	app.Flag("zombie-rate", "Share of streams whose heartbeat loop outlives the stream.").Default("0.005").Float64Var(&c.o.ZombieRate)
	app.Flag("future-rate", "Share of acquires written with a microsecond (unit-bug) score.").Default("0.002").Float64Var(&c.o.FutureRate)
	app.Flag("no-refresh-rate", "Share of holders whose heartbeat does not refresh the key's expiry.").Default("0").Float64Var(&c.o.NoRefreshRate)
	app.Flag("counter-leak-rate", "Share of counter-holding streams that never DECR.").Default("0.01").Float64Var(&c.o.CounterLeakRate)
	app.Flag("workers", "Concurrent acquires.").Default("8").IntVar(&c.o.Workers)
	app.Flag("seed", "Random seed.").Default("1").Int64Var(&c.o.Seed)
	slotStreams := true
	app.Flag("slot-streams", "Run the slot-set stream workload (--no-slot-streams: the other recipes alone).").Default("true").BoolVar(&slotStreams)
	app.Flag("duration", "How long to run; 0 runs until SIGINT/SIGTERM.").Default("0").DurationVar(&c.duration)
	app.Flag("scenario", "steady, incident or recipes.").Default("steady").EnumVar(&c.scenario, "steady", "incident", "recipes")
	app.Flag("kill-at", "incident: when to kill holders, after start.").Default("20s").DurationVar(&c.killAt)
	app.Flag("kill-share", "incident: share of in-flight holders killed at --kill-at.").Default("0.5").Float64Var(&c.killShare)
	app.Flag("pause-at", "Pause all traffic at this time after start (0: never); the truth is then exact.").Default("0").DurationVar(&c.pauseAt)
	app.Flag("truth-file", "Also write the ground truth JSON to this file, every second and at the end.").StringVar(&c.truthFile)
	c.recipeFlags(app)
	if _, err := app.Parse(args); err != nil {
		return nil, err
	}
	if c.killShare < 0 || c.killShare > 1 {
		return nil, fmt.Errorf("--kill-share %v is not in [0, 1]", c.killShare)
	}
	if c.pauseAt < 0 {
		return nil, fmt.Errorf("--pause-at %v is negative", c.pauseAt)
	}
	c.o.NoSlotStreams = !slotStreams
	if c.scenario == "recipes" {
		c.presetRecipes()
	}
	return &c, nil
}

func run(args []string, stdout, stderr io.Writer, sig <-chan os.Signal) int {
	c, err := parse(args, stdout, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "slotsim:", err)
		return 2
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))

	password := os.Getenv("REDIS_PASSWORD")
	if c.passwordFile != "" {
		b, err := os.ReadFile(c.passwordFile)
		if err != nil {
			logger.Error("reading password file", "err", err)
			return 1
		}
		password = strings.TrimRight(string(b), "\r\n")
	}
	client := redis.NewClient(&redis.Options{
		Addr: c.addr, Username: c.username, Password: password,
		DisableIdentity: true,
		// Fail fast while Redis is down: the simulator counts errors and
		// carries on.
		MaxRetries: 1, DialTimeout: time.Second, DialerRetries: 1,
		ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second,
	})
	defer client.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sim, err := simulator.Run(ctx, client, c.o)
	if err != nil {
		logger.Error("starting simulator", "err", err)
		return 2
	}
	o := sim.Options()
	logger.Info("simulating", "redis", c.addr, "scenario", c.scenario, "users", o.Users,
		"stream_rate", o.StreamRate, "stream_duration", o.StreamDuration, "ttl", o.TTL,
		"heartbeat_interval", o.HeartbeatInterval, "key_prefix", o.KeyPrefix, "counter_prefix", o.CounterPrefix,
		"slot_streams", !o.NoSlotStreams)

	var end <-chan time.Time
	if c.duration > 0 {
		end = time.After(c.duration)
	}
	var kill, pause <-chan time.Time
	if c.scenario == "incident" {
		kill = time.After(c.killAt)
	}
	if c.pauseAt > 0 {
		pause = time.After(c.pauseAt)
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()

	writeTruth := func() {
		if c.truthFile == "" {
			return
		}
		if err := writeFileAtomic(c.truthFile, sim.Truth()); err != nil {
			logger.Warn("writing truth file", "err", err)
		}
	}
	writeTruth()
loop:
	for {
		select {
		case <-tick.C:
			writeTruth()
		case <-kill:
			kill = nil
			before := sim.Truth().InFlight
			n := sim.KillShare(c.killShare)
			logger.Info("incident: SIGKILL", "killed", n, "in_flight_before", before, "share", c.killShare)
			writeTruth()
		case <-pause:
			pause = nil
			sim.Pause()
			logger.Info("paused: no more traffic; the truth is exact from now on")
			writeTruth()
		case s := <-sig:
			logger.Info("stopping", "signal", s.String())
			break loop
		case <-end:
			break loop
		}
	}
	sim.Stop()
	t := sim.Truth()
	writeTruth()
	b, _ := json.Marshal(t)
	fmt.Fprintf(stdout, "%s\n", b)
	logger.Info("done", "acquired", t.Acquired, "denied", t.Denied, "released", t.Released,
		"killed", t.Killed, "crashed", t.Crashed, "zombies", t.Zombies, "future", t.Future,
		"counters_leaked", t.CountersLeaked, "lost", t.Lost, "errors", t.Errors)
	logRecipes(logger, t)
	return 0
}

// writeFileAtomic writes v as JSON to a temporary file next to path and
// renames it into place, so a reader never sees half a file.
func writeFileAtomic(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		os.Remove(f.Name())
		return err
	}
	return nil
}
