package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/redis/go-redis/v9"
)

// The churn run (memory across many sweeps of a changing keyspace) and the
// back-to-back sweep loop of the latency run, each in a worker process.

// churnResult samples the exporter's memory across a long run of sweeps
// over a keyspace that keeps changing.
type churnSample struct {
	Sweep   int     `json:"sweep"`
	Heap    uint64  `json:"heap"`
	RSS     uint64  `json:"rss"`
	Tracked int     `json:"tracked"`
	Members int     `json:"members"`
	Zombies int     `json:"zombies"`
	Users   int     `json:"users"`
	Wall    float64 `json:"wall_s"`
}

type churnResult struct {
	Samples    []churnSample `json:"samples"`
	Ended      uint64        `json:"ended"`
	Acq        uint64        `json:"acquires"`
	Heartbeats uint64        `json:"heartbeats"`
	// Mismatch counts sweeps after which the tracker held a different
	// number of members than the sweep saw: gone members not forgotten.
	Mismatch int `json:"mismatch"`
}

// heartbeatLua is the live holders' heartbeats between two sweeps of the
// churn run: every member whose score is in the live range gets
// ZADD XX GT now+ttl, and its key PEXPIRE 2*ttl GT, as limiter.Heartbeat
// would do. Members that are stale, expired or in the future are left alone.
var heartbeatLua = redis.NewScript(`
local n = 0
for _, k in ipairs(KEYS) do
  local ms = redis.call('ZRANGEBYSCORE', k, ARGV[1], ARGV[2])
  for _, m in ipairs(ms) do
    redis.call('ZADD', k, 'XX', 'GT', ARGV[3], m)
    n = n + 1
  end
  if #ms > 0 then redis.call('PEXPIRE', k, ARGV[4], 'GT') end
end
return n
`)

// workerChurn loads o.sets sets and sweeps o.sweeps times; between sweeps,
// o.churn of the sets change (half are deleted and replaced by new users'
// sets, half have all their holders replaced) and the live holders
// heartbeat.
func workerChurn(o *workerOpts) error {
	o.timing = churnTiming
	ctx := context.Background()
	s, client, err := newSweeper(o)
	if err != nil {
		return err
	}
	defer client.Close()
	admin := redis.NewClient(&redis.Options{Addr: o.addr, ReadTimeout: time.Minute})
	defer admin.Close()
	now, err := admin.Time(ctx).Result()
	if err != nil {
		return err
	}
	t := o.timing
	g := newGen(o.seed+1, now.UnixMilli(), t)
	if _, _, err := load(o.addr, g, 0, o.sets); err != nil {
		return err
	}
	keys := make([]int, o.sets)
	for i := range keys {
		keys[i] = i
	}
	next := o.sets
	var res churnResult
	var st loadStats
	names := make([]string, 0, 1000)
	for sw := 1; sw <= o.sweeps; sw++ {
		t0 := time.Now()
		if err := s.SweepOnce(ctx); err != nil {
			return fmt.Errorf("sweep %d: %w", sw, err)
		}
		wall := time.Since(t0)
		fg := familyFigures(s.Snapshot().Families[0])
		members := 0
		for _, n := range fg.states {
			members += n
		}
		// Every member the sweep did not see must have ended.
		if fg.membersTracked != members {
			res.Mismatch++
		}
		smp := churnSample{Sweep: sw, Tracked: fg.membersTracked, Members: members,
			Zombies: fg.states[stZombie], Users: fg.usersTracked, Wall: wall.Seconds()}
		if sw == 1 || sw%5 == 0 {
			m := readMem()
			smp.Heap, smp.RSS = m.HeapAlloc, m.RSS
		}
		res.Samples = append(res.Samples, smp)
		res.Ended, res.Acq, res.Heartbeats = fg.holdsEnded, fg.acquires, fg.heartbeats

		// Churn for the next sweep.
		g.now = time.Now().UnixMilli()
		n := int(float64(o.sets) * o.churn)
		g.buf = g.buf[:0]
		for j := range n {
			pos := g.r.IntN(len(keys))
			g.header(2)
			g.arg([]byte("DEL"))
			g.arg([]byte(keyName(keys[pos])))
			if j%2 == 0 {
				keys[pos] = next
				next++
			}
			g.set(keyName(keys[pos]), &st)
		}
		if err := rawPipe(admin, g.buf); err != nil {
			return err
		}
		// Heartbeats, in batches of 1000 keys.
		hnow := time.Now().UnixMilli()
		for i := 0; i < len(keys); i += 1000 {
			names = names[:0]
			for _, k := range keys[i:min(i+1000, len(keys))] {
				names = append(names, keyName(k))
			}
			if err := heartbeatLua.Run(ctx, admin, names,
				fmt.Sprintf("(%d", hnow+t.ttl-t.stale), hnow+t.ttl+5000, hnow+t.ttl, 2*t.ttl).Err(); err != nil {
				return fmt.Errorf("heartbeats: %w", err)
			}
		}
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

// rawPipe sends ready-made RESP commands with redis-cli --pipe.
func rawPipe(admin *redis.Client, b []byte) error {
	return pipeRESP(admin.Options().Addr, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

type loopResult struct {
	Sweeps int     `json:"sweeps"`
	Mean   float64 `json:"mean_s"`
}

// workerLoop sweeps back to back, as a sampling.interval shorter than a
// sweep would, until its stdin closes. It writes "ready" once the first
// sweep is done so that the load it competes with starts on a warm tracker.
func workerLoop(o *workerOpts) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, client, err := newSweeper(o)
	if err != nil {
		return err
	}
	defer client.Close()
	if err := s.SweepOnce(ctx); err != nil {
		return err
	}
	fmt.Println("ready")
	go func() {
		_, _ = io.Copy(io.Discard, bufio.NewReader(os.Stdin))
		cancel()
	}()
	var res loopResult
	var total time.Duration
	for ctx.Err() == nil {
		t0 := time.Now()
		if err := s.SweepOnce(ctx); err != nil {
			if ctx.Err() != nil {
				break
			}
			return err
		}
		total += time.Since(t0)
		res.Sweeps++
	}
	if res.Sweeps > 0 {
		res.Mean = total.Seconds() / float64(res.Sweeps)
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}
