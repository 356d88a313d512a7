package kindtest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/redistest"
	"github.com/slotexporter/slot_exporter/recipe/streamqueue"
)

const streamFamily = `
  - name: events
    kind: stream
    match: "t:s:*"
    max_hold: 1s
    max_deliveries: 2
`

// TestStreamScenario drives streams with known truth, a sweep every 0.6 s:
//   - healthy: two entries read and acked, then one added and left unread
//     (lag 1);
//   - dead: three entries read by a consumer that dies: stuck once idle for
//     max_hold, and the consumer dead;
//   - poison: one entry read, then claimed (XAUTOCLAIM) before every sweep
//     after the first: delivered 4 times by the end, more than
//     max_deliveries, never idle;
//   - lagging: two groups, one reads everything, one nothing (lag 5);
//   - busy: five entries added and read before every sweep, the previous
//     five acked: always pending, never stuck;
//   - flood: 1100 entries read by a consumer that dies: all counted stuck
//     (TestStreamCountsPastOnePage in internal/kind goes past one page);
//   - nogroups (a stream with no group): bad_value; list (a list):
//     wrong_type.
func TestStreamScenario(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rc := srv.Client()
	ctx := context.Background()
	h := exportertest.New(t, rc, config(srv.Addr, "1s", 100, streamFamily))
	hc := exportertest.New(t, rc, config(srv.Addr, "1s", 3, streamFamily))
	open := func(user, group string) *streamqueue.Stream {
		t.Helper()
		s, err := streamqueue.New(rc, "t:s:"+user, group)
		exportertest.Must(t, err)
		exportertest.Must(t, s.CreateGroup(ctx, "$"))
		return s
	}
	add := func(s *streamqueue.Stream, n int) []string {
		t.Helper()
		var ids []string
		for i := range n {
			id, err := s.Add(ctx, "n", strconv.Itoa(i))
			exportertest.Must(t, err)
			ids = append(ids, id)
		}
		return ids
	}
	read := func(s *streamqueue.Stream, consumer string, n int) []string {
		t.Helper()
		es, err := s.Read(ctx, consumer, n, 0)
		exportertest.Must(t, err)
		if len(es) != n {
			t.Fatalf("%s read %d entries, want %d", consumer, len(es), n)
		}
		ids := make([]string, n)
		for i, e := range es {
			ids[i] = e.ID
		}
		return ids
	}
	ack := func(s *streamqueue.Stream, ids []string) {
		t.Helper()
		n, err := s.Ack(ctx, ids...)
		exportertest.Must(t, err)
		if int(n) != len(ids) {
			t.Fatalf("acked %d, want %d", n, len(ids))
		}
	}
	idMs := func(id string) int64 {
		ms, _, _ := strings.Cut(id, "-")
		n, err := strconv.ParseInt(ms, 10, 64)
		exportertest.Must(t, err)
		return n
	}
	metric := func(name string, labels ...string) string {
		if len(labels) == 0 {
			return fmt.Sprintf(`%s{family="events"}`, name)
		}
		return fmt.Sprintf(`%s{family="events",%s}`, name, labels[0])
	}
	oldest := func(user string) string {
		return metric("slot_stream_oldest_pending_seconds", fmt.Sprintf("group=\"workers\",user=%q", user))
	}

	healthy := open("healthy", "workers")
	ack(healthy, read(healthy, "c1", len(add(healthy, 2))))
	dead := open("dead", "workers")
	deadIDs := add(dead, 3)
	read(dead, "c-dead", 3)
	poison := open("poison", "workers")
	poisonIDs := add(poison, 1)
	read(poison, "c1", 1)
	fast := open("lagging", "fast")
	open("lagging", "slow") // reads nothing
	ack(fast, read(fast, "c1", len(add(fast, 5))))
	busy := open("busy", "workers")
	busyIDs := add(busy, 5)
	prevBusy := read(busy, "c1", 5)
	flood := open("flood", "workers")
	pipe := rc.Pipeline()
	for i := range 1100 {
		pipe.XAdd(ctx, &redis.XAddArgs{Stream: "t:s:flood", Values: []string{"n", strconv.Itoa(i)}})
	}
	_, err := pipe.Exec(ctx)
	exportertest.Must(t, err)
	read(flood, "c-flood", 1100)
	exportertest.Must(t, rc.XAdd(ctx, &redis.XAddArgs{Stream: "t:s:nogroups", Values: []string{"n", "1"}}).Err())
	exportertest.Must(t, rc.LPush(ctx, "t:s:list", "x").Err())

	s := newSteps(t, rc, h, hc)
	s.sweep()
	exportertest.Expect(t, h.Metrics(), map[string]float64{
		metric("slot_sets"):                                               6,
		metric("slot_stream_entries"):                                     2 + 3 + 1 + 5 + 5 + 1100,
		metric("slot_stream_pending"):                                     3 + 1 + 5 + 1100,
		metric("slot_stream_lag"):                                         5,
		metric("slot_stream_pending_stuck"):                               0,
		metric("slot_stream_consumers_dead"):                              0,
		metric("slot_stream_redelivered"):                                 0,
		metric("slot_users_active"):                                       4,
		metric("slot_exporter_keys_skipped_total", `reason="bad_value"`):  1,
		metric("slot_exporter_keys_skipped_total", `reason="wrong_type"`): 1,
	})

	consumers := []string{"c2", "c3", "c2"}
	for i := 1; i <= 3; i++ {
		s.at(time.Duration(i) * 600 * time.Millisecond)
		if i == 1 {
			add(healthy, 1)
		}
		if _, err := poison.Claim(ctx, consumers[i-1], 0, 10); err != nil {
			t.Fatal(err)
		}
		busyIDs = add(busy, 5)
		next := read(busy, "c1", 5)
		ack(busy, prevBusy)
		prevBusy = next
		k := s.sweep()
		m := h.Metrics()
		switch k {
		case 1:
			// Idle 0.6 s < max_hold; delivered twice, not more than 2.
			exportertest.Expect(t, m, map[string]float64{
				metric("slot_stream_pending_stuck"):  0,
				metric("slot_stream_consumers_dead"): 0,
				metric("slot_stream_redelivered"):    0,
				metric("slot_stream_lag"):            6,
			})
		case 2:
			exportertest.Expect(t, m, map[string]float64{
				metric("slot_stream_pending_stuck"):  3 + 1100,
				metric("slot_stream_consumers_dead"): 2,
				metric("slot_stream_redelivered"):    1,
			})
		}
	}

	m := h.Metrics()
	exportertest.Expect(t, m, map[string]float64{
		metric("slot_sets"):                                               6,
		metric("slot_stream_entries"):                                     3 + 3 + 1 + 5 + 20 + 1100,
		metric("slot_stream_pending"):                                     3 + 1 + 5 + 1100,
		metric("slot_stream_lag"):                                         1 + 5,
		metric("slot_stream_pending_stuck"):                               3 + 1100, // flood: every entry
		metric("slot_stream_consumers_dead"):                              2,        // c-dead, c-flood
		metric("slot_stream_redelivered"):                                 1,        // poison, delivered 4 times
		metric("slot_users_active"):                                       4,
		metric("slot_users_floor_nonzero"):                                4,
		metric("slot_user_used_max", `user="dead"`):                       3,
		metric("slot_user_used_max", `user="poison"`):                     1,
		metric("slot_user_used_max", `user="busy"`):                       5,
		metric("slot_exporter_keys_skipped_total", `reason="bad_value"`):  4,
		metric("slot_exporter_keys_skipped_total", `reason="wrong_type"`): 4,
	})
	s.since(m, oldest("dead"), idMs(deadIDs[0]), 3)
	s.since(m, oldest("poison"), idMs(poisonIDs[0]), 3)
	s.since(m, oldest("busy"), idMs(busyIDs[0]), 3)
	for _, u := range []string{"dead", "poison", "busy", "flood"} {
		s.age(m, metric("slot_user_floor_seconds", fmt.Sprintf("user=%q", u)), 0, 3)
	}
	// Nothing pending, nothing to report.
	absent(t, m, metric("slot_user_used_max", `user="healthy"`), metric("slot_user_used_max", `user="lagging"`))

	// Capped at 3: dead, poison and flood (stuck, dead consumers, poison)
	// over busy, as old a floor and more pending than dead or poison.
	mc := hc.Metrics()
	sameSet(t, "capped users", users(mc, "slot_user_used_max", "events"), "dead", "poison", "flood")
	exportertest.Expect(t, mc, map[string]float64{metric("slot_exporter_user_series_dropped"): 1})
	absent(t, mc, oldest("busy"))
	t.Logf("/metrics excerpt:\n%s", excerpt(t, h, "events"))
}

// TestStreamGroupSeriesCapped: one user's stream with 30 groups, each
// with its oldest pending entry a second apart, gets the 20 oldest
// groups' series; every group still counts in the totals.
func TestStreamGroupSeriesCapped(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rc := srv.Client()
	ctx := context.Background()
	h := exportertest.New(t, rc, config(srv.Addr, "1s", 100, streamFamily))
	const groups = 30
	for i := range groups {
		// IDs written by hand: entry i is from second i+1 of 1970.
		exportertest.Must(t, rc.XAdd(ctx, &redis.XAddArgs{Stream: "t:s:many", ID: fmt.Sprintf("%d-0", (i+1)*1000), Values: []string{"n", strconv.Itoa(i)}}).Err())
	}
	for i := range groups {
		// Group i starts after entry i-1, so its oldest pending entry is
		// entry i: the lower i, the older.
		exportertest.Must(t, rc.XGroupCreate(ctx, "t:s:many", fmt.Sprintf("g%02d", i), fmt.Sprintf("%d-0", i*1000)).Err())
		exportertest.Must(t, rc.XReadGroup(ctx, &redis.XReadGroupArgs{Group: fmt.Sprintf("g%02d", i), Consumer: "c", Streams: []string{"t:s:many", ">"}, Count: 1, Block: -1}).Err())
	}
	h.Sweep()
	m := h.Metrics()
	got := groupSeries(m)
	if len(got) != 20 {
		t.Fatalf("%d group series, want 20: %v", len(got), got)
	}
	for i := range groups {
		name := fmt.Sprintf(`slot_stream_oldest_pending_seconds{family="events",group="g%02d",user="many"}`, i)
		if _, ok := m[name]; ok != (i < 20) {
			t.Errorf("%s: present %v, want %v", name, ok, i < 20)
		}
	}
	exportertest.Expect(t, m, map[string]float64{`slot_stream_pending{family="events"}`: groups})
}

// TestStreamLongGroupNameHasNoSeries: a group whose name is over 1 KiB
// gets no series of its own, as a user id over 1 KiB is no user; its
// entries still count in the family's totals.
func TestStreamLongGroupNameHasNoSeries(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rc := srv.Client()
	ctx := context.Background()
	h := exportertest.New(t, rc, config(srv.Addr, "1s", 100, streamFamily))
	long := strings.Repeat("g", 1025)
	exportertest.Must(t, rc.XAdd(ctx, &redis.XAddArgs{Stream: "t:s:long", ID: "1000-0", Values: []string{"n", "1"}}).Err())
	for _, g := range []string{long, "short"} {
		exportertest.Must(t, rc.XGroupCreate(ctx, "t:s:long", g, "0").Err())
		exportertest.Must(t, rc.XReadGroup(ctx, &redis.XReadGroupArgs{Group: g, Consumer: "c", Streams: []string{"t:s:long", ">"}, Count: 1, Block: -1}).Err())
	}
	h.Sweep()
	m := h.Metrics()
	got := groupSeries(m)
	want := `slot_stream_oldest_pending_seconds{family="events",group="short",user="long"}`
	if len(got) != 1 || got[0] != want {
		t.Errorf("group series %.200q, want only %s", got, want)
	}
	exportertest.Expect(t, m, map[string]float64{`slot_stream_pending{family="events"}`: 2})
}

// groupSeries is the slot_stream_oldest_pending_seconds series of m.
func groupSeries(m map[string]float64) []string {
	var got []string
	for name := range m {
		if strings.HasPrefix(name, "slot_stream_oldest_pending_seconds{") {
			got = append(got, name)
		}
	}
	return got
}
