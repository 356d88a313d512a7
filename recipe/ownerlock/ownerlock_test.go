package ownerlock_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slotexporter/slot_exporter/internal/redistest"
	"github.com/slotexporter/slot_exporter/recipe/ownerlock"
)

func TestBadInputRefused(t *testing.T) {
	c := redistest.Start(t).Client()
	ctx := context.Background()
	if _, err := ownerlock.New(c, ownerlock.Options{TTL: 500 * time.Microsecond}); err == nil {
		t.Error("sub-millisecond ttl: no error")
	}
	if _, err := ownerlock.New(nil, ownerlock.Options{TTL: time.Second}); err == nil {
		t.Error("nil client: no error")
	}
	l, err := ownerlock.New(c, ownerlock.Options{TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Acquire(ctx, ""); err == nil {
		t.Error("empty key: no error")
	}
	for name, f := range map[string]func() (bool, error){
		"acquire": func() (bool, error) { return l.AcquireToken(ctx, "lock:x", "") },
		"extend":  func() (bool, error) { return l.Extend(ctx, "lock:x", "") },
		"release": func() (bool, error) { return l.Release(ctx, "lock:x", "") },
	} {
		if ok, err := f(); err == nil || ok {
			t.Errorf("%s with an empty token: ok %v err %v", name, ok, err)
		}
	}
	c.LPush(ctx, "lock:list", "x")
	if _, err := l.Release(ctx, "lock:list", "t"); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Errorf("release of a list: %v", err)
	}
}

func TestAcquireExtendRelease(t *testing.T) {
	c := redistest.Start(t).Client()
	ctx := context.Background()
	l, err := ownerlock.New(c, ownerlock.Options{TTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	const key = "lock:job:{u1}"
	tok, ok, err := l.Acquire(ctx, key)
	if err != nil || !ok || len(tok) != 32 {
		t.Fatalf("acquire: %q %v %v", tok, ok, err)
	}
	if v := c.Get(ctx, key).Val(); v != tok {
		t.Fatalf("value %q, want the token", v)
	}
	if p := c.PTTL(ctx, key).Val(); p <= time.Second || p > 2*time.Second {
		t.Fatalf("PTTL %v, want the 2s lease", p)
	}
	if _, ok, _ := l.Acquire(ctx, key); ok {
		t.Fatal("a second acquire of a held lock succeeded")
	}
	c.PExpire(ctx, key, 100*time.Millisecond)
	if ok, err := l.Extend(ctx, key, tok); err != nil || !ok {
		t.Fatalf("extend: %v %v", ok, err)
	}
	if p := c.PTTL(ctx, key).Val(); p <= time.Second {
		t.Fatalf("PTTL after extend %v", p)
	}
	if ok, _ := l.Release(ctx, key, "not-the-token"); ok {
		t.Fatal("released with a wrong token")
	}
	if ok, err := l.Release(ctx, key, tok); err != nil || !ok {
		t.Fatalf("release: %v %v", ok, err)
	}
	if n := c.Exists(ctx, key).Val(); n != 0 {
		t.Fatal("lock still there after release")
	}
	if ok, _ := l.Release(ctx, key, tok); ok {
		t.Fatal("second release reported success")
	}
}

// A holder whose lease ran out can neither release nor extend the lock the
// next holder took: its token is stale.
func TestStaleTokenNeverTouchesTheNextHolder(t *testing.T) {
	c := redistest.Start(t).Client()
	ctx := context.Background()
	l, err := ownerlock.New(c, ownerlock.Options{TTL: 150 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	const key = "lock:job:{u2}"
	stale, ok, err := l.Acquire(ctx, key)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	time.Sleep(250 * time.Millisecond) // the first holder overran its lease
	long, err := ownerlock.New(c, ownerlock.Options{TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	next, ok, err := long.Acquire(ctx, key)
	if err != nil || !ok {
		t.Fatalf("the next holder could not acquire a lock whose lease ran out: %v %v", ok, err)
	}
	if ok, err := l.Extend(ctx, key, stale); err != nil || ok {
		t.Fatalf("stale extend: %v %v", ok, err)
	}
	if ok, err := l.Release(ctx, key, stale); err != nil || ok {
		t.Fatalf("stale release: %v %v", ok, err)
	}
	if v := c.Get(ctx, key).Val(); v != next {
		t.Fatalf("lock holds %q, want the next holder's token", v)
	}
	if p := c.PTTL(ctx, key).Val(); p <= 9*time.Second {
		t.Fatalf("the stale extend changed the next holder's lease: PTTL %v", p)
	}
}

// Many goroutines contending for one lock: never two holders at once, and
// releases never free someone else's hold.
func TestMutualExclusion(t *testing.T) {
	c := redistest.Start(t).Client()
	ctx := context.Background()
	l, err := ownerlock.New(c, ownerlock.Options{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	const workers, rounds = 16, 40
	var inside, acquired atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for r := 0; r < rounds; {
				tok := fmt.Sprintf("w%d-r%d", w, r)
				ok, err := l.AcquireToken(ctx, "lock:mutex", tok)
				if err != nil {
					t.Error(err)
					return
				}
				if !ok {
					time.Sleep(100 * time.Microsecond)
					continue
				}
				if n := inside.Add(1); n != 1 {
					t.Errorf("%d holders at once", n)
				}
				acquired.Add(1)
				inside.Add(-1)
				if ok, err := l.Release(ctx, "lock:mutex", tok); err != nil || !ok {
					t.Errorf("release of an own hold: %v %v", ok, err)
				}
				r++
			}
		})
	}
	wg.Wait()
	if acquired.Load() != workers*rounds {
		t.Fatalf("%d holds, want %d", acquired.Load(), workers*rounds)
	}
}

// Racers for a free lock: exactly one wins.
func TestExactlyOneWinner(t *testing.T) {
	c := redistest.Start(t).Client()
	ctx := context.Background()
	l, err := ownerlock.New(c, ownerlock.Options{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for round := range 10 {
		key := fmt.Sprintf("lock:race:%d", round)
		var wins atomic.Int64
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range 30 {
			wg.Go(func() {
				<-start
				if _, ok, err := l.Acquire(ctx, key); err != nil {
					t.Error(err)
				} else if ok {
					wins.Add(1)
				}
			})
		}
		close(start)
		wg.Wait()
		if wins.Load() != 1 {
			t.Fatalf("round %d: %d winners", round, wins.Load())
		}
	}
}
