package listqueue_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/redistest"
	"github.com/slotexporter/slot_exporter/recipe/listqueue"
)

func newQueue(t *testing.T, c redis.UniversalClient, key string, lease time.Duration) *listqueue.Queue {
	t.Helper()
	q, err := listqueue.New(c, listqueue.Options{Key: key, LeaseTTL: lease})
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func TestBadInputRefused(t *testing.T) {
	c := redistest.Start(t).Client()
	ctx := context.Background()
	for _, o := range []listqueue.Options{
		{},
		{Key: "q", ProcessingKey: "q"},
		{Key: "q", LeaseTTL: time.Microsecond},
	} {
		if _, err := listqueue.New(c, o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
	if _, err := listqueue.New(nil, listqueue.Options{Key: "q"}); err == nil {
		t.Error("nil client: no error")
	}
	q := newQueue(t, c, "q", 0)
	if q.ProcessingKey() != "q:processing" || q.LeaseTTL() != listqueue.DefaultLeaseTTL || q.LeaseKey("j1") != "q:processing:lease:j1" {
		t.Fatalf("defaults: %q %v %q", q.ProcessingKey(), q.LeaseTTL(), q.LeaseKey("j1"))
	}
	if _, err := q.Push(ctx); err == nil {
		t.Error("push of nothing: no error")
	}
	if _, err := q.Push(ctx, "a", ""); err == nil {
		t.Error("push of an empty job: no error")
	}
	if _, _, err := q.Take(ctx, -time.Second); err == nil {
		t.Error("negative timeout: no error")
	}
	for _, tk := range []listqueue.Taken{{}, {Job: "j1"}, {Token: "t"}} {
		if _, err := q.Extend(ctx, tk); err == nil {
			t.Errorf("extend %+v: no error", tk)
		}
		if _, err := q.Complete(ctx, tk); err == nil {
			t.Errorf("complete %+v: no error", tk)
		}
	}
	c.Set(ctx, "q:string", "x", 0)
	if _, _, err := newQueue(t, c, "q:string", 0).Take(ctx, 10*time.Millisecond); err == nil {
		t.Error("take from a string: no error")
	}
}

func TestFIFOWithProcessingListAndLeases(t *testing.T) {
	c := redistest.Start(t).Client()
	ctx := context.Background()
	q := newQueue(t, c, "queue:mail:{u1}", 5*time.Second)
	if n, err := q.Push(ctx, "j1", "j2", "j3"); err != nil || n != 3 {
		t.Fatalf("push: %d %v", n, err)
	}
	var taken []listqueue.Taken
	var jobs []string
	for range 3 {
		tk, ok, err := q.Take(ctx, 100*time.Millisecond)
		if err != nil || !ok {
			t.Fatalf("take: %v %v", ok, err)
		}
		taken = append(taken, tk)
		jobs = append(jobs, tk.Job)
		if p := c.PTTL(ctx, q.LeaseKey(tk.Job)).Val(); p <= 4*time.Second {
			t.Fatalf("lease of %s: PTTL %v", tk.Job, p)
		}
		if v := c.Get(ctx, q.LeaseKey(tk.Job)).Val(); v != tk.Token || len(v) != 32 {
			t.Fatalf("lease of %s holds %q, want the take's token %q", tk.Job, v, tk.Token)
		}
	}
	if !slices.Equal(jobs, []string{"j1", "j2", "j3"}) {
		t.Fatalf("taken %v, want first pushed first", jobs)
	}
	if taken[0].Token == taken[1].Token || taken[1].Token == taken[2].Token {
		t.Fatalf("tokens repeat: %+v", taken)
	}
	// Another take's token (j1's) neither extends nor completes j2.
	forged := listqueue.Taken{Job: "j2", Token: taken[0].Token}
	if ok, err := q.Extend(ctx, forged); err != nil || ok {
		t.Fatalf("extend with another take's token: %v %v", ok, err)
	}
	if ok, err := q.Complete(ctx, forged); err != nil || ok {
		t.Fatalf("complete with another take's token: %v %v", ok, err)
	}
	// The processing list's right end is the oldest job being worked on.
	if got := c.LRange(ctx, q.ProcessingKey(), 0, -1).Val(); !slices.Equal(got, []string{"j3", "j2", "j1"}) {
		t.Fatalf("processing list %v", got)
	}
	if ok, err := q.Complete(ctx, taken[1]); err != nil || !ok {
		t.Fatalf("complete: %v %v", ok, err)
	}
	if got := c.LRange(ctx, q.ProcessingKey(), 0, -1).Val(); !slices.Equal(got, []string{"j3", "j1"}) {
		t.Fatalf("processing list after completing j2: %v", got)
	}
	if c.Exists(ctx, q.LeaseKey("j2")).Val() != 0 {
		t.Fatal("lease of a completed job still there")
	}
	if ok, _ := q.Complete(ctx, taken[1]); ok {
		t.Fatal("second completion reported success")
	}
	// An empty queue: Take times out, in whole and in fractional seconds.
	for _, d := range []time.Duration{150 * time.Millisecond, time.Second} {
		began := time.Now()
		if _, ok, err := q.Take(ctx, d); err != nil || ok {
			t.Fatalf("take from an empty queue: %v %v", ok, err)
		}
		if waited := time.Since(began); waited < d-20*time.Millisecond {
			t.Fatalf("take with timeout %v returned after %v", d, waited)
		}
	}
}

// A worker that dies holding a job: its lease runs out, and the reaper gives
// the job back to the queue's pop side; a live worker's job is left alone.
func TestReaperRecoversKilledWorkersJob(t *testing.T) {
	c := redistest.Start(t).Client()
	ctx := context.Background()
	// A lease of a second, extended every 50 ms: the live worker keeps it
	// on a machine that stalls the test for most of a second.
	q := newQueue(t, c, "queue:mail:{u2}", time.Second)
	if _, err := q.Push(ctx, "dead-1", "live-1", "next-1"); err != nil {
		t.Fatal(err)
	}
	dead, _, _ := q.Take(ctx, time.Second) // this worker is killed now
	live, _, _ := q.Take(ctx, time.Second)
	if dead.Job != "dead-1" || live.Job != "live-1" {
		t.Fatalf("took %q and %q", dead.Job, live.Job)
	}
	r := q.NewReaper(0)
	if got, err := r.Reap(ctx); err != nil || len(got) != 0 {
		t.Fatalf("reap while every lease is valid: %v %v", got, err)
	}
	deadline := time.Now().Add(1500 * time.Millisecond) // the dead lease runs out on Redis's clock
	for time.Now().Before(deadline) {                   // the live worker extends its lease
		if ok, err := q.Extend(ctx, live); err != nil || !ok {
			t.Fatalf("extend: %v %v", ok, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// First sighting without a lease: suspected, not moved.
	if got, err := r.Reap(ctx); err != nil || len(got) != 0 {
		t.Fatalf("first reap after the lease ran out: %v %v", got, err)
	}
	if ok, _ := q.Extend(ctx, live); !ok {
		t.Fatal("live worker lost its lease")
	}
	got, err := r.Reap(ctx)
	if err != nil || !slices.Equal(got, []string{"dead-1"}) {
		t.Fatalf("second reap: %v %v, want the dead worker's job", got, err)
	}
	if p := c.LRange(ctx, q.ProcessingKey(), 0, -1).Val(); !slices.Equal(p, []string{"live-1"}) {
		t.Fatalf("processing list %v", p)
	}
	// It is taken next, before younger work.
	again, _, _ := q.Take(ctx, time.Second)
	if again.Job != "dead-1" {
		t.Fatalf("next job %q, want the recovered one", again.Job)
	}
	if ok, _ := q.Complete(ctx, again); !ok {
		t.Fatal("completing the recovered job failed")
	}
	if ok, _ := q.Complete(ctx, live); !ok {
		t.Fatal("completing the live job failed")
	}
}

// Workers that die now and then, a reaper running all along: every job is
// completed, each completion is reported once, and nothing is left behind.
func TestWorkersDieReaperRecoversEverything(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	ctx := context.Background()
	q := newQueue(t, c, "queue:jobs:{all}", 150*time.Millisecond)
	const jobs, workers = 120, 6
	for i := range jobs {
		if _, err := q.Push(ctx, fmt.Sprintf("job-%03d", i)); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	completed := map[string]int{}
	abandoned := 0
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		r := q.NewReaper(0)
		tick := time.NewTicker(40 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				if _, err := r.Reap(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		}
	})
	for w := range workers {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-done:
					return
				default:
				}
				tk, ok, err := q.Take(ctx, 50*time.Millisecond)
				if err != nil {
					t.Error(err)
					return
				}
				if !ok {
					continue
				}
				if (n+w)%7 == 0 { // killed holding the job; a new worker takes its place
					mu.Lock()
					abandoned++
					mu.Unlock()
					continue
				}
				ok, err = q.Complete(ctx, tk)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if ok {
					completed[tk.Job]++
				}
				mu.Unlock()
			}
		})
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		mu.Lock()
		n := len(completed)
		mu.Unlock()
		if n == jobs {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d jobs completed", n, jobs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(done)
	wg.Wait()
	for job, n := range completed {
		if n != 1 {
			t.Errorf("%s completed %d times", job, n)
		}
	}
	if abandoned == 0 {
		t.Fatal("no worker died: the test did not exercise the reaper")
	}
	if n := c.LLen(ctx, q.Key()).Val() + c.LLen(ctx, q.ProcessingKey()).Val(); n != 0 {
		t.Fatalf("%d jobs left in the queue and processing list", n)
	}
}

// waitGone polls until key no longer exists (its PX ran out on Redis's
// clock).
func waitGone(t *testing.T, c redis.UniversalClient, key string) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for c.Exists(ctx, key).Val() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%s still there: PTTL %v", key, c.PTTL(ctx, key).Val())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// overrun takes a job with short's lease, waits for it to run out, and has
// two Reap calls of reaper's (whose LeaseTTL is how long the reaper's mark
// lasts) give the job back.
func overrun(t *testing.T, c redis.UniversalClient, short, reaper *listqueue.Queue) listqueue.Taken {
	t.Helper()
	ctx := context.Background()
	w1, ok, err := short.Take(ctx, time.Second)
	if err != nil || !ok {
		t.Fatalf("W1's take: %v %v", ok, err)
	}
	waitGone(t, c, short.LeaseKey(w1.Job)) // W1 overruns its lease
	r := reaper.NewReaper(0)
	if got, err := r.Reap(ctx); err != nil || len(got) != 0 {
		t.Fatalf("first reap: %v %v", got, err)
	}
	if got, err := r.Reap(ctx); err != nil || !slices.Equal(got, []string{w1.Job}) {
		t.Fatalf("second reap: %v %v, want W1's job", got, err)
	}
	return w1
}

// The reviewer's sequence: W1 overruns its lease, two Reap calls give the
// job back, W2 takes it. W1's Extend and Complete then report false and
// change nothing: W2's processing entry and lease are left alone, and W2
// completes the job.
func TestOverrunWorkerCannotTouchNextTake(t *testing.T) {
	c := redistest.Start(t).Client()
	ctx := context.Background()
	const key = "queue:mail:{u3}"
	short := newQueue(t, c, key, 20*time.Millisecond) // W1's lease runs out
	long := newQueue(t, c, key, time.Minute)          // W2's does not
	if _, err := short.Push(ctx, "job-1"); err != nil {
		t.Fatal(err)
	}
	w1 := overrun(t, c, short, short)
	w2, ok, err := long.Take(ctx, time.Second)
	if err != nil || !ok || w2.Job != w1.Job {
		t.Fatalf("W2's take: %+v %v %v", w2, ok, err)
	}
	lease := long.LeaseKey(w2.Job)
	for _, q := range []*listqueue.Queue{short, long} {
		if ok, err := q.Extend(ctx, w1); err != nil || ok {
			t.Fatalf("W1's extend after W2's take: %v %v, want false", ok, err)
		}
		if ok, err := q.Complete(ctx, w1); err != nil || ok {
			t.Fatalf("W1's complete after W2's take: %v %v, want false", ok, err)
		}
	}
	if n := c.LLen(ctx, key).Val(); n != 0 {
		t.Fatalf("queue holds %d jobs, want 0", n)
	}
	if p := c.LRange(ctx, long.ProcessingKey(), 0, -1).Val(); !slices.Equal(p, []string{w2.Job}) {
		t.Fatalf("processing list %v, want W2's job", p)
	}
	if v := c.Get(ctx, lease).Val(); v != w2.Token {
		t.Fatalf("lease holds %q, want W2's token", v)
	}
	if p := c.PTTL(ctx, lease).Val(); p < 50*time.Second {
		t.Fatalf("W2's lease PTTL %v: W1 renewed it with its own lease", p)
	}
	if ok, err := long.Extend(ctx, w2); err != nil || !ok {
		t.Fatalf("W2's extend: %v %v", ok, err)
	}
	if ok, err := long.Complete(ctx, w2); err != nil || !ok {
		t.Fatalf("W2's complete: %v %v", ok, err)
	}
	if n := c.LLen(ctx, long.ProcessingKey()).Val() + c.Exists(ctx, lease).Val(); n != 0 {
		t.Fatal("W2's complete left its processing entry or its lease")
	}
}

// The next take is between its BLMOVE and its lease write when the
// overrunning worker completes: the reaper's mark keeps W1 from removing
// the job, and a take that dies there has its job given back once the mark
// ran out.
func TestOverrunWorkerCannotCompleteBeforeNextLeaseWrite(t *testing.T) {
	c := redistest.Start(t).Client()
	ctx := context.Background()
	const key = "queue:mail:{u4}"
	short := newQueue(t, c, key, 20*time.Millisecond)
	// The reaper's mark lasts a second: far longer than the two round trips
	// below, and not so long that waiting for it to run out is slow.
	reaper := newQueue(t, c, key, time.Second)
	if _, err := short.Push(ctx, "job-1"); err != nil {
		t.Fatal(err)
	}
	w1 := overrun(t, c, short, reaper)
	// W2's BLMOVE, without its lease write yet.
	if err := c.LMove(ctx, key, short.ProcessingKey(), "RIGHT", "LEFT").Err(); err != nil {
		t.Fatal(err)
	}
	if ok, err := short.Complete(ctx, w1); err != nil || ok {
		t.Fatalf("W1's complete: %v %v, want false", ok, err)
	}
	if ok, err := short.Extend(ctx, w1); err != nil || ok {
		t.Fatalf("W1's extend: %v %v, want false", ok, err)
	}
	if p := c.LRange(ctx, short.ProcessingKey(), 0, -1).Val(); !slices.Equal(p, []string{w1.Job}) {
		t.Fatalf("processing list %v, want W2's job", p)
	}
	if v := c.Get(ctx, reaper.LeaseKey(w1.Job)).Val(); v != listqueue.ReapedMark {
		t.Fatalf("lease holds %q, want the reaper's mark", v)
	}
	// W2 dies there: once the mark runs out, two Reap calls give the job
	// back.
	waitGone(t, c, reaper.LeaseKey(w1.Job))
	r := reaper.NewReaper(0)
	if got, err := r.Reap(ctx); err != nil || len(got) != 0 {
		t.Fatalf("first reap after W2 died: %v %v", got, err)
	}
	if got, err := r.Reap(ctx); err != nil || !slices.Equal(got, []string{w1.Job}) {
		t.Fatalf("reap after W2 died: %v %v, want the job back", got, err)
	}
}

// A take whose lease ran out but whose job nobody gave back still owns the
// job: its Complete succeeds (its Extend does not revive the lease), and
// the reaper has nothing left to give back.
func TestExpiredUnreapedTakeCompletes(t *testing.T) {
	c := redistest.Start(t).Client()
	ctx := context.Background()
	q := newQueue(t, c, "queue:mail:{u5}", 20*time.Millisecond)
	if _, err := q.Push(ctx, "job-1"); err != nil {
		t.Fatal(err)
	}
	w1, ok, err := q.Take(ctx, time.Second)
	if err != nil || !ok {
		t.Fatalf("take: %v %v", ok, err)
	}
	waitGone(t, c, q.LeaseKey(w1.Job))
	r := q.NewReaper(0)
	if got, err := r.Reap(ctx); err != nil || len(got) != 0 { // suspected, not moved
		t.Fatalf("first reap: %v %v", got, err)
	}
	if ok, err := q.Extend(ctx, w1); err != nil || ok {
		t.Fatalf("extend of a lease that ran out: %v %v, want false", ok, err)
	}
	if ok, err := q.Complete(ctx, w1); err != nil || !ok {
		t.Fatalf("complete of an unreaped take: %v %v, want true", ok, err)
	}
	if got, err := r.Reap(ctx); err != nil || len(got) != 0 {
		t.Fatalf("reap after the complete: %v %v", got, err)
	}
	if n := c.LLen(ctx, q.Key()).Val() + c.LLen(ctx, q.ProcessingKey()).Val(); n != 0 {
		t.Fatalf("%d jobs left", n)
	}
}
