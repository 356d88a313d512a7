package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The application of the change-driven run and of the outside
// measurement: its writes, its latency probe, and the process of its own
// they run in.

// writer is the application: ZADD of a heartbeat member on random sets,
// spread evenly over each interval, and a latency probe. run starts both
// in a process of their own: in the exporter's process the probe measured
// the exporter's garbage collection and scheduling rather than Redis, and
// the writes slowed while the exporter worked, which lowered the
// application's load in the seconds the pacer attributes to its reads and
// so its measured cost per key. An application does not share the
// exporter's runtime.
type writer struct {
	target *redisTarget
	n      int
	frac   float64
	c      redis.UniversalClient // for write, in the calling process
}

// maxCatchUp is the most batches the application sends at once to make
// up for ticks it missed.
const maxCatchUp = 4

// appResult is what the application process prints.
type appResult struct {
	P99    float64 `json:"p99_ms"`
	N      int     `json:"n"`
	Writes int     `json:"writes"`
}

// run runs the application in a child process until ctx's deadline and
// returns the writes made and the probe's p99 latency (ms).
func (w *writer) run(ctx context.Context) (int, float64, error) {
	deadline, _ := ctx.Deadline()
	exe, err := os.Executable()
	if err != nil {
		return 0, 0, err
	}
	// The child ends at the deadline by itself.
	args := append([]string{"-role", "app", "-sets", strconv.Itoa(w.n), "-app-frac", strconv.FormatFloat(w.frac, 'g', -1, 64),
		"-probe-ms", strconv.FormatInt(time.Until(deadline).Milliseconds(), 10)}, w.target.args()...)
	cmd := exec.Command(exe, args...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err != nil {
		return 0, 0, fmt.Errorf("application: %w", err)
	}
	var r appResult
	if err := json.Unmarshal([]byte(out.String()), &r); err != nil {
		return 0, 0, fmt.Errorf("application: %w: %q", err, out.String())
	}
	if r.N == 0 {
		return 0, 0, fmt.Errorf("application: no reply from Redis to the probe")
	}
	return r.Writes, r.P99, nil
}

// write writes until ctx ends and returns the writes made.
func (w *writer) write(ctx context.Context) int {
	writes := 0
	if w.frac <= 0 {
		<-ctx.Done()
		return 0
	}
	perInterval := int(float64(w.n) * w.frac)
	// Batches of 100 every tick, as many ticks as it takes.
	batches := max(perInterval/100, 1)
	tick := changeInterval / time.Duration(batches)
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	t := time.NewTicker(tick)
	defer t.Stop()
	start, sent := time.Now(), 0
	for {
		select {
		case <-ctx.Done():
			return writes
		case <-t.C:
		}
		// The batches due by now, up to maxCatchUp at once: a ticker
		// drops the ticks that pass while a pipeline is out, and on a
		// cluster, where a pipeline waits on every node, a busy machine
		// wrote two thirds of the sets it should have.
		due := min(int(time.Since(start)/tick)-sent, maxCatchUp)
		if due <= 0 {
			continue
		}
		sent += due
		pipe := w.c.Pipeline()
		score := float64(time.Now().UnixMilli() + benchTiming.ttl)
		for range due * min(100, perInterval) {
			pipe.ZAdd(ctx, keyName(r.IntN(w.n)), redis.Z{Score: score, Member: "hb"})
		}
		if _, err := pipe.Exec(ctx); err == nil {
			writes += due * min(100, perInterval)
		}
	}
}

// workerApp is the application's process: the writes, and a GET or SET
// every millisecond on a connection of its own (to each node of a
// cluster; DB 1 on a single server), for o.probeMS.
func workerApp(o *workerOpts) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(o.probeMS)*time.Millisecond)
	defer cancel()
	target, c, done, err := openApplication(o)
	if err != nil {
		return err
	}
	defer done()
	wrote := make(chan int, 1)
	go func() { wrote <- (&writer{target: target, n: o.sets, frac: o.appFrac, c: c}).write(ctx) }()
	probe := target.probeClient()
	defer probe.Close()
	var lat []float64
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return json.NewEncoder(os.Stdout).Encode(appResult{P99: p99(lat), N: len(lat), Writes: <-wrote})
		case <-t.C:
		}
		t0 := time.Now()
		var err error
		if i%2 == 0 {
			err = probe.Set(ctx, "probe:"+strconv.Itoa(i%1000), i, 0).Err()
		} else {
			err = probe.Get(ctx, "probe:"+strconv.Itoa((i-1)%1000)).Err()
		}
		if err == nil || err == redis.Nil {
			lat = append(lat, float64(time.Since(t0).Microseconds())/1000)
		}
	}
}

func p99(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[int(float64(len(s)-1)*0.99)]
}
