// Package listqueue is the cookbook's reliable queue on Redis lists: a job
// taken by a worker that dies is not lost, and can be given back.
//
// # Protocol
//
// A queue is a list; each queue has its own processing list (by default the
// queue's key + ":processing") and one lease key per job being worked on
// (the processing list's key + ":lease:" + the job).
//
//   - Produce: LPUSH queue job. Jobs are strings; they must be unique (carry
//     an id), since completion removes a job by value.
//   - Take: BLMOVE queue processing RIGHT LEFT timeout, then
//     SET lease 1 PX lease_ttl. The job moves atomically from the queue's
//     pop side into the processing list: at no moment is it only in the
//     worker's memory. The processing list's right end holds the oldest
//     job still being worked on.
//   - Extend, for jobs that take longer than the lease: PEXPIRE lease
//     lease_ttl. The lease is the worker's sign of life.
//   - Complete: one Lua script, LREM processing 1 job and DEL lease.
//   - Reap, from a housekeeping loop: a job in the processing list whose
//     lease is gone belonged to a worker that died (or overran its lease
//     without extending). The reaper moves it back to the queue's pop side,
//     so it is taken next. A job is moved back only when it was seen
//     without a lease at two consecutive Reap calls, so that a worker
//     between its BLMOVE and its lease write is never robbed; the move
//     itself is one Lua script that re-checks the lease. Delivery is at
//     least once: a job whose worker overran its lease may run twice, and
//     that worker's Complete then reports false.
//
// All keys of one queue must live in one Redis Cluster slot: give them a
// hash tag, e.g. "queue:mail:{u7}", whose processing list is
// "queue:mail:{u7}:processing".
//
// # How the recipe fails when it is done otherwise
//
//   - LPUSH + BRPOP (no processing list): a worker that dies after the pop
//     loses the job for good, and nothing in Redis shows it.
//   - A queue nobody consumes: its next job stays next, and the queue grows.
//   - A processing list with no reaper: a job whose worker died stays in it
//     forever; it is the list's oldest element, and it never moves.
//
// slot_exporter's `list` kind reads LLEN and LINDEX of the pop side: a
// queue whose next element stays next for longer than max_wait has stalled;
// a processing list watched as its own family shows a dead worker's job the
// same way.
package listqueue

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed complete.lua
	completeLua string
	//go:embed requeue.lua
	requeueLua string

	completeScript = redis.NewScript(completeLua)
	requeueScript  = redis.NewScript(requeueLua)
)

// Defaults.
const (
	DefaultLeaseTTL  = 30 * time.Second
	ProcessingSuffix = ":processing"
	leaseInfix       = ":lease:"
	DefaultReapScan  = 1000
)

// Options configures a Queue.
type Options struct {
	// Key is the queue's list (required).
	Key string
	// ProcessingKey is its processing list (default Key + ":processing").
	ProcessingKey string
	// LeaseTTL is how long a taken job's lease lasts without Extend
	// (default 30s; at least 1ms).
	LeaseTTL time.Duration
}

// Queue is one reliable queue. It is safe for concurrent use.
type Queue struct {
	c          redis.UniversalClient
	key        string
	processing string
	lease      time.Duration
}

// New returns the queue o describes, using c.
func New(c redis.UniversalClient, o Options) (*Queue, error) {
	if c == nil {
		return nil, errors.New("listqueue: nil client")
	}
	if o.Key == "" {
		return nil, errors.New("listqueue: empty queue key")
	}
	if o.ProcessingKey == "" {
		o.ProcessingKey = o.Key + ProcessingSuffix
	}
	if o.ProcessingKey == o.Key {
		return nil, fmt.Errorf("listqueue: processing list %q is the queue itself", o.Key)
	}
	switch {
	case o.LeaseTTL == 0:
		o.LeaseTTL = DefaultLeaseTTL
	case o.LeaseTTL < time.Millisecond:
		return nil, fmt.Errorf("listqueue: lease ttl %v must be at least 1ms", o.LeaseTTL)
	}
	return &Queue{c: c, key: o.Key, processing: o.ProcessingKey, lease: o.LeaseTTL.Truncate(time.Millisecond)}, nil
}

// Key returns the queue's key.
func (q *Queue) Key() string { return q.key }

// ProcessingKey returns the processing list's key.
func (q *Queue) ProcessingKey() string { return q.processing }

// LeaseKey returns the key of job's lease.
func (q *Queue) LeaseKey(job string) string { return q.processing + leaseInfix + job }

// LeaseTTL returns the lease length.
func (q *Queue) LeaseTTL() time.Duration { return q.lease }

// Push adds jobs at the queue's tail (LPUSH): they are taken after every
// job already queued, first pushed first taken. It returns the queue's
// length after the push. Empty jobs are refused.
func (q *Queue) Push(ctx context.Context, jobs ...string) (int64, error) {
	if len(jobs) == 0 {
		return 0, errors.New("listqueue: push of no jobs")
	}
	args := make([]any, len(jobs))
	for i, j := range jobs {
		if j == "" {
			return 0, errors.New("listqueue: empty job")
		}
		args[i] = j
	}
	n, err := q.c.LPush(ctx, q.key, args...).Result()
	if err != nil {
		return 0, fmt.Errorf("listqueue: push %s: %w", q.key, err)
	}
	return n, nil
}

// Take waits up to timeout for a job, moves it into the processing list
// and writes its lease. ok is false when the timeout passed with the queue
// empty. A timeout of 0 waits for ever. A timeout that is not a whole
// number of seconds must stay below the client's ReadTimeout (go-redis
// extends the read deadline only for whole-second blocking commands).
//
// An error with ok true means the job was taken but its lease could not be
// written: the worker may process it, and a reaper will also give it back.
func (q *Queue) Take(ctx context.Context, timeout time.Duration) (job string, ok bool, err error) {
	if timeout < 0 {
		return "", false, fmt.Errorf("listqueue: negative timeout %v", timeout)
	}
	var cmd *redis.StringCmd
	if timeout%time.Second == 0 {
		cmd = q.c.BLMove(ctx, q.key, q.processing, "RIGHT", "LEFT", timeout)
	} else {
		secs := strconv.FormatFloat(timeout.Seconds(), 'f', 3, 64)
		cmd = redis.NewStringCmd(ctx, "blmove", q.key, q.processing, "RIGHT", "LEFT", secs)
		_ = q.c.Process(ctx, cmd)
	}
	job, err = cmd.Result()
	switch {
	case errors.Is(err, redis.Nil):
		return "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("listqueue: take from %s: %w", q.key, err)
	}
	// A worker that dies right here leaves a job without a lease: the
	// reaper gives it back, which is what should happen to it.
	if err := q.c.Set(ctx, q.LeaseKey(job), 1, q.lease).Err(); err != nil {
		return job, true, fmt.Errorf("listqueue: lease of a job taken from %s: %w", q.key, err)
	}
	return job, true, nil
}

// Extend renews job's lease. false means the lease was gone: a reaper may
// already have given the job back, and the worker should expect its
// Complete to report false.
func (q *Queue) Extend(ctx context.Context, job string) (bool, error) {
	ok, err := q.c.PExpire(ctx, q.LeaseKey(job), q.lease).Result()
	if err != nil {
		return false, fmt.Errorf("listqueue: extend a job of %s: %w", q.key, err)
	}
	return ok, nil
}

// Complete removes a finished job from the processing list and drops its
// lease. false means the job was not in the processing list: a reaper gave
// it back to the queue after its lease ran out.
func (q *Queue) Complete(ctx context.Context, job string) (bool, error) {
	n, err := completeScript.Run(ctx, q.c, []string{q.processing, q.LeaseKey(job)}, job).Int64()
	if err != nil {
		return false, fmt.Errorf("listqueue: complete a job of %s: %w", q.key, err)
	}
	return n == 1, nil
}

// Reaper gives the jobs of dead workers back to their queue. It remembers
// what it saw at its previous Reap, so keep one Reaper per housekeeping
// loop. It is safe for concurrent use.
type Reaper struct {
	q        *Queue
	scan     int64
	mu       sync.Mutex
	suspects map[string]bool
}

// NewReaper returns a Reaper that looks at the scan oldest jobs of the
// processing list at each Reap (default 1000 when scan <= 0).
func (q *Queue) NewReaper(scan int) *Reaper {
	if scan <= 0 {
		scan = DefaultReapScan
	}
	return &Reaper{q: q, scan: int64(scan), suspects: map[string]bool{}}
}

// Reap moves back to the queue every job that was in the processing list
// without a lease at this call and at the previous one, and returns them.
// Call it at an interval well above one round trip to Redis (a worker's
// lease is written one round trip after its BLMOVE) and below the time a
// dead worker's job may wait: LeaseTTL or so.
func (r *Reaper) Reap(ctx context.Context) ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	q := r.q
	jobs, err := q.c.LRange(ctx, q.processing, -r.scan, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("listqueue: reap %s: %w", q.processing, err)
	}
	pipe := q.c.Pipeline()
	exists := make([]*redis.IntCmd, len(jobs))
	for i, j := range jobs {
		exists[i] = pipe.Exists(ctx, q.LeaseKey(j))
	}
	if len(jobs) > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("listqueue: reap %s: leases: %w", q.processing, err)
		}
	}
	leaseless := map[string]bool{}
	var requeued []string
	for i, j := range jobs {
		if exists[i].Val() != 0 {
			continue
		}
		if !r.suspects[j] {
			leaseless[j] = true
			continue
		}
		n, err := requeueScript.Run(ctx, q.c, []string{q.processing, q.key, q.LeaseKey(j)}, j).Int64()
		if err != nil {
			r.suspects = leaseless
			return requeued, fmt.Errorf("listqueue: reap %s: requeue: %w", q.processing, err)
		}
		if n == 1 {
			requeued = append(requeued, j)
		}
	}
	r.suspects = leaseless
	return requeued, nil
}
