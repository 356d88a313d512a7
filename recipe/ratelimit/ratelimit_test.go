package ratelimit_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slotexporter/slot_exporter/internal/redistest"
	"github.com/slotexporter/slot_exporter/recipe/ratelimit"
)

func TestOptionsRefused(t *testing.T) {
	c := redistest.Start(t).Client()
	for _, o := range []ratelimit.Options{
		{Limit: 0, Window: time.Second},
		{Limit: -3, Window: time.Second},
		{Limit: 5, Window: 0},
		{Limit: 5, Window: 999 * time.Microsecond},
	} {
		if _, err := ratelimit.New(c, o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
	if _, err := ratelimit.New(nil, ratelimit.Options{Limit: 1, Window: time.Second}); err == nil {
		t.Error("nil client: no error")
	}
	l, err := ratelimit.New(c, ratelimit.Options{Limit: 1, Window: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Allow(context.Background(), ""); err == nil {
		t.Error("empty key: no error")
	}
}

func TestWindowOpensOnFirstHitOnly(t *testing.T) {
	c := redistest.Start(t).Client()
	ctx := context.Background()
	l, err := ratelimit.New(c, ratelimit.Options{Limit: 3, Window: 400 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	const key = "rl:api:{u1}"
	var got []ratelimit.Result
	for range 5 {
		r, err := l.Allow(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
		time.Sleep(20 * time.Millisecond)
	}
	for i, r := range got {
		if r.Count != int64(i+1) || r.Allowed != (i < 3) {
			t.Errorf("hit %d: %+v", i+1, r)
		}
		if r.TTL <= 0 || r.TTL > 400*time.Millisecond {
			t.Errorf("hit %d: ttl %v", i+1, r.TTL)
		}
	}
	// Later hits never pushed the end of the window back.
	if got[4].TTL >= got[0].TTL-50*time.Millisecond {
		t.Errorf("window refreshed by later hits: ttl %v after the first hit, %v after the fifth", got[0].TTL, got[4].TTL)
	}
	// Once the window is over the counter restarts from 1.
	time.Sleep(got[4].TTL + 20*time.Millisecond)
	r, err := l.Allow(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Allowed || r.Count != 1 {
		t.Fatalf("after the window: %+v", r)
	}
}

// N goroutines hammering one counter never get more than limit hits
// allowed within a window, and every hit is counted.
func TestConcurrentHitsNeverExceedLimit(t *testing.T) {
	c := redistest.Start(t).Client()
	ctx := context.Background()
	const limit, goroutines, hits = 37, 40, 25
	l, err := ratelimit.New(c, ratelimit.Options{Limit: limit, Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var allowed, maxCount atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range goroutines {
		wg.Go(func() {
			<-start
			for range hits {
				r, err := l.Allow(ctx, "rl:race")
				if err != nil {
					t.Error(err)
					return
				}
				if r.Allowed {
					allowed.Add(1)
				}
				for m := maxCount.Load(); r.Count > m && !maxCount.CompareAndSwap(m, r.Count); m = maxCount.Load() {
				}
			}
		})
	}
	close(start)
	wg.Wait()
	if allowed.Load() != limit {
		t.Fatalf("%d hits allowed in one window, limit %d", allowed.Load(), limit)
	}
	if maxCount.Load() != goroutines*hits {
		t.Fatalf("highest count %d, want every hit counted (%d)", maxCount.Load(), goroutines*hits)
	}
	if v, _ := c.Get(ctx, "rl:race").Int64(); v != goroutines*hits {
		t.Fatalf("counter %d", v)
	}
}

// While hits run, the counter is never observed without a TTL: INCR and
// PEXPIRE happen in one step.
func TestCounterNeverSeenWithoutTTL(t *testing.T) {
	c := redistest.Start(t).Client()
	ctx := context.Background()
	l, err := ratelimit.New(c, ratelimit.Options{Limit: 5, Window: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var observed, noTTL atomic.Int64
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			p, err := c.PTTL(ctx, "rl:ttl").Result()
			if err != nil {
				t.Error(err)
				return
			}
			if p != -2 { // -2: no key between windows
				observed.Add(1)
			}
			if p == -1 {
				noTTL.Add(1)
			}
		}
	})
	windows := 0
	for range 3000 {
		r, err := l.Allow(ctx, "rl:ttl")
		if err != nil {
			t.Fatal(err)
		}
		if r.Count == 1 {
			windows++
		}
	}
	close(stop)
	wg.Wait()
	if noTTL.Load() != 0 {
		t.Fatalf("counter seen without a TTL %d times", noTTL.Load())
	}
	if windows < 10 || observed.Load() == 0 {
		t.Fatalf("only %d windows and %d observations: the test did not exercise restarts", windows, observed.Load())
	}
}

// A counter some other writer left without a TTL gets a window on its next
// hit through the recipe, so the caller is not locked out forever.
func TestRepairsCounterWithoutTTL(t *testing.T) {
	c := redistest.Start(t).Client()
	ctx := context.Background()
	const key = "rl:api:{legacy}"
	if err := c.Set(ctx, key, 1000, 0).Err(); err != nil {
		t.Fatal(err)
	}
	l, err := ratelimit.New(c, ratelimit.Options{Limit: 10, Window: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	r, err := l.Allow(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if r.Allowed || r.Count != 1001 || r.TTL != 300*time.Millisecond {
		t.Fatalf("hit on a counter without TTL: %+v", r)
	}
	if p := c.PTTL(ctx, key).Val(); p <= 0 || p > 300*time.Millisecond {
		t.Fatalf("PTTL after repair %v", p)
	}
	time.Sleep(350 * time.Millisecond)
	if r, err = l.Allow(ctx, key); err != nil || !r.Allowed || r.Count != 1 {
		t.Fatalf("after the repaired window: %+v %v", r, err)
	}
}

func TestBadValues(t *testing.T) {
	c := redistest.Start(t).Client()
	ctx := context.Background()
	l, err := ratelimit.New(c, ratelimit.Options{Limit: 10, Window: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	c.Set(ctx, "rl:text", "abc", 0)
	c.LPush(ctx, "rl:list", "x")
	for key, want := range map[string]string{"rl:text": "not an integer", "rl:list": "WRONGTYPE"} {
		_, err := l.Allow(ctx, key)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), key) {
			t.Errorf("%s: error %v, want one naming the key and %q", key, err, want)
		}
	}
}
