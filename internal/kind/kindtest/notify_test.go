package kindtest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/redistest"
	"github.com/slotexporter/slot_exporter/recipe/listqueue"
	"github.com/slotexporter/slot_exporter/recipe/ownerlock"
	"github.com/slotexporter/slot_exporter/recipe/ratelimit"
	"github.com/slotexporter/slot_exporter/recipe/streamqueue"
)

// TestNotifyEveryKind: with discovery: notify, keys each recipe creates
// after the first full scan are found through their own write events
// (INCR in a script, SET, LPUSH, XGROUP CREATE MKSTREAM), without another
// SCAN; a list popped empty is gone.
func TestNotifyEveryKind(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, "--notify-keyspace-events", "Kgxe$lt")
	rc := srv.Client()
	ctx := context.Background()
	yaml := config(srv.Addr, "30m", 100, rateFamily+lockFamily+`
  - name: queue
    kind: list
    match: "t:q:*"
    max_wait: 1s
`+streamFamily)
	yaml = strings.Replace(yaml, "  window: 1s\n", "  window: 1s\n  discovery: notify\n  full_scan_interval: 1h\n", 1)
	h := exportertest.New(t, rc, yaml)
	h.Sweep() // subscribes, then one full scan per family
	scans := exportertest.Calls(t, rc, "scan")

	lim, err := ratelimit.New(rc, ratelimit.Options{Limit: 5, Window: time.Minute})
	exportertest.Must(t, err)
	_, err = lim.Allow(ctx, "t:rl:a")
	exportertest.Must(t, err)
	lk, err := ownerlock.New(rc, ownerlock.Options{TTL: 2 * time.Second})
	exportertest.Must(t, err)
	_, _, err = lk.Acquire(ctx, "t:lock:a")
	exportertest.Must(t, err)
	q, err := listqueue.New(rc, listqueue.Options{Key: "t:q:a", ProcessingKey: "t:p:a"})
	exportertest.Must(t, err)
	_, err = q.Push(ctx, "j1", "j2")
	exportertest.Must(t, err)
	st, err := streamqueue.New(rc, "t:s:a", "g")
	exportertest.Must(t, err)
	exportertest.Must(t, st.CreateGroup(ctx, "$"))
	_, err = st.Add(ctx, "f", "v")
	exportertest.Must(t, err)
	_, err = st.Read(ctx, "c", 1, 0)
	exportertest.Must(t, err)

	want := map[string]float64{
		`slot_sets{family="api_rate"}`:            1,
		`slot_sets{family="jobs_lock"}`:           1,
		`slot_acquires_total{family="jobs_lock"}`: 1,
		`slot_queue_items{family="queue"}`:        2,
		`slot_stream_pending{family="events"}`:    1,
	}
	exportertest.WaitFor(t, 5*time.Second, "the new keys' events", func() bool {
		h.Sweep()
		m := h.Metrics()
		for k, v := range want {
			if m[k] != v {
				return false
			}
		}
		return true
	})
	// Popped empty: Redis deletes the list (a del event).
	exportertest.Must(t, rc.RPop(ctx, "t:q:a").Err())
	exportertest.Must(t, rc.RPop(ctx, "t:q:a").Err())
	exportertest.WaitFor(t, 5*time.Second, "the emptied queue's event", func() bool {
		h.Sweep()
		m := h.Metrics()
		return m[`slot_sets{family="queue"}`] == 0 && m[`slot_queue_items{family="queue"}`] == 0
	})
	if got := exportertest.Calls(t, rc, "scan"); got != scans {
		t.Errorf("SCAN ran %d more times after the first sweep", got-scans)
	}
}
