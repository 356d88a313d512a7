package redisread

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// TestWaitCountsKeysWhenTheyGo: keys that wait on the pace are counted as
// spent when they go to Redis, not when they start waiting (the pacer
// would take them for reads made during its held second), and keys whose
// wait is cut off are not counted at all.
func TestWaitCountsKeysWhenTheyGo(t *testing.T) {
	pace := rate.NewLimiter(1000, 10)
	var spent atomic.Int64
	p := &Plan{Pace: pace, Spent: func(n int) { spent.Add(int64(n)) }}
	if err := p.wait(context.Background(), 10); err != nil {
		t.Fatal(err)
	}
	if got := spent.Load(); got != 10 {
		t.Fatalf("after a wait that did not wait: %d keys spent, want 10", got)
	}
	// Ten seconds in debt, as the pacer's hold leaves the limiter.
	pace.ReserveN(time.Now(), 10)
	for range 999 {
		pace.ReserveN(time.Now(), 10)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.wait(ctx, 10) }()
	time.Sleep(100 * time.Millisecond)
	if got := spent.Load(); got != 10 {
		t.Errorf("while waiting: %d keys spent, want the 10 before the wait", got)
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("a cut-off wait returned no error")
	}
	if got := spent.Load(); got != 10 {
		t.Errorf("after a cut-off wait: %d keys spent, want 10", got)
	}
}

// TestWaitPastTheDeadlineIsACutOff: a key budget whose next key is due
// after the sweep's deadline ends the read at the deadline with the
// deadline's error, as a read cut off while waiting does; rate.Limiter
// alone refuses such a wait at once with an error of its own, which made
// the sweep a failed one instead of one that goes on in its next attempt.
func TestWaitPastTheDeadlineIsACutOff(t *testing.T) {
	lim := rate.NewLimiter(1, 1)
	lim.AllowN(time.Now(), 1) // the burst is spent: the next key is due in 1 s
	p := &Plan{Budget: lim}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := p.wait(ctx, 1)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait past the deadline: %v, want it to wrap context.DeadlineExceeded", err)
	}
	if ctx.Err() == nil {
		t.Fatal("wait returned before the deadline: the sweep would count it a failure, not a cut-off")
	}
}

// TestScanPage: one SCAN asks for scan_count keys, and under a key budget
// or the pace for no more than a chunk of reads, so that a page holds
// Redis no longer than a batch of reads does.
func TestScanPage(t *testing.T) {
	pace := func() *rate.Limiter { return rate.NewLimiter(30000, 300) }
	for _, c := range []struct {
		name string
		p    Plan
		want int64
	}{
		{"neither", Plan{ScanCount: 1000}, 1000},
		{"a key budget of 2000 a second", Plan{ScanCount: 1000, Budget: rate.NewLimiter(2000, 20)}, 10},
		{"a key budget of 500k a second", Plan{ScanCount: 1000, Budget: rate.NewLimiter(500000, 5000)}, 500},
		{"the pace at 30k keys a second", Plan{ScanCount: 1000, Pace: pace()}, pacedChunk},
		{"a first read at the pace", Plan{ScanCount: 1000, Pace: pace(), First: true}, firstPacedChunk},
		{"scan_count under the chunk", Plan{ScanCount: 20, Pace: pace()}, 20},
	} {
		if got := c.p.ScanPage(); got != c.want {
			t.Errorf("%s: a page of %d keys, want %d", c.name, got, c.want)
		}
	}
}
