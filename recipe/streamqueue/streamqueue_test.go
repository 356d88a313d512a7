package streamqueue_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/slotexporter/slot_exporter/internal/redistest"
	"github.com/slotexporter/slot_exporter/recipe/streamqueue"
)

func newStream(t *testing.T, key string) (*streamqueue.Stream, *redistest.Server) {
	t.Helper()
	srv := redistest.Start(t)
	s, err := streamqueue.New(srv.Client(), key, "workers")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateGroup(context.Background(), "$"); err != nil {
		t.Fatal(err)
	}
	return s, srv
}

func ids(es []streamqueue.Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.ID
	}
	return out
}

func TestBadInputRefused(t *testing.T) {
	s, srv := newStream(t, "stream:events:{u0}")
	ctx := context.Background()
	if _, err := streamqueue.New(srv.Client(), "", "g"); err == nil {
		t.Error("empty key: no error")
	}
	if _, err := streamqueue.New(srv.Client(), "k", ""); err == nil {
		t.Error("empty group: no error")
	}
	if _, err := s.Add(ctx, "only-a-field"); err == nil {
		t.Error("odd field list: no error")
	}
	if _, err := s.Read(ctx, "", 1, 0); err == nil {
		t.Error("empty consumer: no error")
	}
	if _, err := s.Read(ctx, "c", 0, 0); err == nil {
		t.Error("count 0: no error")
	}
	if _, err := s.Claim(ctx, "c", -time.Second, 1); err == nil {
		t.Error("negative min idle: no error")
	}
	if err := s.CreateGroup(ctx, "$"); err != nil {
		t.Errorf("creating an existing group again: %v", err)
	}
	srv.Client().Set(ctx, "not-a-stream", "x", 0)
	other, _ := streamqueue.New(srv.Client(), "not-a-stream", "g")
	if err := other.CreateGroup(ctx, "$"); err == nil {
		t.Error("group on a string: no error")
	}
}

func TestReadAckPending(t *testing.T) {
	s, _ := newStream(t, "stream:events:{u1}")
	ctx := context.Background()
	var added []string
	for i := range 4 {
		id, err := s.Add(ctx, "job", fmt.Sprint(i))
		if err != nil {
			t.Fatal(err)
		}
		added = append(added, id)
	}
	got, err := s.Read(ctx, "c1", 3, 0)
	if err != nil || !slices.Equal(ids(got), added[:3]) || got[2].Fields["job"] != "2" {
		t.Fatalf("read: %+v %v", got, err)
	}
	rest, _ := s.Read(ctx, "c2", 10, 0)
	if !slices.Equal(ids(rest), added[3:]) {
		t.Fatalf("second consumer read %v", ids(rest))
	}
	if none, err := s.Read(ctx, "c2", 10, 50*time.Millisecond); err != nil || len(none) != 0 {
		t.Fatalf("read of an exhausted stream: %v %v", none, err)
	}
	p, err := s.Pending(ctx, 10)
	if err != nil || len(p) != 4 || p[0].Consumer != "c1" || p[3].Consumer != "c2" || p[0].Deliveries != 1 {
		t.Fatalf("pending: %+v %v", p, err)
	}
	if n, err := s.Ack(ctx, added[0], added[1], "0-1"); err != nil || n != 2 {
		t.Fatalf("ack: %d %v", n, err)
	}
	if p, _ := s.Pending(ctx, 10); len(p) != 2 {
		t.Fatalf("pending after ack: %+v", p)
	}
}

// A consumer dies with entries pending: after min idle, another consumer's
// XAUTOCLAIM takes them over, and XPENDING shows the second delivery.
func TestClaimTakesOverDeadConsumer(t *testing.T) {
	s, _ := newStream(t, "stream:events:{u2}")
	ctx := context.Background()
	for i := range 5 {
		if _, err := s.Add(ctx, "job", fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	dead, _ := s.Read(ctx, "dead", 3, 0) // then SIGKILL
	alive, _ := s.Read(ctx, "alive", 10, 0)
	if len(dead) != 3 || len(alive) != 2 {
		t.Fatalf("read %d and %d", len(dead), len(alive))
	}
	const minIdle = 300 * time.Millisecond
	if got, err := s.Claim(ctx, "alive", minIdle, 10); err != nil || len(got) != 0 {
		t.Fatalf("claim before min idle: %v %v", ids(got), err)
	}
	// The live consumer acks its own work and keeps its entries fresh.
	if _, err := s.Ack(ctx, ids(alive)...); err != nil {
		t.Fatal(err)
	}
	time.Sleep(minIdle + 50*time.Millisecond)
	got, err := s.Claim(ctx, "alive", minIdle, 10)
	if err != nil || !slices.Equal(ids(got), ids(dead)) || got[0].Fields["job"] != "0" {
		t.Fatalf("claim: %v %v, want the dead consumer's %v", ids(got), err, ids(dead))
	}
	p, _ := s.Pending(ctx, 10)
	for _, e := range p {
		if e.Consumer != "alive" || e.Deliveries != 2 || e.Idle > minIdle {
			t.Errorf("pending after the takeover: %+v", e)
		}
	}
	if len(p) != 3 {
		t.Fatalf("%d pending, want 3", len(p))
	}
	if n, _ := s.Ack(ctx, ids(got)...); n != 3 {
		t.Fatalf("acked %d", n)
	}
}

// A poison entry claimed again and again: each claim is one more delivery.
func TestRedeliveryCountsClimb(t *testing.T) {
	s, _ := newStream(t, "stream:events:{u3}")
	ctx := context.Background()
	id, _ := s.Add(ctx, "job", "poison")
	if got, _ := s.Read(ctx, "w", 1, 0); len(got) != 1 {
		t.Fatal("first read got nothing")
	}
	for range 6 {
		time.Sleep(15 * time.Millisecond)
		if got, err := s.Claim(ctx, "w", 10*time.Millisecond, 1); err != nil || len(got) != 1 || got[0].ID != id {
			t.Fatalf("claim: %v %v", got, err)
		}
	}
	p, _ := s.Pending(ctx, 1)
	if len(p) != 1 || p[0].Deliveries != 7 {
		t.Fatalf("pending %+v, want 7 deliveries", p)
	}
}

// Many consumers, some claiming: every entry is delivered to exactly one
// consumer at a time and acked exactly once.
func TestConcurrentConsumersAckEachEntryOnce(t *testing.T) {
	s, _ := newStream(t, "stream:events:{u4}")
	ctx := context.Background()
	const entries, consumers = 200, 5
	for i := range entries {
		if _, err := s.Add(ctx, "job", fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	acked := map[string]int{}
	var wg sync.WaitGroup
	for c := range consumers {
		wg.Go(func() {
			name := fmt.Sprint("c", c)
			for {
				es, err := s.Claim(ctx, name, time.Second, 5)
				if err == nil && len(es) == 0 {
					es, err = s.Read(ctx, name, 5, 20*time.Millisecond)
				}
				if err != nil {
					t.Error(err)
					return
				}
				if len(es) == 0 {
					return
				}
				n, err := s.Ack(ctx, ids(es)...)
				if err != nil || n != int64(len(es)) {
					t.Errorf("ack of %d entries: %d %v", len(es), n, err)
				}
				mu.Lock()
				for _, e := range es {
					acked[e.ID]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(acked) != entries {
		t.Fatalf("%d entries acked, want %d", len(acked), entries)
	}
	for id, n := range acked {
		if n != 1 {
			t.Errorf("%s handled %d times", id, n)
		}
	}
}
