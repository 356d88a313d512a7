package kind

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/redisread"
)

// rq reads the layout of RQ 1.13, learned from its source (rq/queue.py,
// registry.py, worker.py, worker_registration.py, job.py, scheduler.py).
// Under prefix p ("rq", hard-wired in RQ's classes), RQ keeps:
//
//   - p:queues, the set of p:queue:<q> keys (the discovery key), and each
//     p:queue:<q>, a list of job ids, RPUSHed and LPOPed: index 0 is next;
//   - p:job:<id>, the job hash (description, enqueued_at, started_at,
//     worker_name, status; times in utcformat);
//   - p:wip:<q>, the StartedJobRegistry: job id scored by an expiry in s,
//     now + min(job timeout left, job_monitoring_interval) + 60 at the
//     start and at every heartbeat of the worker holding it;
//   - p:scheduled:<q>, the ScheduledJobRegistry, scored by due time (s),
//     which a worker's scheduler (rq worker --with-scheduler) enqueues;
//   - p:workers, the set of p:worker:<name> keys, each a hash with a TTL
//     its worker's heartbeats renew.
//
// A worker killed mid-job leaves its entry in p:wip:<q>: past its expiry
// about a minute later, it stays there until a worker's registry cleanup
// (at most every 15 minutes per queue, under p:clean_registries:<q>)
// moves it to p:failed:<q>; nothing requeues it. Per queue:
//
//   - waiting: LLEN p:queue:<q>, aged by the next job's enqueued_at;
//   - orphaned: registry entries past their expiry, aged from started_at;
//   - active: the others, stuck once started more than max_hold ago;
//   - scheduled and overdue: p:scheduled:<q>, due more than max_wait ago
//     being overdue (no scheduler running).
//
// Workers: members of p:workers whose key exists are live, the others
// dead (the next worker's cleanup, or Worker.all, unregisters them). RQ
// loses no job that its registries do not show: slot_jobs_lost_total
// stays 0.
func init() { registerFramework(config.KindRQ, func() frameworkLayout { return &rqLayout{} }) }

// rqStartedRead bounds the StartedJobRegistry entries classified per
// queue and sweep (each is a job one worker holds); the rest are counted
// by ZCOUNT alone, active or orphaned by their score.
const rqStartedRead = 1000

type rqLayout struct {
	prefix           string
	maxWait, maxHold int64 // ms
	queues           []string
}

func (l *rqLayout) configure(f *config.Family) {
	l.prefix, l.maxWait, l.maxHold = f.Prefix, f.MaxWait.Milliseconds(), f.MaxHold.Milliseconds()
	l.queues = nil
	if len(f.Queues) > 0 {
		l.queues = append([]string(nil), f.Queues...)
	}
}

func (l *rqLayout) reads(now int64) redisread.Reads     { return &rqReads{l: l, now: now} }
func (l *rqLayout) settle([]*FrameworkRead, bool) int64 { return 0 }
func (l *rqLayout) registersWorkers() bool              { return true }
func (l *rqLayout) recovery() string {
	return "RQ never requeues a job whose worker died. A worker's registry cleanup (at most every 15 minutes per queue, when it takes the queue's cleaning lock) moves it from the StartedJobRegistry to the FailedJobRegistry; requeue it from there (rq requeue, or FailedJobRegistry.requeue)."
}

type rqReads struct {
	l   *rqLayout
	now int64
}

// rqQueue is one queue's commands, over two pipelined rounds.
type rqQueue struct {
	name                    string
	llen                    *redis.IntCmd
	head                    *redis.StringCmd
	expired, startedCard    *redis.IntCmd
	started                 *redis.ZSliceCmd
	schedCard, schedOverdue *redis.IntCmd
	headJob                 *redis.StringCmd
	headKey                 string
	jobs                    []*redis.SliceCmd
	entries                 []redis.Z
}

// Read reads, per discovery key (p:queues): its members and p:workers;
// then per queue LLEN and LINDEX 0, the started registry's expired count,
// size and first entries, the scheduled registry's size and overdue
// count, and EXISTS of each registered worker; then the next job's
// enqueued_at and the started jobs' hashes.
func (s *rqReads) Read(ctx context.Context, c redis.Cmdable, keys []string, reads []redisread.KeyRead) error {
	p := s.l.prefix
	for i, k := range keys {
		r := &reads[i]
		r.Key = k
		fr := &FrameworkRead{}
		pipe := c.Pipeline()
		qset := pipe.SMembers(ctx, k)
		wset := pipe.SMembers(ctx, p+":workers")
		_, _ = pipe.Exec(ctx)
		if err := qset.Err(); err != nil {
			if err := r.Judge(err); err != nil {
				return err
			}
			continue
		}
		names := s.l.queues
		if names == nil {
			for _, m := range qset.Val() {
				if q, ok := strings.CutPrefix(m, p+":queue:"); ok {
					names = append(names, q)
				}
			}
		}
		var workers []string
		if ok, err := partJudge(r, fr, p+":workers", wset.Err()); err != nil {
			return err
		} else if ok {
			workers = wset.Val()
		}

		now := fmt.Sprintf("%d.%03d", s.now/1000, s.now%1000)
		due := "-inf"
		if s.now-s.l.maxWait > 0 {
			due = fmt.Sprintf("(%d.%03d", (s.now-s.l.maxWait)/1000, (s.now-s.l.maxWait)%1000)
		}
		pipe = c.Pipeline()
		qs := make([]*rqQueue, len(names))
		for j, q := range names {
			wip, sched := p+":wip:"+q, p+":scheduled:"+q
			qs[j] = &rqQueue{
				name:         q,
				llen:         pipe.LLen(ctx, p+":queue:"+q),
				head:         pipe.LIndex(ctx, p+":queue:"+q, 0),
				expired:      pipe.ZCount(ctx, wip, "-inf", now),
				startedCard:  pipe.ZCard(ctx, wip),
				started:      pipe.ZRangeWithScores(ctx, wip, 0, rqStartedRead-1),
				schedCard:    pipe.ZCard(ctx, sched),
				schedOverdue: pipe.ZCount(ctx, sched, "-inf", due),
			}
		}
		alive := make([]*redis.IntCmd, len(workers))
		for j, w := range workers {
			alive[j] = pipe.Exists(ctx, w)
		}
		_, _ = pipe.Exec(ctx)
		for j, w := range workers {
			if ok, err := partJudge(r, fr, w, alive[j].Err()); err != nil {
				return err
			} else if ok && alive[j].Val() > 0 {
				fr.Workers[WorkerLive]++
			} else if ok {
				fr.Workers[WorkerDead]++
			}
		}

		pipe = c.Pipeline()
		results := make([]QueueJobs, len(qs))
		for j, q := range qs {
			if err := s.first(ctx, pipe, r, fr, q, &results[j]); err != nil {
				return err
			}
		}
		_, _ = pipe.Exec(ctx)
		for j, q := range qs {
			if err := s.second(r, fr, q, &results[j]); err != nil {
				return err
			}
		}
		if r.Status != redisread.OK {
			continue
		}
		fr.Queues = results
		r.Extra = fr
	}
	return nil
}

// first takes a queue's counts and queues the reads of its job hashes.
func (s *rqReads) first(ctx context.Context, pipe redis.Pipeliner, r *redisread.KeyRead, fr *FrameworkRead, q *rqQueue, out *QueueJobs) error {
	p := s.l.prefix
	*out = NewQueueJobs(q.name)
	qkey, wip, sched := p+":queue:"+q.name, p+":wip:"+q.name, p+":scheduled:"+q.name
	if ok, err := partJudge(r, fr, qkey, q.llen.Err()); err != nil {
		return err
	} else if ok {
		out.Jobs[JobWaiting] = q.llen.Val()
		if id, err := q.head.Result(); err == nil {
			q.headKey = p + ":job:" + id
			q.headJob = pipe.HGet(ctx, q.headKey, "enqueued_at")
		}
	}
	okAll := true
	for _, cmd := range []redis.Cmder{q.expired, q.startedCard, q.started} {
		ok, err := partJudge(r, fr, wip, cmd.Err())
		if err != nil {
			return err
		}
		okAll = okAll && ok
	}
	if okAll {
		// Entries not read count by their score: orphaned past it.
		expired, card := q.expired.Val(), q.startedCard.Val()
		for _, z := range q.started.Val() {
			id, _ := z.Member.(string)
			if math.IsNaN(z.Score) || math.IsInf(z.Score, 0) {
				// RQ writes +inf only in registries without expiry: a
				// started job that never expires would never be cleaned.
				fr.Bad = append(fr.Bad, BadData{Key: wip, Reason: redisread.SkipBadValue,
					Detail: fmt.Sprintf("job %s: score %v is not a finite expiry", id, z.Score)})
			} else {
				q.entries = append(q.entries, z)
				q.jobs = append(q.jobs, pipe.HMGet(ctx, p+":job:"+id, "description", "started_at", "worker_name"))
			}
			if z.Score <= float64(s.now)/1000 {
				expired--
			}
			card--
		}
		out.Jobs[JobOrphaned] += max(expired, 0)
		out.Jobs[JobActive] += max(card-max(expired, 0), 0)
	}
	ok1, err := partJudge(r, fr, sched, q.schedCard.Err())
	if err != nil {
		return err
	}
	ok2, err := partJudge(r, fr, sched, q.schedOverdue.Err())
	if err != nil {
		return err
	}
	if ok1 && ok2 {
		out.Jobs[JobOverdue] = q.schedOverdue.Val()
		out.Jobs[JobScheduled] = q.schedCard.Val() - q.schedOverdue.Val()
	}
	return nil
}

// second classifies the started entries read and dates the next job.
func (s *rqReads) second(r *redisread.KeyRead, fr *FrameworkRead, q *rqQueue, out *QueueJobs) error {
	p := s.l.prefix
	if q.headJob != nil {
		v, err := q.headJob.Result()
		ok, ferr := partJudge(r, fr, q.headKey, err)
		switch {
		case ferr != nil:
			return ferr
		case ok:
			if at, err := parseRQTime(v); err != nil {
				fr.Bad = append(fr.Bad, BadData{Key: q.headKey, Reason: redisread.SkipBadValue, Detail: "enqueued_at: " + err.Error()})
			} else {
				out.Waited(at)
			}
		case isNil(err):
			fr.Bad = append(fr.Bad, BadData{Key: q.headKey, Reason: redisread.SkipBadValue,
				Detail: fmt.Sprintf("the next job of %s:queue:%s has no hash, or no enqueued_at", p, q.name), Vanished: true})
		}
	}
	for k, z := range q.entries {
		id, _ := z.Member.(string)
		key := p + ":job:" + id
		v, err := q.jobs[k].Result()
		ok, ferr := partJudge(r, fr, key, err)
		if ferr != nil {
			return ferr
		}
		if !ok {
			continue
		}
		if v[0] == nil && v[1] == nil && v[2] == nil {
			fr.Bad = append(fr.Bad, BadData{Key: key, Reason: redisread.SkipBadValue,
				Detail: fmt.Sprintf("job %s is in %s:wip:%s but its hash is missing, or holds none of description, started_at and worker_name", id, p, q.name), Vanished: true})
			continue
		}
		started := int64(-1)
		if st := hashStr(v[1]); st != "" {
			if at, err := parseRQTime(st); err == nil {
				started = at
			} else {
				fr.Bad = append(fr.Bad, BadData{Key: key, Reason: redisread.SkipBadValue, Detail: "started_at: " + err.Error()})
			}
		}
		switch {
		case z.Score <= float64(s.now)/1000:
			out.AddOrphan(Job{ID: id, Name: hashStr(v[0]), Started: started, Attempts: 1})
		case started >= 0 && s.now-started > s.l.maxHold:
			out.Jobs[JobStuck]++
		default:
			out.Jobs[JobActive]++
		}
	}
	return nil
}
