package kindtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/redistest"
	"github.com/slotexporter/slot_exporter/recipe/listqueue"
)

// The recipe's processing lists are named t:p:<user>:list, so that the
// processing family's match singles them out (not their lease keys,
// t:p:<user>:list:lease:<job>), and the queue family's does not see them.
const listFamilies = `
  - name: queue
    kind: list
    match: "t:q:*"
    max_wait: 1s
  - name: processing
    kind: list
    match: "t:p:*:list"
    max_wait: 1s
  - name: lifo
    kind: list
    match: "t:l:*"
    max_wait: 1s
    pop_side: left
`

// TestListScenario drives queues with known truth, a sweep every 0.6 s:
//   - busy: ten jobs; a worker takes and completes one before every sweep
//     after the first: its next job changes every sweep;
//   - dead: three jobs, no consumer: stalled once its next job has been
//     next for more than max_wait;
//   - crash: a worker takes a job and dies (no reaper); another takes and
//     completes the next one: the dead worker's job stays the oldest in
//     the processing list, which stalls;
//   - lifo (pop_side left): popped on the left once, then left alone;
//   - t:q:str, a string: wrong_type.
func TestListScenario(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rc := srv.Client()
	ctx := context.Background()
	h := exportertest.New(t, rc, config(srv.Addr, "2s", 100, listFamilies))
	hc := exportertest.New(t, rc, config(srv.Addr, "2s", 1, listFamilies))
	queue := func(user string) *listqueue.Queue {
		q, err := listqueue.New(rc, listqueue.Options{Key: "t:q:" + user, ProcessingKey: "t:p:" + user + ":list", LeaseTTL: time.Second})
		exportertest.Must(t, err)
		return q
	}
	take := func(q *listqueue.Queue) listqueue.Taken {
		t.Helper()
		tk, ok, err := q.Take(ctx, time.Second)
		if err != nil || !ok {
			t.Fatalf("take from %s: %v %v", q.Key(), ok, err)
		}
		return tk
	}
	complete := func(q *listqueue.Queue, tk listqueue.Taken) {
		t.Helper()
		if ok, err := q.Complete(ctx, tk); err != nil || !ok {
			t.Fatalf("complete %s: %v %v", tk.Job, ok, err)
		}
	}
	metric := func(fam, name string, labels ...string) string {
		if len(labels) == 0 {
			return fmt.Sprintf(`%s{family=%q}`, name, fam)
		}
		return fmt.Sprintf(`%s{family=%q,%s}`, name, fam, labels[0])
	}
	wait := func(fam, user string) string {
		return metric(fam, "slot_queue_head_wait_seconds", fmt.Sprintf("user=%q", user))
	}

	busy, dead, crash := queue("busy"), queue("dead"), queue("crash")
	for i := range 10 {
		_, err := busy.Push(ctx, fmt.Sprintf("b%d", i))
		exportertest.Must(t, err)
	}
	_, err := dead.Push(ctx, "d0", "d1", "d2")
	exportertest.Must(t, err)
	_, err = crash.Push(ctx, "c0", "c1")
	exportertest.Must(t, err)
	if tk := take(crash); tk.Job != "c0" {
		t.Fatalf("took %s, want c0", tk.Job)
	}
	exportertest.Must(t, rc.RPush(ctx, "t:l:u", "a", "b", "c").Err())
	exportertest.Must(t, rc.Set(ctx, "t:q:str", "x", 0).Err())

	s := newSteps(t, rc, h, hc)
	s.sweep()
	exportertest.Expect(t, h.Metrics(), map[string]float64{
		metric("queue", "slot_queue_items"):                                        14,
		metric("queue", "slot_queues_stalled"):                                     0,
		metric("queue", "slot_sets"):                                               3,
		wait("queue", "dead"):                                                      0,
		metric("processing", "slot_queue_items"):                                   1,
		metric("lifo", "slot_queue_items"):                                         3,
		metric("queue", "slot_exporter_keys_skipped_total", `reason="wrong_type"`): 1,
	})

	var c1 listqueue.Taken
	for i := 1; i <= 4; i++ {
		s.at(time.Duration(i) * 600 * time.Millisecond)
		complete(busy, take(busy))
		switch i {
		case 1:
			exportertest.Must(t, rc.LPop(ctx, "t:l:u").Err())
		case 2:
			// Another worker takes c1 and finishes it a sweep later; c0,
			// whose worker died, stays at the processing list's right.
			if c1 = take(crash); c1.Job != "c1" {
				t.Fatalf("took %s, want c1", c1.Job)
			}
		case 3:
			complete(crash, c1)
		}
		k := s.sweep()
		m := h.Metrics()
		exportertest.Expect(t, m, map[string]float64{wait("queue", "busy"): 0})
		s.age(m, wait("queue", "dead"), 0, k)
		s.age(m, wait("processing", "crash"), 0, k)
		switch k {
		case 1:
			exportertest.Expect(t, m, map[string]float64{
				// Popped on the left: a new next element.
				wait("lifo", "u"):                           0,
				metric("queue", "slot_queue_items"):         13, // busy 9, dead 3, crash 1
				metric("queue", "slot_queues_stalled"):      0,
				metric("processing", "slot_queues_stalled"): 0,
			})
		case 2:
			exportertest.Expect(t, m, map[string]float64{
				metric("processing", "slot_queue_items"): 2,
				metric("queue", "slot_sets"):             2, // crash's queue emptied
			})
		}
	}

	m := h.Metrics()
	exportertest.Expect(t, m, map[string]float64{
		metric("queue", "slot_queue_items"):                                        9, // busy 6, dead 3
		metric("queue", "slot_queues_stalled"):                                     1, // dead
		metric("queue", "slot_sets"):                                               2,
		metric("queue", "slot_users_active"):                                       2,
		metric("queue", "slot_users_floor_nonzero"):                                2, // never empty: busy, dead
		metric("queue", "slot_user_used_max", `user="busy"`):                       7,
		metric("queue", "slot_user_used_max", `user="dead"`):                       3,
		metric("queue", "slot_exporter_keys_skipped_total", `reason="wrong_type"`): 5,
		metric("processing", "slot_queue_items"):                                   1, // c0
		metric("processing", "slot_queues_stalled"):                                1,
		metric("lifo", "slot_queue_items"):                                         2,
		metric("lifo", "slot_queues_stalled"):                                      1,
	})
	s.age(m, wait("lifo", "u"), 1, 4)
	s.age(m, metric("queue", "slot_user_floor_seconds", `user="busy"`), 0, 4)
	s.age(m, metric("queue", "slot_user_floor_seconds", `user="dead"`), 0, 4)
	absent(t, m, metric("queue", "slot_user_used_max", `user="crash"`))

	// Capped at 1: dead, the stalled queue, over busy, whose floor is as old
	// and whose queue is longer.
	mc := hc.Metrics()
	sameSet(t, "capped users", users(mc, "slot_user_used_max", "queue"), "dead")
	exportertest.Expect(t, mc, map[string]float64{
		metric("queue", "slot_exporter_user_series_dropped"): 1,
		metric("queue", "slot_queues_stalled"):               1,
	})
	s.age(mc, wait("queue", "dead"), 0, 4)
	absent(t, mc, wait("queue", "busy"))
	t.Logf("/metrics excerpt:\n%s%s", excerpt(t, h, "queue"), excerpt(t, h, "processing"))
}
