package kind

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/redisread"
	"github.com/slotexporter/slot_exporter/internal/redistest"
	"github.com/slotexporter/slot_exporter/internal/track"
)

// TestCeleryUnackedTakenOnce: a sweep counts the unacked messages once,
// whichever read carries them: not again by a batch read while another
// has them under way, again by a batch read after one that failed, and
// when the sweep drops their carrier as a duplicate of a key it applied
// (a binding read on two nodes while its slot moved).
func TestCeleryUnackedTakenOnce(t *testing.T) {
	rc := redistest.Start(t).Client()
	ctx := context.Background()
	at := func(ms int64) float64 { return float64(ms) / 1000 }
	mustNil(t, rc.SAdd(ctx, "_kombu.binding.a", "qa"+celerySep+celerySep+"qa").Err())
	mustNil(t, rc.SAdd(ctx, "_kombu.binding.b", "qb"+celerySep+celerySep+"qb").Err())
	mustNil(t, rc.LPush(ctx, "qa", "m").Err())
	mustNil(t, rc.HSet(ctx, "unacked", "t1", kombuMessage("o", "t", 0, "qa", "qa"), "t2", kombuMessage("a", "t", 0, "qb", "qb")).Err())
	mustNil(t, rc.ZAdd(ctx, "unacked_index", redis.Z{Score: at(celeryNow - 2*3_600_000), Member: "t1"}, redis.Z{Score: at(celeryNow - 1000), Member: "t2"}).Err())

	tr, err := New(&config.Family{Name: "tasks", Kind: config.KindCelery, VisibilityTimeout: time.Hour}, &config.Sampling{})
	mustNil(t, err)
	sw := &Sweep{Now: celeryNow, Floor: track.NewFloorTracker(), Carry: track.Carry{}}
	rd := tr.Begin(sw)
	read := func(ctx context.Context, key string) (redisread.KeyRead, error) {
		reads := make([]redisread.KeyRead, 1)
		err := rd.Read(ctx, rc, []string{key}, reads)
		return reads[0], err
	}
	shared := func(r redisread.KeyRead) bool {
		fr, _ := r.Extra.(*FrameworkRead)
		return fr != nil && fr.Shared != nil
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := read(cancelled, "_kombu.binding.a"); err == nil {
		t.Fatal("a read with its context cancelled did not fail")
	}
	a1, err := read(ctx, "_kombu.binding.a")
	mustNil(t, err)
	if !shared(a1) {
		t.Fatalf("the read after a failed one does not carry unacked: %+v", a1)
	}
	b, err := read(ctx, "_kombu.binding.b")
	mustNil(t, err)
	a2, err := read(ctx, "_kombu.binding.a")
	mustNil(t, err)
	if shared(b) || shared(a2) {
		t.Fatal("unacked read again while a read carrying it was under way")
	}
	// The sweep applies a2, then drops a1 as a read of the same key.
	tr.Apply(sw, Key{Read: &a2})
	tr.Apply(sw, Key{Read: &b})
	tr.(SharedKeeper).KeepShared(sw, &a1)
	tr.(SharedKeeper).KeepShared(sw, &a1)
	if a3, _ := read(ctx, "_kombu.binding.a"); shared(a3) {
		t.Error("unacked read again once the sweep had it")
	}
	tr.End(sw, false, false)
	fw := tr.(*framework)
	if got := fw.last.jobs; got[JobWaiting] != 1 || got[JobOrphaned] != 1 || got[JobActive] != 1 {
		t.Errorf("jobs %v, want 1 waiting, 1 orphaned, 1 active", got)
	}
	if q := fw.last.queues["qa"]; q == nil || q.Jobs[JobWaiting] != 1 || q.Jobs[JobOrphaned] != 1 || len(q.Orphans) != 1 {
		t.Errorf("qa: %+v, want 1 waiting and the orphan listed", q)
	}
	if q := fw.last.queues["qb"]; q == nil || q.Jobs[JobActive] != 1 {
		t.Errorf("qb: %+v, want 1 active", q)
	}
}
