package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/redisproc"
	"github.com/slotexporter/slot_exporter/internal/redisread"
)

// The per-kind section: for every kind, a fresh redis-server loaded with
// keys of that kind only, the exporter's full sweep of one family of it
// next to a naive go-redis client that sends the same reads, one pipeline
// per SCAN page, single-threaded. The timings are stretched (hours, not
// seconds) so that nothing the bench loads expires or changes state while
// it is measured: each run reads the same keyspace.

const (
	kindsBegin = "<!-- bench:kinds begin -->"
	kindsEnd   = "<!-- bench:kinds end -->"
)

// kindBench is one kind's fixture: its family, how to write one key, and
// the naive client's reads of one SCAN page.
type kindBench struct {
	kind, match, family string
	write               func(g *gen, key string)
	naive               func(ctx context.Context, c *redis.Client, page []string) error
}

var kindBenches = []kindBench{
	{
		kind: "slotset", match: "bk:slot:*",
		family: "ttl: 1h\n    heartbeat_interval: 10m\n    max_hold: 24h\n    stale_after: 20m\n    limit: 3",
		write: func(g *gen, key string) {
			n := 1 + g.r.IntN(2)
			g.header(2 + 2*n)
			g.arg([]byte("ZADD"))
			g.arg([]byte(key))
			for range n {
				g.argInt(g.now + 3600e3 - g.r.Int64N(600e3))
				g.arg(g.memberID())
			}
			g.cmd("PEXPIRE", key, "7200000")
		},
		naive: func(ctx context.Context, c *redis.Client, page []string) error {
			pipe := c.Pipeline()
			for _, k := range page {
				pipe.ZRangeWithScores(ctx, k, 0, -1)
				pipe.PTTL(ctx, k)
			}
			_, err := pipe.Exec(ctx)
			return err
		},
	},
	{
		kind: "counter", match: "bk:counter:*", family: "limit: 3",
		write: func(g *gen, key string) {
			g.cmd("SET", key, fmt.Sprint(g.r.IntN(4)), "PX", fmt.Sprint(3600e3+g.r.Int64N(3600e3)))
		},
		naive: func(ctx context.Context, c *redis.Client, page []string) error {
			pipe := c.Pipeline()
			for _, k := range page {
				pipe.Get(ctx, k)
			}
			_, err := pipe.Exec(ctx)
			return err
		},
	},
	{
		kind: "ratelimit", match: "bk:rate:*", family: "window: 1h\n    limit: 100",
		write: func(g *gen, key string) {
			g.cmd("SET", key, fmt.Sprint(1+g.r.IntN(50)), "PX", fmt.Sprint(1800e3+g.r.Int64N(1800e3)))
		},
		naive: func(ctx context.Context, c *redis.Client, page []string) error {
			pipe := c.Pipeline()
			for _, k := range page {
				pipe.Get(ctx, k)
				pipe.PTTL(ctx, k)
			}
			_, err := pipe.Exec(ctx)
			return err
		},
	},
	{
		kind: "lock", match: "bk:lock:*", family: "ttl: 1h\n    max_hold: 24h",
		write: func(g *gen, key string) {
			g.cmd("SET", key, string(g.memberID()), "PX", fmt.Sprint(3000e3+g.r.Int64N(600e3)))
		},
		naive: func(ctx context.Context, c *redis.Client, page []string) error {
			pipe := c.Pipeline()
			for _, k := range page {
				pipe.GetRange(ctx, k, 0, redisread.MaxTokenBytes-1)
				pipe.PTTL(ctx, k)
			}
			_, err := pipe.Exec(ctx)
			return err
		},
	},
	{
		kind: "list", match: "bk:list:*", family: "max_wait: 1h",
		write: func(g *gen, key string) {
			n := 2 + g.r.IntN(3)
			g.header(2 + n)
			g.arg([]byte("RPUSH"))
			g.arg([]byte(key))
			for range n {
				g.arg(g.memberID())
			}
		},
		naive: func(ctx context.Context, c *redis.Client, page []string) error {
			pipe := c.Pipeline()
			for _, k := range page {
				pipe.LLen(ctx, k)
				pipe.LIndex(ctx, k, -1)
			}
			_, err := pipe.Exec(ctx)
			return err
		},
	},
	{
		kind: "stream", match: "bk:stream:*", family: "max_hold: 24h",
		write: func(g *gen, key string) {
			for range 3 + g.r.IntN(3) {
				g.cmd("XADD", key, "*", "job", string(g.memberID()))
			}
			g.cmd("XGROUP", "CREATE", key, "workers", "0")
			g.cmd("XREADGROUP", "GROUP", "workers", "w1", "COUNT", fmt.Sprint(1+g.r.IntN(3)), "STREAMS", key, ">")
		},
		naive: naiveStreams,
	},
}

// naiveStreams needs two rounds, as the exporter does: the groups (and
// whether any entry is pending) are known only after XINFO GROUPS.
func naiveStreams(ctx context.Context, c *redis.Client, page []string) error {
	pipe := c.Pipeline()
	groups := make([]*redis.XInfoGroupsCmd, len(page))
	for i, k := range page {
		pipe.XLen(ctx, k)
		groups[i] = pipe.XInfoGroups(ctx, k)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return err
	}
	pipe = c.Pipeline()
	for i, k := range page {
		for _, gr := range groups[i].Val() {
			if gr.Pending == 0 {
				continue
			}
			pipe.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: k, Group: gr.Name, Start: "-", End: "+", Count: 1000})
			pipe.XInfoConsumers(ctx, k, gr.Name)
		}
	}
	_, err := pipe.Exec(ctx)
	return err
}

// cmd appends one command of plain string arguments to g.buf.
func (g *gen) cmd(args ...string) {
	g.header(len(args))
	for _, a := range args {
		g.arg([]byte(a))
	}
}

type kindResult struct {
	Kind  string
	Keys  int
	Load  time.Duration
	Sweep []float64 // s
	Naive []float64 // s
}

type kindsResult struct {
	Rows     []kindResult
	Runs     int
	Load     string
	Redis    string
	NProc    int
	Took     time.Duration
	Reported time.Time
}

// runKinds measures every kind at keys keys (streams at streamKeys).
func runKinds(ctx context.Context, keys, streamKeys, runs int) (*kindsResult, error) {
	m := describeMachine()
	res := &kindsResult{Runs: runs, Load: m.Load, Redis: m.Redis, NProc: m.NProc, Reported: m.Started}
	start := time.Now()
	for _, kb := range kindBenches {
		n := keys
		if kb.kind == "stream" {
			n = streamKeys
		}
		if n <= 0 {
			continue
		}
		r, err := runKind(ctx, kb, n, runs)
		if err != nil {
			return nil, fmt.Errorf("kind %s: %w", kb.kind, err)
		}
		res.Rows = append(res.Rows, r)
	}
	res.Took = time.Since(start)
	return res, nil
}

func runKind(ctx context.Context, kb kindBench, n, runs int) (kindResult, error) {
	res := kindResult{Kind: kb.kind, Keys: n}
	s, err := startServer()
	if err != nil {
		return res, err
	}
	defer s.Stop()
	admin := s.client()
	defer admin.Close()
	now, err := admin.Time(ctx).Result()
	if err != nil {
		return res, err
	}
	log.Printf("kinds: %s: loading %d keys", kb.kind, n)
	g := newGen(uint64(n), now.UnixMilli(), benchTiming)
	t0 := time.Now()
	prefix := strings.TrimSuffix(kb.match, "*")
	err = pipeRESP(s.Addr, func(w io.Writer) error {
		for i := range n {
			g.buf = g.buf[:0]
			kb.write(g, fmt.Sprintf("%s{%08d}", prefix, i))
			if _, err := w.Write(g.buf); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return res, err
	}
	res.Load = time.Since(t0)
	if got, err := admin.DBSize(ctx).Result(); err != nil || got != int64(n) {
		return res, fmt.Errorf("DBSIZE %d after loading %d keys (%v)", got, n, err)
	}
	log.Printf("kinds: %s: loaded in %s; sweeps", kb.kind, res.Load.Round(time.Millisecond))

	yaml := redisproc.Config{
		Addr:     s.Addr,
		Sampling: []string{"interval: 1m", "timeout: 5m", "window: 1m", "scan_count: 1000", "track_changes: false", "redis_cpu_share: 0"},
		Families: []redisproc.Family{{Name: "bench_" + kb.kind, Kind: kb.kind, Match: kb.match, Extra: []string{kb.family}}},
	}.YAML()
	sw, client, err := sweeperFor(yaml)
	if err != nil {
		return res, fmt.Errorf("exporter config: %w\n%s", err, yaml)
	}
	defer client.Close()
	defer sw.Stop()
	// The first sweep meets every key for the first time; the measured
	// ones are the steady state a running exporter is in.
	var scanned, errs uint64 // the snapshot's counters are cumulative
	for i := range runs + 1 {
		t := time.Now()
		if err := sw.SweepOnce(ctx); err != nil {
			return res, err
		}
		d := time.Since(t).Seconds()
		f := sw.Snapshot().Families[0]
		if f.KeysScanned-scanned != uint64(n) || f.SweepErrors != errs {
			return res, fmt.Errorf("the sweep read %d keys with %d errors, %d were loaded", f.KeysScanned-scanned, f.SweepErrors-errs, n)
		}
		scanned, errs = f.KeysScanned, f.SweepErrors
		// A skipped key is read but not modelled: the sweep would look
		// cheaper than it is.
		for _, c := range f.Skipped {
			if c.N != 0 {
				return res, fmt.Errorf("the sweep skipped %d keys as %s", c.N, c.Label)
			}
		}
		if i > 0 {
			res.Sweep = append(res.Sweep, d)
		}
	}

	nc := redis.NewClient(&redis.Options{Addr: s.Addr, ReadTimeout: time.Minute})
	defer nc.Close()
	for range runs {
		t := time.Now()
		got, err := naiveScan(ctx, nc, kb)
		if err != nil {
			return res, fmt.Errorf("naive: %w", err)
		}
		if got != n {
			return res, fmt.Errorf("naive client read %d keys, %d were loaded", got, n)
		}
		res.Naive = append(res.Naive, time.Since(t).Seconds())
	}
	log.Printf("kinds: %s: sweep %s, naive %s", kb.kind, secs(redisproc.Median(res.Sweep)), secs(redisproc.Median(res.Naive)))
	return res, nil
}

// naiveScan is the straightforward script: SCAN a page, pipeline its
// reads, wait, next page.
func naiveScan(ctx context.Context, c *redis.Client, kb kindBench) (int, error) {
	var cursor uint64
	keys := 0
	for {
		page, next, err := c.Scan(ctx, cursor, kb.match, 1000).Result()
		if err != nil {
			return keys, err
		}
		if len(page) > 0 {
			if err := kb.naive(ctx, c, page); err != nil {
				return keys, err
			}
			keys += len(page)
		}
		if next == 0 {
			return keys, nil
		}
		cursor = next
	}
}

func (k *kindsResult) markdown() string {
	var b strings.Builder
	p := func(f string, a ...any) { fmt.Fprintf(&b, f+"\n", a...) }
	p(kindsBegin)
	p("## Full sweep per kind, next to a naive client\n")
	p("One family per kind, %s keys each on a fresh redis-server %s, `track_changes: false`, `redis_cpu_share: 0`, "+
		"SCAN COUNT 1000; median of %d `SweepOnce` runs after one unmeasured first sweep. The naive client is go-redis, "+
		"single-threaded, one pipeline per SCAN page with the kind's reads (slotset ZRANGE 0 -1 WITHSCORES + PTTL; "+
		"counter GET; ratelimit GET + PTTL; lock GETRANGE + PTTL; list LLEN + LINDEX; stream XLEN + XINFO GROUPS, "+
		"then XPENDING + XINFO CONSUMERS per group with pending entries). Ratio is exporter / naive.\n",
		k.keysText(), k.Redis, k.Runs)
	p("Keys: slot sets of 1–2 members with PEXPIRE; counters and rate counters with PX; locks with a 36-byte token and PX; " +
		"lists of 2–4 elements; streams of 3–5 entries, one group, 1–3 entries pending.\n")
	p("| kind | keys | exporter sweep (s) | naive (s) | ratio | keys/s (exporter) |")
	p("|---|---:|---:|---:|---:|---:|")
	for _, r := range k.Rows {
		sw, nv := redisproc.Median(r.Sweep), redisproc.Median(r.Naive)
		ratio := "–"
		if nv > 0 {
			ratio = fmt.Sprintf("%.2f", sw/nv)
		}
		p("| %s | %d | %.3f | %.3f | %s | %s |", r.Kind, r.Keys, sw, nv, ratio, rate(r.Keys, sw))
	}
	p("\nMachine: %d CPUs, load average %s at the start; took %s. `go run ./tools/bench -only kinds` reruns this section alone.",
		k.NProc, k.Load, k.Took.Round(time.Second))
	p(kindsEnd)
	return b.String()
}

func (k *kindsResult) keysText() string {
	seen := map[int]bool{}
	var parts []string
	for _, r := range k.Rows {
		if !seen[r.Keys] {
			seen[r.Keys] = true
			parts = append(parts, fmt.Sprint(r.Keys))
		}
	}
	return strings.Join(parts, " or ")
}

// spliceKinds puts section into the report at path in place of an earlier
// one, or at its end, leaving every other section as it was.
func spliceKinds(path, section string) error {
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	s := string(old)
	if i := strings.Index(s, kindsBegin); i >= 0 {
		j := strings.Index(s[i:], kindsEnd)
		if j < 0 {
			return fmt.Errorf("%s: %q without %q", path, kindsBegin, kindsEnd)
		}
		rest := strings.TrimPrefix(s[i+j+len(kindsEnd):], "\n")
		return os.WriteFile(path, []byte(s[:i]+section+rest), 0o644)
	}
	if s != "" && !strings.HasSuffix(s, "\n\n") {
		s = strings.TrimRight(s, "\n") + "\n\n"
	}
	return os.WriteFile(path, []byte(s+section), 0o644)
}

// The section's own flags, kept here so that main only calls in.
var (
	kindKeys   = flag.Int("kind-keys", 100000, "keys per kind in the per-kind section (0 skips it)")
	streamKeys = flag.Int("kind-stream-keys", 100000, "streams in the per-kind section")
	kindRuns   = flag.Int("kind-runs", 3, "measured runs per kind; the section gives medians")
)

// kindsSection runs the per-kind section and renders it ("" when skipped).
func kindsSection(ctx context.Context) (string, error) {
	if *kindKeys <= 0 {
		return "", nil
	}
	if *kindRuns < 1 {
		return "", fmt.Errorf("-kind-runs must be at least 1")
	}
	k, err := runKinds(ctx, *kindKeys, *streamKeys, *kindRuns)
	if err != nil {
		return "", err
	}
	return "\n" + k.markdown(), nil
}
