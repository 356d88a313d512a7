package demo

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

func init() { workloads = append(workloads, frameworks{}) }

// frameworks is one queue in each of the BullMQ, RQ and Sidekiq layouts,
// written as those frameworks write them (the kinds' tests prove the
// layouts against the real ones). Each has a producer adding a job every
// second, a healthy worker that keeps an 8 s backlog (waiting longer than
// max_wait) and finishes its jobs in 2 s, and a 30 s cycle:
//
//   - 0 s: a long job starts, stuck from 10 s (max_hold) until it ends at
//     25 s;
//   - 1 s: a worker starts, takes a job and is killed: BullMQ's job is
//     orphaned when its lock expires (4 s) until a healthy worker's
//     stalled check fails it (25 s); RQ's worker (last heartbeat at 2 s)
//     is dead and its job orphaned from about 5 s, until the next worker
//     to start (31 s) unregisters it and moves the job to failed;
//     Sidekiq's process (last beat at 3 s) dies with its job, which is
//     lost when its hashes expire (about 6 s), and stays listed as dead
//     until the live process's poller prunes it (31 s);
//   - every second a job is scheduled 1 s ahead that nothing promotes:
//     overdue 5 s (max_wait) after it is due, and dropped 20 s after, so
//     that the sets stay small.
//
// Keys expire in seconds where the frameworks take a minute, so that each
// failure shows within the demo's minute.
type frameworks struct{}

func (frameworks) families() string {
	return `  - name: bull_jobs
    kind: bullmq
    max_wait: 5s
    max_hold: 10s
  - name: rq_jobs
    kind: rq
    max_wait: 5s
    max_hold: 10s
  - name: sidekiq_jobs
    kind: sidekiq
    prefix: shop
    max_wait: 5s
    max_hold: 10s
`
}

const (
	fwCycle   = 30  // s
	fwLongEnd = 25  // s into the cycle
	fwBacklog = 8e3 // ms a job waits before the healthy worker takes it
	fwWork    = 2e3 // ms a healthy job takes
	fwLease   = 3e3 // ms: locks, worker keys, heartbeats
)

func (frameworks) start(ctx context.Context, c *redis.Client) (running, error) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		var s fwSim
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for n := 0; ; n++ {
			pipe := c.Pipeline()
			s.tick(ctx, pipe, n, time.Now().UnixMilli())
			_, _ = pipe.Exec(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return stopFunc(func() { cancel(); <-done }), nil
}

type stopFunc func()

func (f stopFunc) Stop() { f() }

// fwJob is a job the simulation keeps track of: enqueued at, in hand
// until end (ms); payload is Sidekiq's, the list element itself.
type fwJob struct {
	id      string
	at, end int64
	payload string
}

// fwDone is a finished BullMQ job, listed in set (completed or failed)
// since at (ms).
type fwDone struct {
	id, set string
	at      int64
}

// fwQueue is one framework's queue as its producer and healthy worker see
// it.
type fwQueue struct {
	waiting, held []fwJob
}

// step returns the waiting jobs the healthy worker takes at now (those
// that waited the backlog), and the held jobs it finishes.
func (q *fwQueue) step(now int64) (taken, finished []fwJob) {
	for len(q.waiting) > 0 && now-q.waiting[0].at >= fwBacklog {
		j := q.waiting[0]
		q.waiting = q.waiting[1:]
		j.end = now + fwWork
		taken = append(taken, j)
		q.held = append(q.held, j)
	}
	kept := q.held[:0]
	for _, j := range q.held {
		if j.end <= now {
			finished = append(finished, j)
		} else {
			kept = append(kept, j)
		}
	}
	q.held = kept
	return taken, finished
}

// fwSim is the simulation's memory: each queue, and when the current
// cycle's long job and dying worker's job started (ms).
type fwSim struct {
	bull, rq, sk        fwQueue
	longStart, dieStart int64
	// bullDone are BullMQ's finished jobs, oldest first.
	bullDone []fwDone
}

func (s *fwSim) tick(ctx context.Context, p redis.Pipeliner, n int, now int64) {
	phase := n % fwCycle
	switch phase {
	case 0:
		s.longStart = now
	case 1:
		s.dieStart = now
	}
	s.bullTick(ctx, p, n, phase, now)
	s.rqTick(ctx, p, n, phase, now)
	s.sidekiqTick(ctx, p, n, phase, now)
}

const fwLeaseDur = fwLease * time.Millisecond

// BullMQ: queue "mail" under prefix bull. The job ids are the tick's
// (BullMQ's come from INCR of bull:mail:id, INCRed here too: it is also
// the discovery key).
func (s *fwSim) bullTick(ctx context.Context, p redis.Pipeliner, n, phase int, now int64) {
	const b = "bull:mail:"
	id := strconv.Itoa(n)
	start := func(id string) {
		p.LRem(ctx, b+"wait", 1, id)
		p.LPush(ctx, b+"active", id)
		p.HSet(ctx, b+id, "processedOn", now, "attemptsMade", 1)
		p.Set(ctx, b+id+":lock", "worker-token", fwLeaseDur)
	}
	// A finished job's hash stays while it is listed in completed (or
	// failed), and goes 10 s later (removeOnComplete: {age: 10}): a
	// sweep that read its id in active still finds its hash.
	end := func(id, set string) {
		p.LRem(ctx, b+"active", 1, id)
		p.Del(ctx, b+id+":lock")
		p.HSet(ctx, b+id, "finishedOn", now)
		p.ZAdd(ctx, b+set, redis.Z{Score: float64(now), Member: id})
		s.bullDone = append(s.bullDone, fwDone{id: id, set: set, at: now})
	}
	for len(s.bullDone) > 0 && now-s.bullDone[0].at > 10_000 {
		j := s.bullDone[0]
		s.bullDone = s.bullDone[1:]
		p.ZRem(ctx, b+j.set, j.id)
		p.Del(ctx, b+j.id)
	}
	p.Incr(ctx, b+"id")
	p.HSet(ctx, b+id, "name", "send-mail", "timestamp", now, "delay", 0, "attemptsMade", 0)
	p.LPush(ctx, b+"wait", id)
	s.bull.waiting = append(s.bull.waiting, fwJob{id: id, at: now})
	taken, finished := s.bull.step(now)
	for _, j := range taken {
		start(j.id)
	}
	for _, j := range s.bull.held {
		p.PExpire(ctx, b+j.id+":lock", fwLeaseDur)
	}
	for _, j := range finished {
		end(j.id, "completed")
	}
	long := "long-" + strconv.Itoa(n-phase)
	switch {
	case phase == 0:
		p.HSet(ctx, b+long, "name", "build-report", "timestamp", now)
		start(long)
	case phase < fwLongEnd:
		p.PExpire(ctx, b+long+":lock", fwLeaseDur)
	case phase == fwLongEnd:
		end(long, "completed")
	}
	switch phase {
	case 1:
		// The dying worker's job: its lock is never renewed.
		p.HSet(ctx, b+"dies-"+id, "name", "send-mail", "timestamp", now)
		start("dies-" + id)
	case fwLongEnd:
		// A healthy worker's stalled check finds it without a lock, and
		// fails it (past maxStalledCount).
		end("dies-"+strconv.Itoa(n-fwLongEnd+1), "failed")
	}
	// Delayed, nothing promotes them: scored due (ms) * 0x1000 + a
	// counter; dropped 20 s after due.
	p.ZAdd(ctx, b+"delayed", redis.Z{Score: float64((now+1000)*0x1000 + int64(n%0x1000)), Member: "d" + id})
	p.HSet(ctx, b+"d"+id, "name", "digest", "timestamp", now, "delay", 1000)
	old := "d" + strconv.Itoa(n-21)
	p.ZRem(ctx, b+"delayed", old)
	p.Del(ctx, b+old)
}

// RQ: queue "default" under prefix rq; times in RQ's utcformat, registry
// scores in seconds.
func (s *fwSim) rqTick(ctx context.Context, p redis.Pipeliner, n, phase int, now int64) {
	iso := func(ms int64) string { return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000000Z") }
	sec := func(ms int64) float64 { return float64(ms) / 1000 }
	const q, wip = "rq:queue:default", "rq:wip:default"
	id := strconv.Itoa(n)
	worker := func(name string) {
		p.SAdd(ctx, "rq:workers", "rq:worker:"+name)
		p.HSet(ctx, "rq:worker:"+name, "last_heartbeat", iso(now), "queues", "default", "state", "busy")
		p.PExpire(ctx, "rq:worker:"+name, fwLeaseDur)
	}
	// Taking a job, and each heartbeat of its worker, sets its registry
	// score to when it is given up for lost.
	hold := func(job string) { p.ZAdd(ctx, wip, redis.Z{Score: sec(now + fwLease), Member: job}) }
	begin := func(job, name string) {
		hold(job)
		p.HSet(ctx, "rq:job:"+job, "started_at", iso(now), "worker_name", name, "status", "started")
	}
	p.SAdd(ctx, "rq:queues", q)
	p.HSet(ctx, "rq:job:"+id, "description", "tasks.send_mail()", "enqueued_at", iso(now), "status", "queued")
	p.RPush(ctx, q, id)
	s.rq.waiting = append(s.rq.waiting, fwJob{id: id, at: now})
	worker("healthy")
	worker("reports")
	taken, finished := s.rq.step(now)
	for _, j := range taken {
		p.LRem(ctx, q, 1, j.id)
		begin(j.id, "healthy")
	}
	for _, j := range s.rq.held {
		hold(j.id)
	}
	for _, j := range finished {
		p.ZRem(ctx, wip, j.id)
		p.HSet(ctx, "rq:job:"+j.id, "status", "finished")
		p.PExpire(ctx, "rq:job:"+j.id, 10*time.Second) // result_ttl
	}
	long := "long-" + strconv.Itoa(n-phase)
	switch {
	case phase == 0:
		p.HSet(ctx, "rq:job:"+long, "description", "tasks.build_report()", "enqueued_at", iso(now))
		begin(long, "reports")
	case phase < fwLongEnd:
		hold(long)
	case phase == fwLongEnd:
		p.ZRem(ctx, wip, long)
		p.HSet(ctx, "rq:job:"+long, "status", "finished")
		p.PExpire(ctx, "rq:job:"+long, 10*time.Second)
	}
	switch phase {
	case 1:
		// A worker starting unregisters the dead ones (Worker.all) and
		// cleans the started registry, moving the jobs past their expiry
		// to failed: those of the last cycle's dying worker.
		// The job's hash stays (failure_ttl, 10 s here): a sweep that
		// read it in the registry still finds it.
		last := "dies-" + strconv.Itoa(n-fwCycle)
		p.SRem(ctx, "rq:workers", "rq:worker:"+last)
		p.ZRem(ctx, wip, last)
		p.ZAdd(ctx, "rq:failed:default", redis.Z{Score: sec(now + 10_000), Member: last})
		p.HSet(ctx, "rq:job:"+last, "status", "failed", "exc_info", "Moved to FailedJobRegistry: abandoned")
		p.PExpire(ctx, "rq:job:"+last, 10*time.Second)
		p.ZRemRangeByScore(ctx, "rq:failed:default", "-inf", "("+strconv.FormatFloat(sec(now), 'f', 3, 64))
		name := "dies-" + id
		worker(name)
		p.HSet(ctx, "rq:job:"+name, "description", "tasks.send_mail()", "enqueued_at", iso(now))
		begin(name, name)
	case 2:
		// Its last heartbeat: it is killed before the next.
		name := "dies-" + strconv.Itoa(n-1)
		worker(name)
		hold(name)
	}
	// Scheduled with no scheduler running: dropped 20 s after due.
	p.ZAdd(ctx, "rq:scheduled:default", redis.Z{Score: sec(now + 1000), Member: "s" + id})
	p.ZRem(ctx, "rq:scheduled:default", "s"+strconv.Itoa(n-21))
}

// Sidekiq: queue "default" under the namespace "shop"; each process's
// heartbeat hash and work hash expire together, as with Sidekiq's 60 s
// TTL.
func (s *fwSim) sidekiqTick(ctx context.Context, p redis.Pipeliner, n, phase int, now int64) {
	const ns = "shop:"
	sec := func(ms int64) string { return fmt.Sprintf("%d.%03d", ms/1000, ms%1000) }
	payload := func(class, jid string, enq int64) string {
		return fmt.Sprintf(`{"queue":"default","class":%q,"jid":%q,"enqueued_at":%s}`, class, jid, sec(enq))
	}
	inHand := func(job string, started int64) string {
		return fmt.Sprintf(`{"queue":"default","payload":%q,"run_at":%d}`, job, started/1000)
	}
	beat := func(identity string, work map[string]string) {
		p.SAdd(ctx, ns+"processes", identity)
		p.HSet(ctx, ns+identity, "beat", sec(now), "busy", len(work), "quiet", "false")
		p.Del(ctx, ns+identity+":workers")
		for tid, w := range work {
			p.HSet(ctx, ns+identity+":workers", tid, w)
		}
		p.PExpire(ctx, ns+identity, fwLeaseDur)
		p.PExpire(ctx, ns+identity+":workers", fwLeaseDur)
	}
	id := strconv.Itoa(n)
	p.SAdd(ctx, ns+"queues", "default")
	job := payload("MailJob", id, now)
	p.LPush(ctx, ns+"queue:default", job)
	s.sk.waiting = append(s.sk.waiting, fwJob{id: id, at: now, payload: job})
	taken, _ := s.sk.step(now)
	for _, j := range taken {
		p.LRem(ctx, ns+"queue:default", 1, j.payload)
	}
	work := map[string]string{}
	for _, j := range s.sk.held {
		work["tid-"+j.id] = inHand(j.payload, j.end-fwWork)
	}
	if phase < fwLongEnd {
		work["tid-long"] = inHand(payload("ReportJob", "long-"+strconv.Itoa(n-phase), s.longStart), s.longStart)
	}
	beat("web.1:1:healthy", work)
	if phase == 1 {
		// The live process's poller prunes the last dead one.
		p.SRem(ctx, ns+"processes", "web.2:1:dies-"+strconv.Itoa(n-fwCycle))
	}
	if phase >= 1 && phase <= 3 {
		// Beats until it is killed, after its third: sweeps see its job
		// in hand.
		born := n - phase + 1
		beat("web.2:1:dies-"+strconv.Itoa(born), map[string]string{
			"tid-0": inHand(payload("MailJob", "lost-"+strconv.Itoa(born), s.dieStart), s.dieStart),
		})
	}
	// Scheduled with no poller: dropped 20 s after due.
	p.ZAdd(ctx, ns+"schedule", redis.Z{Score: float64(now+1000) / 1000, Member: payload("DigestJob", "s"+id, now)})
	p.ZRemRangeByScore(ctx, ns+"schedule", "-inf", "("+strconv.FormatFloat(float64(now-20_000)/1000, 'f', 3, 64))
}
