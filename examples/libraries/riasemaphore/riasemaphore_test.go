package riasemaphore

import (
	"context"
	"testing"
	"time"

	"github.com/slotexporter/slot_exporter/internal/redistest"
)

func TestLimitReleaseAndTimeout(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	base := time.Now()
	clock := base
	sem, err := New(rdb, "ria:sem:t", 2, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	sem = sem.WithClock(func() time.Time { return clock })

	a, err := sem.Acquire(ctx)
	if err != nil || a == "" {
		t.Fatalf("first acquire: %q, %v", a, err)
	}
	b, err := sem.Acquire(ctx)
	if err != nil || b == "" {
		t.Fatalf("second acquire: %q, %v", b, err)
	}
	if c, err := sem.Acquire(ctx); err != nil || c != "" {
		t.Fatalf("third acquire at limit 2: got %q, %v; want refused", c, err)
	}
	timeouts, owners, counter := sem.Keys()
	// A refused acquire leaves nothing behind in either set.
	for _, k := range []string{timeouts, owners} {
		if n := rdb.ZCard(ctx, k).Val(); n != 2 {
			t.Fatalf("%s has %d members after a refused acquire, want 2", k, n)
		}
	}
	if v := rdb.Get(ctx, counter).Val(); v != "3" {
		t.Fatalf("ticket counter %q, want 3 (one ticket per attempt)", v)
	}
	// The score is the acquire time in seconds.
	if s := rdb.ZScore(ctx, timeouts, a).Val(); s < float64(base.Unix())-1 || s > float64(base.Unix())+1 {
		t.Fatalf("score %v, want about %d (seconds)", s, base.Unix())
	}
	// None of the keys gets a TTL.
	for _, k := range []string{timeouts, owners, counter} {
		// go-redis passes PTTL's -1 (no TTL) through as a raw Duration.
		if d := rdb.PTTL(ctx, k).Val(); d != -1 {
			t.Fatalf("PTTL %s = %v, want -1 (no TTL)", k, d)
		}
	}

	if ok, err := sem.Release(ctx, a); err != nil || !ok {
		t.Fatalf("release: %v, %v", ok, err)
	}
	c, err := sem.Acquire(ctx)
	if err != nil || c == "" {
		t.Fatalf("acquire after a release: %q, %v", c, err)
	}

	// b refreshes at +6s; c does not. At +12s c has timed out and is
	// pruned by the next acquire, b is still in.
	clock = base.Add(6 * time.Second)
	if ok, err := sem.Refresh(ctx, b); err != nil || !ok {
		t.Fatalf("refresh b: %v, %v", ok, err)
	}
	clock = base.Add(12 * time.Second)
	d, err := sem.Acquire(ctx)
	if err != nil || d == "" {
		t.Fatalf("acquire once c timed out: %q, %v", d, err)
	}
	if rdb.ZScore(ctx, timeouts, c).Err() == nil {
		t.Fatalf("timed-out holder %s still in %s", c, timeouts)
	}
	if rdb.ZScore(ctx, owners, c).Err() == nil {
		t.Fatalf("timed-out holder %s still in %s", c, owners)
	}
	// A pruned holder's refresh does not resurrect it.
	if ok, err := sem.Refresh(ctx, c); err != nil || ok {
		t.Fatalf("refresh of a pruned holder: %v, %v; want false", ok, err)
	}
	if n := rdb.ZCard(ctx, timeouts).Val(); n != 2 {
		t.Fatalf("%s has %d members, want 2 (b and d)", timeouts, n)
	}
}

func TestBadArguments(t *testing.T) {
	for _, tc := range []struct {
		name    string
		limit   int
		timeout time.Duration
	}{
		{"", 1, time.Second},
		{"s", 0, time.Second},
		{"s", 1, 0},
	} {
		if _, err := New(nil, tc.name, tc.limit, tc.timeout); err == nil {
			t.Errorf("New(%q, %d, %v): no error", tc.name, tc.limit, tc.timeout)
		}
	}
}
