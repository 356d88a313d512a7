// Package listqueue is the cookbook's reliable queue on Redis lists: a job
// taken by a worker that dies is not lost, and can be given back.
//
// # Protocol
//
// A queue is a list; each queue has its own processing list (by default the
// queue's key + ":processing") and one lease key per job being worked on
// (the processing list's key + ":lease:" + the job). A lease's value is the
// token of the take that holds it: a random value drawn at each Take, which
// no other take can guess.
//
//   - Produce: LPUSH queue job. Jobs are strings; they must be unique (carry
//     an id), since completion removes a job by value.
//   - Take: BLMOVE queue processing RIGHT LEFT timeout, then
//     SET lease token PX lease_ttl. The job moves atomically from the queue's
//     pop side into the processing list: at no moment is it only in the
//     worker's memory. The processing list's right end holds the oldest
//     job still being worked on. The worker keeps the job and the token
//     (a Taken).
//   - Extend, for jobs that take longer than the lease: one Lua script,
//     if GET lease == token then PEXPIRE lease lease_ttl. The lease is the
//     worker's sign of life; a worker whose Extend returns false has lost
//     the job.
//   - Complete: one Lua script. If the lease holds another value (a later
//     take's token, or a reaper's mark), the job is someone else's: nothing
//     changes and Complete reports false. Otherwise (the lease holds the
//     token, or it ran out and nobody gave the job back yet) LREM
//     processing 1 job and DEL lease; Complete reports whether the job was
//     still in the processing list.
//   - Reap, from a housekeeping loop: a job in the processing list whose
//     lease is gone belonged to a worker that died (or overran its lease
//     without extending). The reaper moves it back to the queue's pop side,
//     so it is taken next. A job is moved back only when it was seen
//     without a lease at two consecutive Reap calls, so that a worker
//     between its BLMOVE and its lease write is never robbed; the move
//     itself is one Lua script that re-checks the lease and leaves a mark
//     (a value no token equals) as the job's lease for lease_ttl, so that
//     the overrunning worker cannot complete the job even while the next
//     take is between its BLMOVE and its lease write. Delivery is at
//     least once: a job whose worker overran its lease may run twice, and
//     once the job was given back that worker's Extend and Complete report
//     false and change nothing; the next take's lease and processing entry
//     are left alone. (One window is left: a job that waited in the queue
//     longer than lease_ttl has lost its mark, and an overrunning Complete
//     that lands between the next take's BLMOVE and its lease write still
//     removes it, as a dead worker's would; that takes an overrun of two
//     Reap intervals plus lease_ttl.)
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
//   - A lease with no token (SET lease 1, PEXPIRE and DEL by job alone): a
//     worker that overran its lease, after the reaper gave its job back
//     and another worker took it, renews the new lease and completes the
//     job under the new worker, removing its processing entry and lease;
//     if that worker then dies, the job is gone with no trace.
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

	"github.com/slotexporter/slot_exporter/recipe/internal/token"
)

var (
	//go:embed complete.lua
	completeLua string
	//go:embed extend.lua
	extendLua string
	//go:embed requeue.lua
	requeueLua string

	completeScript = redis.NewScript(completeLua)
	extendScript   = redis.NewScript(extendLua)
	requeueScript  = redis.NewScript(requeueLua)
)

// Defaults.
const (
	DefaultLeaseTTL  = 30 * time.Second
	ProcessingSuffix = ":processing"
	leaseInfix       = ":lease:"
	DefaultReapScan  = 1000
	// ReapedMark is the lease a reaper leaves on a job it gave back, for
	// LeaseTTL: no take's token equals it (tokens are hex).
	ReapedMark = "reaped"
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

// Taken is a job a worker took, with the token of that take: Extend and
// Complete act only while the job's lease holds it (or, for Complete, while
// its lease ran out but nobody gave the job back).
type Taken struct {
	Job   string
	Token string
}

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
// and writes its lease, holding a fresh token. ok is false when the timeout
// passed with the queue empty. A timeout of 0 waits for ever. A timeout
// that is not a whole number of seconds must stay below the client's
// ReadTimeout (go-redis extends the read deadline only for whole-second
// blocking commands).
//
// An error with ok true means the job was taken but its lease could not be
// written: the worker may process it (its Complete succeeds while the job
// is still in the processing list), and a reaper will also give it back.
func (q *Queue) Take(ctx context.Context, timeout time.Duration) (t Taken, ok bool, err error) {
	if timeout < 0 {
		return Taken{}, false, fmt.Errorf("listqueue: negative timeout %v", timeout)
	}
	// Unique per take, so that a worker can only ever extend or complete
	// its own take; drawn before the job is moved, so that a worker
	// holding a job always has its token.
	tok, err := token.New()
	if err != nil {
		return Taken{}, false, fmt.Errorf("listqueue: token: %w", err)
	}
	var cmd *redis.StringCmd
	if timeout%time.Second == 0 {
		cmd = q.c.BLMove(ctx, q.key, q.processing, "RIGHT", "LEFT", timeout)
	} else {
		secs := strconv.FormatFloat(timeout.Seconds(), 'f', 3, 64)
		cmd = redis.NewStringCmd(ctx, "blmove", q.key, q.processing, "RIGHT", "LEFT", secs)
		_ = q.c.Process(ctx, cmd)
	}
	job, err := cmd.Result()
	switch {
	case errors.Is(err, redis.Nil):
		return Taken{}, false, nil
	case err != nil:
		return Taken{}, false, fmt.Errorf("listqueue: take from %s: %w", q.key, err)
	}
	t = Taken{Job: job, Token: tok}
	// A worker that dies right here leaves a job without a lease: the
	// reaper gives it back, which is what should happen to it. The write
	// replaces a reaper's mark.
	if err := q.c.Set(ctx, q.LeaseKey(job), tok, q.lease).Err(); err != nil {
		return t, true, fmt.Errorf("listqueue: lease of a job taken from %s: %w", q.key, err)
	}
	return t, true, nil
}

// Extend renews the lease of t's job to LeaseTTL from now if it still holds
// t's token. false means the lease was gone (it ran out, and a reaper may
// already have given the job back, to be taken again): nothing was
// changed, and the worker should expect its Complete to report false.
func (q *Queue) Extend(ctx context.Context, t Taken) (bool, error) {
	if err := check(t); err != nil {
		return false, err
	}
	n, err := extendScript.Run(ctx, q.c, []string{q.LeaseKey(t.Job)}, t.Token, q.lease.Milliseconds()).Int64()
	if err != nil {
		return false, fmt.Errorf("listqueue: extend a job of %s: %w", q.key, err)
	}
	return n == 1, nil
}

// Complete removes t's finished job from the processing list and drops its
// lease, if the job is still t's: its lease holds t's token, or the lease
// ran out but nobody gave the job back yet. false means it was not: a
// reaper gave the job back to the queue after its lease ran out (and
// another take may hold it now, whose processing entry and lease are left
// alone), or it was completed already.
func (q *Queue) Complete(ctx context.Context, t Taken) (bool, error) {
	if err := check(t); err != nil {
		return false, err
	}
	n, err := completeScript.Run(ctx, q.c, []string{q.processing, q.LeaseKey(t.Job)}, t.Job, t.Token).Int64()
	if err != nil {
		return false, fmt.Errorf("listqueue: complete a job of %s: %w", q.key, err)
	}
	return n == 1, nil
}

func check(t Taken) error {
	if t.Job == "" {
		return errors.New("listqueue: empty job")
	}
	if t.Token == "" {
		return errors.New("listqueue: empty token")
	}
	return nil
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
//
// Each job moved back gets ReapedMark as its lease for LeaseTTL, which the
// next take's lease write replaces: the worker that overran can neither
// extend nor complete it. A take that dies between its BLMOVE and its lease
// write while the mark lasts has its job given back once the mark ran out.
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
		n, err := requeueScript.Run(ctx, q.c, []string{q.processing, q.key, q.LeaseKey(j)}, j, ReapedMark, q.lease.Milliseconds()).Int64()
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
