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
	var taken []string
	for range 3 {
		job, ok, err := q.Take(ctx, 100*time.Millisecond)
		if err != nil || !ok {
			t.Fatalf("take: %v %v", ok, err)
		}
		taken = append(taken, job)
		if p := c.PTTL(ctx, q.LeaseKey(job)).Val(); p <= 4*time.Second {
			t.Fatalf("lease of %s: PTTL %v", job, p)
		}
	}
	if !slices.Equal(taken, []string{"j1", "j2", "j3"}) {
		t.Fatalf("taken %v, want first pushed first", taken)
	}
	// The processing list's right end is the oldest job being worked on.
	if got := c.LRange(ctx, q.ProcessingKey(), 0, -1).Val(); !slices.Equal(got, []string{"j3", "j2", "j1"}) {
		t.Fatalf("processing list %v", got)
	}
	if ok, err := q.Complete(ctx, "j2"); err != nil || !ok {
		t.Fatalf("complete: %v %v", ok, err)
	}
	if got := c.LRange(ctx, q.ProcessingKey(), 0, -1).Val(); !slices.Equal(got, []string{"j3", "j1"}) {
		t.Fatalf("processing list after completing j2: %v", got)
	}
	if c.Exists(ctx, q.LeaseKey("j2")).Val() != 0 {
		t.Fatal("lease of a completed job still there")
	}
	if ok, _ := q.Complete(ctx, "j2"); ok {
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
	if dead != "dead-1" || live != "live-1" {
		t.Fatalf("took %q and %q", dead, live)
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
	if job, _, _ := q.Take(ctx, time.Second); job != "dead-1" {
		t.Fatalf("next job %q, want the recovered one", job)
	}
	if ok, _ := q.Complete(ctx, "dead-1"); !ok {
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
				job, ok, err := q.Take(ctx, 50*time.Millisecond)
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
				ok, err = q.Complete(ctx, job)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if ok {
					completed[job]++
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
