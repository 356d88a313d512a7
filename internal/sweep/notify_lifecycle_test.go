package sweep_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/redistest"
	"github.com/slotexporter/slot_exporter/internal/sweep"
)

// The messages the watcher logs, as an operator greps for them.
const (
	eventsOffMsg    = "keyspace notifications are off"
	eventsBackMsg   = "keyspace notifications are back"
	subDownMsg      = "keyspace subscription interrupted"
	subRestoredMsg  = "keyspace subscription restored"
	subRefusedMsg   = "keyspace subscription refused"
	notifyEventsAll = "Kgxez$"
)

func notifyLive() float64 { return float64(time.Now().Add(119 * time.Second).UnixMilli()) }

// count is how many records logs holds with msg so far.
func count(logs *exportertest.Logs, msg string) int { return len(logs.Lines("msg=\"" + msg)) }

// sets is the number of slot sets the streams family counts.
func sets(h *exportertest.Harness) float64 { return h.Metrics()[`slot_sets{family="streams"}`] }

// sweepOK runs one sweep of every family, until one succeeds: right after
// Redis comes back, the connections a sweep finds may still be the dead
// ones.
func sweepOK(t *testing.T, s *sweep.Sweeper) {
	t.Helper()
	var err error
	exportertest.WaitFor(t, time.Minute, "a sweep to succeed", func() bool {
		err = s.SweepOnce(context.Background())
		return err == nil
	})
}

// TestNotifyStartsAndReloadsWithRedisDown: with discovery: notify, a Redis
// that does not answer is no config error, as in scan mode: the sweeper is
// built (start) and replaced (reload) while Redis is down, its sweeps fail
// until Redis answers, and the setting is checked then. A Redis that
// answers without the events is warned about once and read by full SCAN
// each sweep, so the figures stay right; once the events are on, one full
// SCAN and then notifications alone.
func TestNotifyStartsAndReloadsWithRedisDown(t *testing.T) {
	ctx := context.Background()
	port := redistest.FreePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cfg, err := config.Parse([]byte(notifyConfig(addr)))
	if err != nil {
		t.Fatal(err)
	}
	client := redis.NewClient(&redis.Options{Addr: addr, DisableIdentity: true})
	t.Cleanup(func() { _ = client.Close() })
	logs := exportertest.NewLogs()

	first, err := sweep.New(ctx, cfg, client, logs.Logger(), nil)
	if err != nil {
		t.Fatalf("refused to start while Redis is down: %v", err)
	}
	if err := first.SweepOnce(ctx); err == nil {
		t.Fatal("a sweep succeeded with Redis down")
	}
	s, err := sweep.New(ctx, cfg, client, logs.Logger(), first)
	if err != nil {
		first.Stop()
		t.Fatalf("reload refused while Redis is down: %v", err)
	}
	t.Cleanup(s.Stop)
	h := exportertest.ForSweeper(t, s)

	// Redis comes up answering, without keyspace events.
	srv := redistest.StartPort(t, port)
	rc := srv.Client()
	rc.ZAdd(ctx, "s:{u1}", redis.Z{Score: notifyLive(), Member: "a"})
	sweepOK(t, s)
	if got := sets(h); got != 1 {
		t.Fatalf("slot sets %v, want 1", got)
	}
	rc.ZAdd(ctx, "s:{u2}", redis.Z{Score: notifyLive(), Member: "a"})
	h.Sweep()
	if got := sets(h); got != 2 {
		t.Errorf("a key written while the events are off: slot sets %v, want 2", got)
	}
	if n := count(logs, eventsOffMsg); n != 1 {
		t.Errorf("%d warnings that the events are off over two sweeps, want 1:\n%s", n, logs)
	}
	if l := logs.Lines(eventsOffMsg); len(l) > 0 && !strings.Contains(l[0], "CONFIG SET notify-keyspace-events "+notifyEventsAll) {
		t.Errorf("the warning does not say what to set: %s", l[0])
	}

	// A key written after the last sweep that scanned, while the events
	// were still off, then the events on: the first sweep that trusts
	// them scans once more.
	rc.ZAdd(ctx, "s:{u3}", redis.Z{Score: notifyLive(), Member: "a"})
	exportertest.Must(t, rc.ConfigSet(ctx, "notify-keyspace-events", notifyEventsAll).Err())
	h.Sweep()
	if got := sets(h); got != 3 {
		t.Errorf("a key written before the events came back: slot sets %v, want 3", got)
	}
	if n := count(logs, eventsBackMsg); n != 1 {
		t.Errorf("%d notes that the events are back, want 1:\n%s", n, logs)
	}
	scans := exportertest.Calls(t, rc, "scan")
	rc.ZAdd(ctx, "s:{u4}", redis.Z{Score: notifyLive(), Member: "a"})
	exportertest.WaitFor(t, time.Minute, "the sweep to see the announced key", func() bool {
		h.Sweep()
		return sets(h) == 4
	})
	if got := exportertest.Calls(t, rc, "scan"); got != scans {
		t.Errorf("SCAN ran %d times once the events were back; notify mode reads what they announce", got-scans)
	}
	if n := count(logs, eventsOffMsg); n != 1 {
		t.Errorf("%d warnings that the events are off, want 1:\n%s", n, logs)
	}
}

// TestNotifyEventsTurnedOffAtRunTime: notify-keyspace-events turned off
// while the exporter runs (CONFIG SET, then a restart without the setting)
// drops no subscription; every sweep checks it, warns once per change, and
// reads by full SCAN while it is off, so that new keys are counted.
func TestNotifyEventsTurnedOffAtRunTime(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	rc := srv.Client()
	// Set at run time, not on the command line: a restart comes back
	// without it, as a server whose redis.conf lacks it does.
	exportertest.Must(t, rc.ConfigSet(ctx, "notify-keyspace-events", notifyEventsAll).Err())
	for i := range 3 {
		rc.ZAdd(ctx, fmt.Sprintf("s:{u%d}", i), redis.Z{Score: notifyLive(), Member: "a"})
	}
	logs := exportertest.NewLogs()
	h := exportertest.New(t, rc, notifyConfig(srv.Addr), logs.Logger())
	h.Sweep()
	if got := sets(h); got != 3 {
		t.Fatalf("slot sets %v, want 3", got)
	}

	exportertest.Must(t, rc.ConfigSet(ctx, "notify-keyspace-events", "").Err())
	for i, key := range []string{"s:{off1}", "s:{off2}"} {
		rc.ZAdd(ctx, key, redis.Z{Score: notifyLive(), Member: "a"})
		h.Sweep()
		if got, want := sets(h), float64(4+i); got != want {
			t.Errorf("%s written with the events off: slot sets %v, want %v", key, got, want)
		}
	}
	if n := count(logs, eventsOffMsg); n != 1 {
		t.Errorf("%d warnings over two sweeps with the events off, want 1:\n%s", n, logs)
	}

	// Written after the last sweep with the events off: no event, and the
	// first sweep with them on must scan.
	rc.ZAdd(ctx, "s:{gap}", redis.Z{Score: notifyLive(), Member: "a"})
	exportertest.Must(t, rc.ConfigSet(ctx, "notify-keyspace-events", notifyEventsAll).Err())
	h.Sweep()
	if got := sets(h); got != 6 {
		t.Errorf("a key written just before the events came back: slot sets %v, want 6", got)
	}
	if n := count(logs, eventsBackMsg); n != 1 {
		t.Errorf("%d notes that the events are back, want 1:\n%s", n, logs)
	}

	// A restart: empty, and without the events.
	srv.Restart()
	sweepOK(t, h.Sweeper)
	if got := sets(h); got != 0 {
		t.Fatalf("slot sets %v after a restart, want 0", got)
	}
	rc.ZAdd(ctx, "s:{after}", redis.Z{Score: notifyLive(), Member: "a"})
	sweepOK(t, h.Sweeper)
	if got := sets(h); got != 1 {
		t.Errorf("a key written after a restart without the events: slot sets %v, want 1", got)
	}
	if n := count(logs, eventsOffMsg); n != 2 {
		t.Errorf("%d warnings that the events are off, want 2 (one per time they went):\n%s", n, logs)
	}
}

// TestNotifySubscriptionBacksOff: while Redis is down, the subscription's
// reconnection backs off (100 ms doubling, at most 10 s) and is logged at
// the 1st, 2nd, 4th, 8th... failure in a row, not every 100 ms. Until it is
// back, every sweep reads by full SCAN: a key written while Redis answers
// but the subscription is still waiting is counted. Its return is logged
// once, and then notifications alone drive the reads again.
func TestNotifySubscriptionBacksOff(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, "--notify-keyspace-events", notifyEventsAll)
	rc := srv.Client()
	logs := exportertest.NewLogs()
	h := exportertest.New(t, rc, notifyConfig(srv.Addr), logs.Logger())
	h.Sweep()

	srv.Kill()
	// The 4th failure comes 1.5 s in at the earliest, the 8th (the next
	// line) 12.7 s in; every 100 ms it would be the 3rd line after 0.3 s.
	exportertest.WaitFor(t, time.Minute, "three interruption warnings", func() bool { return count(logs, subDownMsg) >= 3 })
	var got []string
	for _, r := range logs.Take() {
		if r.Msg == subDownMsg {
			got = append(got, r.Attrs["failures_in_a_row"]+"/"+r.Attrs["next_try_in"])
		}
	}
	if want := []string{"1/100ms", "2/200ms", "4/800ms"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("interruption warnings (failures_in_a_row/next_try_in) %v, want %v", got, want)
	}

	// The next attempt is up to 1.6 s away: Redis answers, the
	// subscription may not yet.
	srv.Restart()
	sweepOK(t, h.Sweeper)
	rc.ZAdd(ctx, "s:{k1}", redis.Z{Score: notifyLive(), Member: "a"})
	h.Sweep()
	if got := sets(h); got != 1 {
		t.Errorf("a key written while the subscription was down: slot sets %v, want 1", got)
	}

	exportertest.WaitFor(t, time.Minute, "the subscription to come back", func() bool { return count(logs, subRestoredMsg) > 0 })
	rc.ZAdd(ctx, "s:{k2}", redis.Z{Score: notifyLive(), Member: "a"})
	h.Sweep() // one full scan, the first under the new subscription
	scans := exportertest.Calls(t, rc, "scan")
	rc.ZAdd(ctx, "s:{k3}", redis.Z{Score: notifyLive(), Member: "a"})
	exportertest.WaitFor(t, time.Minute, "the sweep to see the announced key", func() bool {
		h.Sweep()
		return sets(h) == 3
	})
	if got := exportertest.Calls(t, rc, "scan"); got != scans {
		t.Errorf("SCAN ran %d times with the subscription back", got-scans)
	}
	if n, m := count(logs, subRestoredMsg), count(logs, subDownMsg); n != 1 || m < 3 || m > 4 {
		t.Errorf("%d notes of the return (want 1), %d interruption warnings (want the 3 before it, and at most the 8th failure's):\n%s", n, m, logs)
	}
}

// TestNotifySubscriptionRefusedIsRetried: a resubscription Redis refuses
// (the ACL lost the keyspace channels) leaves go-redis on a working but
// unsubscribed connection; the watcher drops it, the sweeps fail with the
// refusal instead of trusting a subscription that hears nothing, and once
// the ACL allows it again a new subscription drives the reads.
func TestNotifySubscriptionRefusedIsRetried(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, "--notify-keyspace-events", notifyEventsAll)
	rc := srv.Client()
	logs := exportertest.NewLogs()
	h := exportertest.New(t, rc, notifyConfig(srv.Addr), logs.Logger())
	h.Sweep()

	// Redis disconnects a subscriber whose channels the ACL takes away.
	exportertest.Must(t, rc.Do(ctx, "ACL", "SETUSER", "default", "resetchannels").Err())
	exportertest.WaitFor(t, time.Minute, "the refusal", func() bool { return count(logs, subRefusedMsg) > 0 })
	if err := h.Sweeper.SweepOnce(ctx); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Errorf("a sweep without the keyspace channels: %v, want a NOPERM error", err)
	}

	exportertest.Must(t, rc.Do(ctx, "ACL", "SETUSER", "default", "allchannels").Err())
	h.Sweep() // subscribes again, and scans once
	scans := exportertest.Calls(t, rc, "scan")
	rc.ZAdd(ctx, "s:{k1}", redis.Z{Score: notifyLive(), Member: "a"})
	exportertest.WaitFor(t, time.Minute, "the sweep to see the announced key", func() bool {
		h.Sweep()
		return sets(h) == 1
	})
	if got := exportertest.Calls(t, rc, "scan"); got != scans {
		t.Errorf("SCAN ran %d times with the subscription back", got-scans)
	}
}
