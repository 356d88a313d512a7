package kind

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/redis/go-redis/v9"
)

// rqStartedRead bounds the StartedJobRegistry entries one sweep reads per
// queue (each is a job one worker holds: a registry this long is itself
// the anomaly); past it the rest are counted by ZCOUNT only.
const rqStartedRead = 1000

// rqRead is one sweep's read of an RQ 1.13 layout under prefix ("rq").
type rqRead struct {
	Queues map[string]*rqQueueRead
	// Workers are the keys in <prefix>:workers, alive or not.
	WorkersLive, WorkersDead int64
	Bad                      []string
}

type rqQueueRead struct {
	Waiting int64
	Oldest  int64 // enqueued_at (Redis ms) of the job next to run; 0 unknown
	// Started are the registry's entries read (expiry and job details);
	// StartedExpired and StartedLive count them all, read or not.
	Started                     []rqJob
	StartedExpired, StartedLive int64
	Scheduled, Overdue          int64
}

// readRQ reads the layout in three pipelined rounds: the sets; per queue
// LLEN and LINDEX 0 (RQ pushes right and pops left), the started
// registry (ZCOUNT of the expired part, and its entries, bounded), the
// scheduled registry (ZCARD, ZCOUNT of the overdue part), and EXISTS of
// each registered worker; then the job hashes of the next job and of the
// started entries read.
func readRQ(ctx context.Context, c redis.Cmdable, prefix string, queues []string, now, maxWait int64) (*rqRead, error) {
	out := &rqRead{Queues: map[string]*rqQueueRead{}}
	pipe := c.Pipeline()
	var qset *redis.StringSliceCmd
	if queues == nil {
		qset = pipe.SMembers(ctx, prefix+":queues")
	}
	wset := pipe.SMembers(ctx, prefix+":workers")
	if _, err := pipe.Exec(ctx); failed(err) {
		return nil, err
	}
	if qset != nil {
		if err := qset.Err(); err != nil {
			out.Bad = append(out.Bad, fmt.Sprintf("%s:queues is not a set: %v", prefix, err))
		} else {
			for _, k := range qset.Val() {
				if q, ok := strings.CutPrefix(k, prefix+":queue:"); ok {
					queues = append(queues, q)
				}
			}
		}
	}
	var workers []string
	if err := wset.Err(); err != nil {
		out.Bad = append(out.Bad, fmt.Sprintf("%s:workers is not a set: %v", prefix, err))
	} else {
		workers = wset.Val()
	}

	nowS := fmt.Sprintf("%d.%03d", now/1000, now%1000)
	due := "-inf"
	if now-maxWait > 0 {
		due = fmt.Sprintf("(%d.%03d", (now-maxWait)/1000, (now-maxWait)%1000)
	}
	type qcmds struct {
		llen                    *redis.IntCmd
		head                    *redis.StringCmd
		expired, startedCard    *redis.IntCmd
		started                 *redis.ZSliceCmd
		schedCard, schedOverdue *redis.IntCmd
	}
	pipe = c.Pipeline()
	cmds := make([]qcmds, len(queues))
	for i, q := range queues {
		wip, sched := prefix+":wip:"+q, prefix+":scheduled:"+q
		cmds[i] = qcmds{
			llen:         pipe.LLen(ctx, prefix+":queue:"+q),
			head:         pipe.LIndex(ctx, prefix+":queue:"+q, 0),
			expired:      pipe.ZCount(ctx, wip, "-inf", nowS),
			startedCard:  pipe.ZCard(ctx, wip),
			started:      pipe.ZRangeWithScores(ctx, wip, 0, rqStartedRead-1),
			schedCard:    pipe.ZCard(ctx, sched),
			schedOverdue: pipe.ZCount(ctx, sched, "-inf", due),
		}
	}
	alive := make([]*redis.IntCmd, len(workers))
	for i, w := range workers {
		alive[i] = pipe.Exists(ctx, w)
	}
	if _, err := pipe.Exec(ctx); failed(err) {
		return nil, err
	}
	for i := range workers {
		if alive[i].Val() > 0 {
			out.WorkersLive++
		} else {
			out.WorkersDead++
		}
	}

	pipe = c.Pipeline()
	heads := make([]*redis.StringCmd, len(queues))
	jobs := make([][]*redis.SliceCmd, len(queues))
	for i, q := range queues {
		cm := cmds[i]
		qr := &rqQueueRead{}
		n, err := cm.llen.Result()
		if err != nil {
			out.Bad = append(out.Bad, fmt.Sprintf("%s:queue:%s is not a list: %v", prefix, q, err))
		} else {
			qr.Waiting = n
			if id, err := cm.head.Result(); err == nil {
				heads[i] = pipe.HGet(ctx, prefix+":job:"+id, "enqueued_at")
			}
		}
		expired, err1 := cm.expired.Result()
		card, err2 := cm.startedCard.Result()
		entries, err3 := cm.started.Result()
		if err := errors.Join(err1, err2, err3); err != nil {
			out.Bad = append(out.Bad, fmt.Sprintf("%s:wip:%s is not a sorted set: %v", prefix, q, err))
		} else {
			qr.StartedExpired, qr.StartedLive = expired, card-expired
			for _, z := range entries {
				id, _ := z.Member.(string)
				if math.IsNaN(z.Score) || math.IsInf(z.Score, 0) {
					// RQ writes "+inf" only for registries without
					// expiry; a started job never expiring would never
					// be cleaned up.
					out.Bad = append(out.Bad, fmt.Sprintf("%s:wip:%s: job %s skipped: its score %v is not a finite expiry", prefix, q, id, z.Score))
					if z.Score > 0 {
						qr.StartedLive--
					} else {
						qr.StartedExpired--
					}
					continue
				}
				qr.Started = append(qr.Started, rqJob{ID: id, Queue: q, Expiry: int64(z.Score * 1000)})
				jobs[i] = append(jobs[i], pipe.HMGet(ctx, prefix+":job:"+id, "description", "started_at", "worker_name"))
			}
		}
		sc, err1 := cm.schedCard.Result()
		od, err2 := cm.schedOverdue.Result()
		if err := errors.Join(err1, err2); err != nil {
			out.Bad = append(out.Bad, fmt.Sprintf("%s:scheduled:%s is not a sorted set: %v", prefix, q, err))
		} else {
			qr.Scheduled, qr.Overdue = sc-od, od
		}
		out.Queues[q] = qr
	}
	if _, err := pipe.Exec(ctx); failed(err) {
		return nil, err
	}
	for i, q := range queues {
		qr := out.Queues[q]
		if h := heads[i]; h != nil {
			v, err := h.Result()
			switch {
			case errors.Is(err, redis.Nil):
				out.Bad = append(out.Bad, fmt.Sprintf("%s:queue:%s: the next job's hash is missing or has no enqueued_at", prefix, q))
			case err != nil:
				out.Bad = append(out.Bad, fmt.Sprintf("%s:queue:%s: the next job's hash is not a hash: %v", prefix, q, err))
			default:
				if at, err := parseRQTime(v); err != nil {
					out.Bad = append(out.Bad, fmt.Sprintf("%s:queue:%s: the next job's enqueued_at: %v", prefix, q, err))
				} else {
					qr.Oldest = at
				}
			}
		}
		for k, cmd := range jobs[i] {
			j := &qr.Started[k]
			vals, err := cmd.Result()
			if err != nil {
				out.Bad = append(out.Bad, fmt.Sprintf("%s:job:%s is not a hash: %v", prefix, j.ID, err))
				continue
			}
			if vals[0] == nil && vals[1] == nil && vals[2] == nil {
				out.Bad = append(out.Bad, fmt.Sprintf("%s:job:%s is missing (started in %s:wip:%s)", prefix, j.ID, prefix, q))
				continue
			}
			j.Description, _ = vals[0].(string)
			j.Worker, _ = vals[2].(string)
			if s, _ := vals[1].(string); s != "" {
				if at, err := parseRQTime(s); err == nil {
					j.StartedAt = at
				} else {
					out.Bad = append(out.Bad, fmt.Sprintf("%s:job:%s started_at: %v", prefix, j.ID, err))
				}
			}
		}
	}
	return out, nil
}
