package kindtest

import (
	"context"
	"testing"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/redistest"
)

// TestFrameworkBadKeyCountedOnce: a key of the wrong type that a layout
// reads with several commands (BullMQ's active list with LLEN and
// LRANGE, its delayed zset with ZCARD and ZCOUNT; Sidekiq's schedule
// with ZCARD, ZCOUNT and ZRANGE) is one bad key: counted once a sweep in
// keys_skipped_total, and logged once.
func TestFrameworkBadKeyCountedOnce(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rc := srv.Client()
	ctx := context.Background()
	logs := exportertest.NewLogs()
	h := exportertest.New(t, rc, config(srv.Addr, "1s", 100, `
  - name: bull
    kind: bullmq
  - name: sidekiq
    kind: sidekiq
`), logs.Logger())
	exportertest.Must(t, rc.Set(ctx, "bull:q3:id", 1, 0).Err())
	exportertest.Must(t, rc.SAdd(ctx, "bull:q3:active", "x").Err())
	exportertest.Must(t, rc.Set(ctx, "bull:q3:delayed", "x", 0).Err())
	exportertest.Must(t, rc.SAdd(ctx, "queues", "default").Err())
	exportertest.Must(t, rc.Set(ctx, "schedule", "x", 0).Err())
	for range 3 {
		h.Sweep()
	}
	exportertest.Expect(t, h.Metrics(), map[string]float64{
		`slot_exporter_keys_scanned_total{family="bull"}`:                        3,
		`slot_exporter_keys_skipped_total{family="bull",reason="wrong_type"}`:    6, // two keys, three sweeps
		`slot_exporter_keys_scanned_total{family="sidekiq"}`:                     3,
		`slot_exporter_keys_skipped_total{family="sidekiq",reason="wrong_type"}`: 3,
	})
	for _, key := range []string{"bull:q3:active", "bull:q3:delayed", "schedule"} {
		if n := len(logs.Lines("skipping bad", "key="+key+" ")); n != 1 {
			t.Errorf("%s: logged %d times in three sweeps, want once:\n%s", key, n, logs.String())
		}
	}
}
