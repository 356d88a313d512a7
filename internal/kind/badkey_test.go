package kind

import (
	"context"
	"testing"
	"time"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/redisread"
	"github.com/slotexporter/slot_exporter/internal/redistest"
)

// badKeys counts fr's bad pieces by key.
func badKeys(fr *FrameworkRead) map[string]int {
	n := map[string]int{}
	for _, b := range fr.Bad {
		n[b.Key]++
	}
	return n
}

// TestFrameworkReadsJudgeEachKeyOnce: a key of the wrong type that a
// layout reads with several commands is one bad piece of the read
// (BullMQ's active list: LLEN and LRANGE; its delayed zset: ZCARD and
// ZCOUNT; Sidekiq's schedule: ZCARD, ZCOUNT and ZRANGE).
func TestFrameworkReadsJudgeEachKeyOnce(t *testing.T) {
	rc := redistest.Start(t).Client()
	ctx := context.Background()
	mustNil(t, rc.Set(ctx, "bull:q3:id", 1, 0).Err())
	mustNil(t, rc.SAdd(ctx, "bull:q3:active", "x").Err())
	mustNil(t, rc.Set(ctx, "bull:q3:delayed", "x", 0).Err())
	mustNil(t, rc.SAdd(ctx, "queues", "default").Err())
	mustNil(t, rc.Set(ctx, "schedule", "x", 0).Err())
	mustNil(t, rc.Set(ctx, "retry", "x", 0).Err())
	now := time.Now().UnixMilli()

	bull := &bullLayout{}
	bull.configure(&config.Family{Kind: config.KindBullMQ, Prefix: "bull", MaxWait: time.Minute, MaxHold: time.Hour})
	reads := make([]redisread.KeyRead, 1)
	mustNil(t, bull.reads(now).Read(ctx, rc, []string{"bull:q3:id"}, reads))
	fr, _ := reads[0].Extra.(*FrameworkRead)
	if reads[0].Status != redisread.OK || fr == nil {
		t.Fatalf("bull:q3:id: %+v", reads[0])
	}
	if got := badKeys(fr); len(got) != 2 || got["bull:q3:active"] != 1 || got["bull:q3:delayed"] != 1 {
		t.Errorf("bullmq's bad pieces by key: %v, want active and delayed once each", got)
	}

	key := redisread.KeyRead{Key: "queues"}
	fr = &FrameworkRead{}
	if _, err := readSidekiq(ctx, rc, newStreamReader(), &key, fr, "", nil, nil, now, 60000); err != nil {
		t.Fatal(err)
	}
	if got := badKeys(fr); len(got) != 2 || got["schedule"] != 1 || got["retry"] != 1 {
		t.Errorf("sidekiq's bad pieces by key: %v, want schedule and retry once each", got)
	}
}

// TestFrameworkCountsABadPieceOncePerSweep: the same bad piece handed
// over twice in one sweep (a celery queue bound under two binding keys
// read in different batches) counts once in keys_skipped_total.
func TestFrameworkCountsABadPieceOncePerSweep(t *testing.T) {
	tr, err := New(&config.Family{Name: "jobs", Kind: config.KindCelery, VisibilityTimeout: time.Hour}, nil)
	mustNil(t, err)
	var skipped [redisread.NumSkipReasons]uint64
	for sweep := 1; sweep <= 2; sweep++ {
		sw := &Sweep{Now: int64(sweep) * 1000, Skipped: &skipped}
		tr.Begin(sw)
		for range 2 {
			bad := &FrameworkRead{Bad: []BadData{{Key: "q\x06\x163", Reason: redisread.SkipWrongType, Detail: "WRONGTYPE"}}}
			tr.Apply(sw, Key{Read: &redisread.KeyRead{Status: redisread.OK, Extra: bad}})
		}
		tr.End(sw, false, false)
		if got := skipped[redisread.SkipWrongType]; got != uint64(sweep) {
			t.Errorf("after sweep %d: wrong_type %d, want %d", sweep, got, sweep)
		}
	}
}
