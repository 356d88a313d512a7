package sweep

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/commandstats"
	"github.com/slotexporter/slot_exporter/internal/redisinfo"
	"github.com/slotexporter/slot_exporter/internal/redisproc"
	"github.com/slotexporter/slot_exporter/internal/redistest"
)

var (
	firstPictureSets    = flag.Int("first-picture-sets", 100_000, "slot sets of BenchmarkFirstPicture")
	firstPictureUnpaced = flag.Bool("first-picture-unpaced", false, "BenchmarkFirstPicture with redis_cpu_share 0: what Redis spends a key unpaced, on the same machine")
	firstPictureProbe   = flag.Bool("first-picture-probe", false, "BenchmarkFirstPicture with a GET every ms on a connection of its own: the latency an application sees during a first read")
)

// BenchmarkFirstPicture: how long a new exporter, with the defaults a user
// gets (sampling.timeout 30s, redis_cpu_share 0.1, change tracking on),
// takes to publish its first complete picture of -first-picture-sets slot
// sets on a redis-server of its own. Each iteration is a fresh exporter
// on the same data; the median is reported. -first-picture-unpaced reads
// without the pace: what a key costs Redis in a deep pipeline, on the
// same machine and data.
//
//	go test -run '^$' -bench FirstPicture -benchtime 3x ./internal/sweep -args -first-picture-sets=1000000
func BenchmarkFirstPicture(b *testing.B) {
	srv := redistest.Start(b)
	rc := srv.Client()
	ctx := context.Background()
	now, err := rc.Time(ctx).Result()
	if err != nil {
		b.Fatal(err)
	}
	score := float64(now.UnixMilli() + 110_000)
	pipe := rc.Pipeline()
	for i := range *firstPictureSets {
		k := redisproc.SlotKey(fmt.Sprintf("%012d", i))
		zs := make([]redis.Z, 1+i%5/2)
		for j := range zs {
			zs[j] = redis.Z{Score: score, Member: fmt.Sprintf("%08x-0000-4000-8000-%012x", i, j)}
		}
		pipe.ZAdd(ctx, k, zs...)
		pipe.PExpire(ctx, k, time.Hour)
		if pipe.Len() >= 20_000 {
			if _, err := pipe.Exec(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		b.Fatal(err)
	}
	var samp []string
	if *firstPictureUnpaced {
		samp = []string{"redis_cpu_share: 0"}
	}
	cfg, err := config.Parse([]byte(redisproc.Config{Addr: srv.Addr, Sampling: samp, Families: []redisproc.Family{redisproc.Slots()}}.YAML()))
	if err != nil {
		b.Fatal(err)
	}
	var took []float64
	b.ResetTimer()
	for range b.N {
		s, err := New(ctx, cfg, rc, slog.New(slog.DiscardHandler), nil)
		if err != nil {
			b.Fatal(err)
		}
		info0, _ := rc.Info(ctx, "cpu").Result()
		cmd0, _ := rc.Info(ctx, "commandstats").Result()
		t0 := time.Now()
		s.Start()
		probeDone := make(chan []time.Duration, 1)
		stopProbe := make(chan struct{})
		if *firstPictureProbe {
			go func() { probeDone <- appProbe(ctx, srv, stopProbe) }()
		} else {
			probeDone <- nil
		}
		for s.Snapshot().Families[0].LastSuccess.IsZero() {
			time.Sleep(100 * time.Millisecond)
		}
		d := time.Since(t0)
		close(stopProbe)
		lat := <-probeDone
		info1, _ := rc.Info(ctx, "cpu").Result()
		redisCPU := redisinfo.CPU(info1) - redisinfo.CPU(info0)
		cmd1, _ := rc.Info(ctx, "commandstats").Result()
		s.Stop()
		f := s.fams[0]
		// Redis's time inside each command, a key: the rest of its CPU
		// a key is socket work and the event loop.
		st0, st1 := commandstats.Parse(cmd0), commandstats.Parse(cmd1)
		inCmds := ""
		for _, c := range []string{"scan", "zscan", "pttl"} {
			inCmds += fmt.Sprintf(" %s %.2f,", c, float64(st1[c].Usec-st0[c].Usec)/float64(max(f.state.keysScanned, 1)))
		}
		var cost, rate float64
		if s.pacer != nil {
			s.pacer.mu.Lock()
			cost, rate = s.pacer.cost, s.pacer.KeysPerSecond()
			s.pacer.mu.Unlock()
		}
		b.Logf("first picture of %d sets after %.1f s in %d attempts (sets %d, keys read %d); Redis CPU %.2f s, %.2f µs a key, %.1f%% of a core (inside commands, µs a key:%s); pacer: %.2f µs a key, %.0f keys/s%s",
			*firstPictureSets, d.Seconds(), f.state.lastGauges.attempts, f.state.lastGauges.sets, f.state.keysScanned,
			redisCPU, redisCPU/float64(f.state.keysScanned)*1e6, 100*redisCPU/d.Seconds(), strings.TrimSuffix(inCmds, ","), cost*1e6, rate,
			probeFigures(lat))
		took = append(took, d.Seconds())
	}
	slices.Sort(took)
	b.ReportMetric(took[len(took)/2], "s/first-picture")
}

// appProbe times a GET every millisecond on a connection of its own, as an
// application would see Redis while the first read goes on, until stop.
func appProbe(ctx context.Context, srv *redistest.Server, stop <-chan struct{}) []time.Duration {
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 1, DB: 1})
	defer c.Close()
	var lat []time.Duration
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return lat
		case <-t.C:
		}
		t0 := time.Now()
		if err := c.Get(ctx, "probe").Err(); err != nil && err != redis.Nil {
			return lat
		}
		lat = append(lat, time.Since(t0))
	}
}

// probeFigures are appProbe's latencies for the log line; none: "".
func probeFigures(lat []time.Duration) string {
	if len(lat) == 0 {
		return ""
	}
	return fmt.Sprintf("; a GET every ms meanwhile: p99 %s, p99.9 %s, max %s", quantile(lat, 0.99), quantile(lat, 0.999), quantile(lat, 1))
}

// quantile is the q quantile of v (1: the largest), 0 for none.
func quantile(v []time.Duration, q float64) time.Duration {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[int(float64(len(s)-1)*q)].Round(10 * time.Microsecond)
}
