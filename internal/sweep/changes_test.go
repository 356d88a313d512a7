package sweep_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/redisproc"
	"github.com/slotexporter/slot_exporter/internal/redistest"
	"github.com/slotexporter/slot_exporter/internal/topology"
)

// everyKind is one family of each kind, with timings short enough that
// members turn stale and expire while the test runs.
func everyKind(addr string, sampling ...string) string {
	return everyKindOn(redisproc.Config{Addr: addr}, sampling...)
}

// everyKindOn is everyKind with c's redis block.
func everyKindOn(c redisproc.Config, sampling ...string) string {
	return everyKindTimed(c, time.Second, sampling...)
}

// everyKindTimed is everyKindOn with every family's times in units of
// unit: a second for the tests whose members cross their edges, a minute
// for those that compare exporters sweeping one after the other and
// must see the same states however slowly a loaded machine lets them.
func everyKindTimed(c redisproc.Config, unit time.Duration, sampling ...string) string {
	// Unpaced: the checkpoints compare exporters that sweep one after
	// the other between two moments at which figures change with time,
	// and the pace (its 10 ms bursts at the prior cost) stretched three
	// sweeps past such a moment now and then.
	// A line of sampling replaces the default of the same key.
	for _, d := range []string{"interval: 1s", "window: 1m", "redis_cpu_share: 0"} {
		key, _, _ := strings.Cut(d, ":")
		if !slices.ContainsFunc(sampling, func(l string) bool { return strings.HasPrefix(l, key+":") }) {
			c.Sampling = append(c.Sampling, d)
		}
	}
	c.Sampling = append(c.Sampling, sampling...)
	c.Leaks = []string{"per_user_series: 1000"}
	times := func(name string, n time.Duration) string { return fmt.Sprintf("%s: %s", name, n*unit) }
	c.Families = []redisproc.Family{
		{Name: "slots", Kind: "slotset", Match: "s:*", Limit: 3, TTL: 6 * unit, Heartbeat: unit,
			MaxHold: 8 * unit, Extra: []string{times("stale_after", 2)}},
		{Name: "legacy", Kind: "counter", Match: "c:*", Limit: 3},
		{Name: "rate", Kind: "ratelimit", Match: "r:*", Limit: 5, Extra: []string{times("window", 2)}},
		{Name: "locks", Kind: "lock", Match: "l:*", TTL: 10 * unit, MaxHold: 12 * unit},
		{Name: "queue", Kind: "list", Match: "q:*", Extra: []string{times("max_wait", 2)}},
		{Name: "events", Kind: "stream", Match: "x:*", MaxHold: 2 * unit},
	}
	return c.YAML()
}

// readingMetrics are the exporter's figures about its own reading: they
// differ between the two modes on purpose (keys read) or by timing (a
// sweep that took longer than sampling.interval on a loaded machine is an
// overrun for one exporter and not for the other).
var readingMetrics = []string{
	"slot_exporter_keys_scanned_total", "slot_exporter_sweep_duration_seconds", "slot_exporter_sweep_overruns_total",
	"slot_exporter_last_sweep_timestamp_seconds", "slot_exporter_sampling_period_seconds",
	"slot_hold_duration_seconds_sum", "slot_exporter_clock_skew_seconds",
}

// sameFiguresWithin compares every series of a full read with the
// change-driven exporter's. Ages (floor, queue head wait, oldest pending)
// count from when each exporter first saw something: they agree within
// ageSlack seconds, as far apart as the exporters' sweeps were;
// everything else exactly.
func sameFiguresWithin(t *testing.T, when string, full, changed map[string]float64, ageSlack float64) {
	t.Helper()
	skip := func(k string) bool {
		for _, m := range readingMetrics {
			if k == m || strings.HasPrefix(k, m+"{") {
				return true
			}
		}
		return false
	}
	var keys []string
	for k := range full {
		keys = append(keys, k)
	}
	for k := range changed {
		if _, ok := full[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		if skip(k) {
			continue
		}
		a, okA := full[k]
		b, okB := changed[k]
		switch {
		case !okA:
			t.Errorf("%s: %s only in the change-driven exporter (%v)", when, k, b)
		case !okB:
			t.Errorf("%s: %s missing from the change-driven exporter (full read: %v)", when, k, a)
		case strings.Contains(k, "_seconds{") && math.Abs(a-b) <= ageSlack:
		case a != b:
			t.Errorf("%s: %s = %v, a full read says %v", when, k, b, a)
		}
	}
}

// timeEdges are the moments (ms after a base Redis time n) at which the
// exactness tests' figures change with time alone: a member turning stale
// or expired, a lease or a rate window running out, and, added as the
// test goes, ages passing a threshold some time after each exporter first
// saw something. Exporters that sweep one after the other are compared
// only when no such moment fell among their sweeps.
type timeEdges struct {
	now func() int64 // Redis time, ms
	n   int64
	ws  []edgeWindow
}

type edgeWindow struct{ lo, hi int64 }

// newTimeEdges: with ttl 6s and stale_after 2s, a member scored n+s is
// live until n+s-4s, stale until n+s, expired after (members are scored
// n+5s, n+9s to n+9.5s and n+60s); leases run 2s, 5s and 12s, rate
// windows 1.8s, slot-set keys 20s. A rate key (its TTL is 1.8s counted
// from n) counts as ttl_beyond_window while its PTTL is above the
// family's 2s window plus the 1s margin: until -1200. Its PTTL falls to
// the window itself at -200. With only -200 here, a round of sweeps
// taken across -1200 on a busy machine was compared: the change-driven
// exporter still counted 52 keys beyond, the full read after it 0.
func newTimeEdges(now func() int64, n int64) *timeEdges {
	e := &timeEdges{now: now, n: n}
	for _, at := range []int64{-1200, -200, 1000, 1800, 2000, 5000, 5100, 5200, 5500, 9000, 9100, 9200, 9500, 12000, 20000, 56000, 60000} {
		e.ws = append(e.ws, edgeWindow{at - 800, at + 300})
	}
	return e
}

// wrote records writes made between lo and hi (ms after n) that change
// with time d after them: a key set with a TTL of d.
func (e *timeEdges) wrote(lo, hi, d int64) {
	e.ws = append(e.ws, edgeWindow{lo + d - 800, hi + d + 300})
}

// writtenFor widens every window by the d ms the initial writes took:
// a TTL set at the end of them runs out d ms after its moment.
func (e *timeEdges) writtenFor(d int64) {
	for i := range e.ws {
		e.ws[i].hi += max(d, 0)
	}
}

// lockEdges records the moments of the locks the exactness tests set
// anew, from wrote (ms after n) until now, with a lease of 20 s: future
// while their PTTL is above the family's ttl (10 s) plus the default
// clock_skew_tolerance (5 s), 5 s after the write, and gone 20 s after.
// Without the first, CI compared a round of sweeps taken across it: the
// exporter that swept first still saw the new locks future, the full
// read after it live.
func lockEdges(e *timeEdges, wrote int64) {
	hi := e.since()
	e.wrote(wrote, hi, 5_000)
	e.wrote(wrote, hi, 20_000)
}

// since is Redis time, in ms after n.
func (e *timeEdges) since() int64 { return e.now() - e.n }

// lead is how far (ms) the exactness tests' time base n lies ahead of
// the moment they write their keys: the first round of sweeps, cold and
// on a loaded machine (seen at 1.8s), must end before the first moment
// of change, or an exporter that swept later would never see a key the
// one before it saw, and their counters would differ for good.
const lead = 5000

// ahead is a TTL of d counted from n: d plus the lead (0 stays 0: no TTL).
func ahead(d time.Duration) time.Duration {
	if d == 0 {
		return 0
	}
	return d + lead*time.Millisecond
}

// clear waits until Redis time is clear of every edge.
func (e *timeEdges) clear() {
	for moved := true; moved; {
		moved = false
		for _, w := range e.ws {
			if d := e.now() - e.n; d > w.lo && d < w.hi {
				time.Sleep(time.Duration(w.hi-d) * time.Millisecond)
				moved = true
			}
		}
	}
}

func (e *timeEdges) crossed(lo, hi int64) bool {
	for _, w := range e.ws {
		if lo < w.hi && hi > w.lo {
			return true
		}
	}
	return false
}

// sweepAtOneState runs sweep (every exporter's, one after the other)
// until one round of it falls between two edges, so that the exporters
// are compared at one Redis state. Every exporter sweeps as often as the
// others: counters of every sweep (keys skipped) agree. It returns by how
// much, in seconds, the exporters' ages may differ: an age counts from
// each exporter's first sighting (in the first round at the latest) to
// its own sweep (in the last round), so by as much as the first round's
// sweeps and the last round's were apart.
func (e *timeEdges) sweepAtOneState(t *testing.T, when string, sweep func()) float64 {
	t.Helper()
	var began, first int64
	for round := 0; ; round++ {
		e.clear()
		lo := e.now() - e.n
		sweep()
		ended := e.now() - e.n
		if round == 0 {
			began, first = lo, ended
			// A queue head stalls max_wait (2s), a slot or lock is
			// held past max_hold (8s, 12s) after its first sighting.
			for _, after := range []int64{2000, 8000, 12000} {
				e.ws = append(e.ws, edgeWindow{began + after - 800, first + after + 300})
			}
		}
		if !e.crossed(lo, ended) {
			if round == 0 {
				return float64(ended-lo) / 1000
			}
			return float64(first-began+ended-lo) / 1000
		}
		if round == 20 {
			t.Fatalf("%s: 20 rounds of sweeps each took in a moment at which figures change (last %d..%d ms)", when, lo, ended)
		}
		t.Logf("%s: the sweeps (%d..%d ms) took in a moment at which figures change; sweeping again", when, lo, ended)
	}
}

// TestChangesSameAsFullRead runs two exporters on one Redis, one reading
// every key every sweep and one reading only what client tracking says
// changed, and compares every figure at checkpoints: after writes between
// sweeps, with time alone moving members from live to stale to expired
// and counting leases and rate windows down, with keys expiring by TTL
// without any write, after a flush, and after the tracking connection is
// killed.
//
// Redis's active expiry is off: a key past its expiry stays in memory, and
// no invalidation names it, until something touches it, as happens on a
// loaded server whose expiry cycle lags behind. A full read finds it gone
// (reading it deletes it); the change-driven exporter must drop it by its
// expiry, whatever the kind.
func TestChangesSameAsFullRead(t *testing.T) {
	srv := redistest.Start(t, "--enable-debug-command", "local")
	rc := srv.Client()
	ctx := context.Background()
	if err := rc.Do(ctx, "DEBUG", "SET-ACTIVE-EXPIRE", "0").Err(); err != nil {
		t.Fatal(err)
	}
	// Sweeps are stepped by hand: the interval only says how long a
	// sweep's figures are served (a minute: the first exporter's must
	// not go stale while the other sweeps a loaded machine), and with
	// full_scan_interval how much of the reconciliation is due per sweep.
	// A user leaves the per-user series a window after its last use:
	// the window is longer than the test, however slow the machine.
	slow := []string{"interval: 1m", "full_scan_interval: 5h", "window: 10m"}
	full := exportertest.New(t, rc, everyKind(srv.Addr, append(slow, "track_changes: false")...))
	changed := exportertest.New(t, rc, everyKind(srv.Addr, append(slow, "track_changes: true")...))
	scanned := func(h *exportertest.Harness) float64 {
		var n float64
		for _, v := range exportertest.Series(h.Metrics(), "slot_exporter_keys_scanned_total") {
			n += v
		}
		return n
	}
	now := func() int64 { return exportertest.RedisTime(t, rc) }
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// A state that changes between the two exporters' sweeps would
	// differ for that reason alone: edges says when it does.
	var n int64
	var edges *timeEdges
	populate := func() {
		n = now() + lead
		edges = newTimeEdges(now, n)
		for i := range 40 {
			u := fmt.Sprintf("{u%02d}", i)
			must(rc.ZAdd(ctx, "s:"+u, redis.Z{Score: float64(n + 5000), Member: "h1"},
				redis.Z{Score: float64(n + 9000 + int64(i%3)*100), Member: "h2"}).Err())
			must(rc.PExpire(ctx, "s:"+u, ahead(20*time.Second)).Err())
			// Leases, and counters' and queues' keys, gone by the 3s
			// checkpoint, by the 7s one, or never.
			lease := ahead([]time.Duration{2 * time.Second, 5 * time.Second, 12 * time.Second, 0}[i%4])
			must(rc.Set(ctx, "c:"+u, i%5-1, lease).Err())
			must(rc.Set(ctx, "r:"+u, i%7, ahead(1800*time.Millisecond)).Err())
			must(rc.Set(ctx, "l:"+u, "token-"+u, lease).Err())
			must(rc.RPush(ctx, "q:"+u, "job-a"+u, "job-b"+u).Err())
			if lease > 0 {
				must(rc.PExpire(ctx, "q:"+u, lease).Err())
			}
			must(rc.XAdd(ctx, &redis.XAddArgs{Stream: "x:" + u, Values: []string{"k", "v"}}).Err())
			must(rc.XGroupCreate(ctx, "x:"+u, "g", "0").Err())
		}
		// A key of another type under a family's pattern: skipped,
		// counted each sweep in both modes.
		must(rc.Set(ctx, "s:{bad}", "x", 0).Err())
		// The TTLs count from each write: the last ones run out as
		// late as the writes took.
		edges.writtenFor(edges.since() + lead)
	}
	// at waits until Redis time n + ms (on a loaded machine it may be
	// later: the figures are compared all the same, at one state).
	at := func(ms int64) {
		t.Helper()
		if d := n + ms - now(); d > 0 {
			time.Sleep(time.Duration(d) * time.Millisecond)
		}
	}
	populate()
	ageSlack := 0.5
	check := func(when string) {
		t.Helper()
		ageSlack = max(ageSlack, edges.sweepAtOneState(t, when, func() { changed.Sweep(); full.Sweep() }))
		sameFiguresWithin(t, when, full.Metrics(), changed.Metrics(), ageSlack)
	}
	check("first sweep")
	// Due: the keys read every sweep (40 streams, 1 skipped key) and
	// about 241 / 300 keys of the reconciliation (interval 1m,
	// full_scan_interval 5h), read a SCAN page at a time. Counted in
	// the round compared: there may be more than one.
	var d float64
	ageSlack = max(ageSlack, edges.sweepAtOneState(t, "nothing written", func() {
		before := scanned(changed)
		changed.Sweep()
		d = scanned(changed) - before
		full.Sweep()
	}))
	sameFiguresWithin(t, "nothing written", full.Metrics(), changed.Metrics(), ageSlack)
	if d > 41+10 {
		t.Errorf("a sweep with nothing written read %v keys; only the volatile ones (1 skipped key, 40 streams) and a slice of the reconciliation are due", d)
	}

	// Writes between sweeps, of every kind.
	wrote := edges.since()
	must(rc.ZAdd(ctx, "s:{u01}", redis.Z{Score: float64(n + 9500), Member: "h3"}).Err())
	must(rc.ZRem(ctx, "s:{u02}", "h1").Err())
	must(rc.Del(ctx, "s:{u03}").Err())
	must(rc.Incr(ctx, "c:{u04}").Err())
	must(rc.Incr(ctx, "r:{u05}").Err())
	must(rc.Del(ctx, "l:{u06}").Err())
	must(rc.Set(ctx, "l:{u07}", "another", 20*time.Second).Err())
	// A key read every sweep (skipped) and written: named by the feed
	// too, and read once all the same (the skip counted once).
	must(rc.Set(ctx, "s:{bad}", "y", 0).Err())
	lockEdges(edges, wrote)
	// Its 2s lease may have run out on a loaded machine: a pop of
	// nothing is a write all the same.
	if err := rc.RPop(ctx, "q:{u08}").Err(); !errors.Is(err, redis.Nil) {
		must(err)
	}
	must(rc.LPush(ctx, "q:{u09}", "new").Err())
	must(rc.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: "w", Streams: []string{"x:{u10}", ">"}, Count: 1}).Err())
	check("after writes")

	// Time alone: members go stale, rate windows and leases run out and
	// their keys expire without a write; queue heads wait past max_wait.
	at(3000)
	check("h1 stale, rate windows, short leases, counters and queues gone, queues stalled")
	at(7000)
	check("h1 expired, h2 stale, 5s leases, counters and queues gone")

	// A FLUSHDB of another database: one invalidation with no key, as
	// for any flush. Slot sets and locks read what changed and a few
	// held keys, which survived; the other kinds read everything.
	other := srv.ClientOf(7)
	must(other.Set(ctx, "page:/", "<html>", 0).Err())
	must(other.FlushDB(ctx).Err())
	must(rc.ZRem(ctx, "s:{u14}", "h2").Err())
	must(rc.Del(ctx, "s:{u15}").Err())
	must(rc.Del(ctx, "l:{u19}").Err())
	must(rc.Incr(ctx, "c:{u16}").Err())
	check("after a FLUSHDB of another database")

	// A flush: one invalidation with no key.
	must(rc.FlushAll(ctx).Err())
	check("after FLUSHALL")
	populate()
	check("repopulated")

	// The tracking connections killed: everything is read again.
	must(rc.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err())
	time.Sleep(100 * time.Millisecond)
	must(rc.ZAdd(ctx, "s:{u11}", redis.Z{Score: float64(n + 9500), Member: "after-kill"}).Err())
	check("tracking connection killed")
	must(rc.Incr(ctx, "c:{u12}").Err())
	check("tracking reconnected")
}

// TestShardsAddUp: three exporters, each with one shard of the hash
// slots, together report what one exporter reports.
func TestShardsAddUp(t *testing.T) {
	srv := redistest.Start(t)
	rc := srv.Client()
	ctx := context.Background()
	n := exportertest.RedisTime(t, rc)
	for i := range 300 {
		u := fmt.Sprintf("{u%03d}", i)
		// The family's times are in minutes: "a" stays live for 110 s
		// (ttl 6m, stale after 2m) and every other state holds as long,
		// far from every edge while four exporters sweep a loaded
		// machine. With times in seconds, "a" went stale between one
		// exporter's sweep and the shards' on a busy two-core machine.
		rc.ZAdd(ctx, "s:"+u, redis.Z{Score: float64(n + 350_000), Member: "a"}, redis.Z{Score: float64(n - 100 - int64(i%2)), Member: "b"})
		rc.Set(ctx, "c:"+u, i%4, 0)
		rc.Set(ctx, "r:"+u, i%6, time.Hour)
		rc.Set(ctx, "l:"+u, "t", time.Hour)
		rc.RPush(ctx, "q:"+u, "j")
		rc.XGroupCreateMkStream(ctx, "x:"+u, "g", "0")
		rc.XAdd(ctx, &redis.XAddArgs{Stream: "x:" + u, Values: []string{"k", "v"}})
	}
	// Figures served for a minute: at a 1s interval, those of the
	// exporter swept first went stale while the others swept a loaded
	// machine, and it reported no slot set at all.
	one := exportertest.New(t, rc, everyKindTimed(redisproc.Config{Addr: srv.Addr}, time.Minute, "interval: 1m"))
	var shards []*exportertest.Harness
	for i := range 3 {
		shards = append(shards, exportertest.New(t, rc, everyKindTimed(redisproc.Config{Addr: srv.Addr}, time.Minute, "interval: 1m", fmt.Sprintf("shard: %d/3", i))))
	}
	for range 2 {
		one.Sweep()
		sum := map[string]float64{}
		for _, h := range shards {
			h.Sweep()
			for k, v := range h.Metrics() {
				sum[k] += v
			}
		}
		want := one.Metrics()
		if live := want[`slot_members{family="slots",state="live"}`]; live != 300 {
			t.Errorf("one exporter reports %v live members of 300: the states moved while the exporters swept", live)
		}
		for k, v := range want {
			// Sums over instances are what Prometheus would add up;
			// the exporter's own and the family's config are per
			// instance.
			if strings.HasPrefix(k, "slot_exporter_") || strings.HasPrefix(k, "slot_family_") || strings.Contains(k, "_seconds") {
				continue
			}
			if sum[k] != v {
				t.Errorf("%s: shards add up to %v, one exporter says %v", k, sum[k], v)
			}
		}
		var perShard []float64
		for _, h := range shards {
			perShard = append(perShard, h.Metrics()[`slot_sets{family="slots"}`])
		}
		for i, s := range perShard {
			if s == 0 || s == 300 {
				t.Errorf("shard %d/3 reports %v of 300 slot sets: the keys are not split", i, s)
			}
		}
	}
}

// TestChangedSweepCutOffReturns: a change-driven sweep reads the changed
// keys on each node and, in a reader of their own, the keys read every
// sweep (here strings under a list family's pattern, skipped). When the
// sweep is cut off while both are reading, both fail; the sweep must
// still return, with the error, and the next one read everything again.
func TestChangedSweepCutOffReturns(t *testing.T) {
	srv := redistest.Start(t)
	rc := srv.Client()
	ctx := context.Background()
	yaml := redisproc.Config{
		Addr: srv.Addr,
		// A key budget of 100 keys/s keeps both readers waiting for a
		// second or two, long enough to cut them off in the middle.
		Sampling: []string{"interval: 1s", "track_changes: true", "redis_cpu_share: 0", "max_keys_per_second: 100"},
		Families: []redisproc.Family{{Name: "queue", Kind: "list", Match: "q:*", Extra: []string{"max_wait: 1m"}}},
	}.YAML()
	h := exportertest.New(t, rc, yaml)
	for i := range 100 {
		if err := rc.Set(ctx, fmt.Sprintf("q:{s%03d}", i), "not a list", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := rc.RPush(ctx, "q:{a}", "job").Err(); err != nil {
		t.Fatal(err)
	}
	h.Sweep() // a full read: 101 keys in about a second
	for i := range 100 {
		if err := rc.RPush(ctx, fmt.Sprintf("q:{n%03d}", i), "job").Err(); err != nil {
			t.Fatal(err)
		}
	}
	// The budget's burst is spent by now: this sweep reads 100 changed
	// keys and 100 skipped ones at 100 keys/s, and is cut off after 300ms.
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- h.Sweeper.SweepOnce(cctx) }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a sweep cut off after 300ms of 2s of reads returned no error")
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("a change-driven sweep cut off while its readers waited never returned")
	}
	h.Sweep()
	if got := h.Metrics()[`slot_queue_items{family="queue"}`]; got != 101 {
		t.Errorf("slot_queue_items = %v after the sweep that followed, want 101", got)
	}
}

// TestChangesWithoutPTTL: counters and queues read PTTL only to replay
// their keys, for their expiry. An ACL written for their reads alone
// (GET; LLEN, LINDEX) but granting change tracking does not fail their
// sweeps: their keys are read every sweep, as without tracking.
func TestChangesWithoutPTTL(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client()
	ctx := context.Background()
	if err := admin.Do(ctx, "ACL", "SETUSER", "exporter", "on", ">pw", "%R~*", "resetchannels", "&__redis__:invalidate", "-@all",
		"+scan", "+time", "+info", "+getrange", "+llen", "+lindex", "+client|id", "+client|tracking", "+subscribe", "+ping").Err(); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		u := fmt.Sprintf("{u%d}", i)
		if err := admin.Set(ctx, "c:"+u, i, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		if err := admin.RPush(ctx, "q:"+u, "job").Err(); err != nil {
			t.Fatal(err)
		}
	}
	narrow := redis.NewClient(&redis.Options{Addr: srv.Addr, Username: "exporter", Password: "pw", DisableIdentity: true})
	t.Cleanup(func() { _ = narrow.Close() })
	h := exportertest.New(t, narrow, redisproc.Config{
		Addr:     srv.Addr,
		Sampling: []string{"interval: 1s", "track_changes: true", "redis_cpu_share: 0"},
		Families: []redisproc.Family{
			{Name: "legacy", Kind: "counter", Match: "c:*", Limit: 3},
			{Name: "queue", Kind: "list", Match: "q:*", Extra: []string{"max_wait: 1m"}},
		},
	}.YAML())
	for range 3 {
		h.Sweep()
	}
	if err := admin.Incr(ctx, "c:{u0}").Err(); err != nil {
		t.Fatal(err)
	}
	h.Sweep()
	exportertest.Expect(t, h.Metrics(), map[string]float64{
		`slot_users_active{family="legacy"}`: 5, // u0 at 0, then INCRed
		`slot_queue_items{family="queue"}`:   5,
		// Every key, every sweep.
		`slot_exporter_keys_scanned_total{family="legacy"}`: 20,
		`slot_exporter_keys_scanned_total{family="queue"}`:  20,
	})
	if log, err := admin.Do(ctx, "ACL", "LOG").Slice(); err != nil || len(log) == 0 {
		t.Fatalf("ACL LOG %v, %v: the test's ACL refused no PTTL, it proves nothing", log, err)
	}
}

// TestClusterChangesSameAsFullRead is TestChangesSameAsFullRead on a real
// cluster of three masters with a replica each: an exporter reading every
// key from the masters, one reading only what changed from the masters,
// and one reading only what changed from the replicas, which hear of
// writes by replication. Every figure is compared at checkpoints: after
// writes on every master, with time alone, halfway through a slot's
// migration (masters only: a replica cannot follow one, see
// TestClusterReshardDuringSweeps) and once it is done, after writes to
// the moved keys on their new node, after slots holding members move
// while all three sweep, after a failover, and after a master is added
// and written to.
func TestClusterChangesSameAsFullRead(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3, 1)
	cc := cl.Client()
	ctx := context.Background()
	// The change-driven exporters log in as a user of their own: the
	// feed's connections to each node must authenticate as the cluster
	// client's do.
	pw := redisproc.Secret()
	pwFile := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(pwFile, []byte(pw), 0o600); err != nil {
		t.Fatal(err)
	}
	exporterUser := func(c *redis.Client) error {
		return c.Do(ctx, "ACL", "SETUSER", "exporter", "on", ">"+pw, "~*",
			"resetchannels", "&__redis__:invalidate", "+@all").Err()
	}
	for _, s := range cl.Nodes {
		if err := exporterUser(cl.NodeClient(s)); err != nil {
			t.Fatal(err)
		}
	}
	on := func(readFrom, track string, login ...string) *exportertest.Harness {
		// Sweeps are stepped by hand: the interval only says how long
		// a sweep's figures are served. At 1s, the figures of the
		// exporter swept first were dropped as stale while the other
		// two swept a loaded machine ("first sweep: ... missing"). A
		// user leaves the per-user series a window after its last
		// use: the window is longer than the test.
		return newConfiguredHarness(t, everyKindOn(redisproc.Config{Redis: append(clusterSection(cl, readFrom), login...)},
			"interval: 1m", "full_scan_interval: 5h", "window: 10m", "timeout: 2m", "track_changes: "+track), nil)
	}
	login := []string{"username: exporter", fmt.Sprintf("password_file: %q", pwFile)}
	full, changed, replica := on("primary", "false"), on("primary", "true", login...), on("replica", "true", login...)
	scanned := func(h *exportertest.Harness) float64 {
		var n float64
		for _, v := range exportertest.Series(h.Metrics(), "slot_exporter_keys_scanned_total") {
			n += v
		}
		return n
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	now := func() int64 { return exportertest.RedisTime(t, cc) }

	// Users spread over every master, and a dozen more in one slot, the
	// one migrated key by key.
	const slot = 200
	var users []string
	for i := range 40 {
		users = append(users, fmt.Sprintf("u%02d", i))
	}
	inSlot := usersInSlot(slot, 12)
	users = append(users, inSlot...)
	n := now() + lead
	pipe := cc.Pipeline()
	for i, u := range users {
		u = "{" + u + "}"
		pipe.ZAdd(ctx, "s:"+u, redis.Z{Score: float64(n + 5000), Member: "h1"},
			redis.Z{Score: float64(n + 9000 + int64(i%3)*100), Member: "h2"})
		pipe.PExpire(ctx, "s:"+u, ahead(20*time.Second))
		lease := ahead([]time.Duration{2 * time.Second, 5 * time.Second, 12 * time.Second, 0}[i%4])
		pipe.Set(ctx, "c:"+u, i%5-1, lease)
		pipe.Set(ctx, "r:"+u, i%7, ahead(1800*time.Millisecond))
		pipe.Set(ctx, "l:"+u, "token-"+u, lease)
		pipe.RPush(ctx, "q:"+u, "job-a"+u, "job-b"+u)
		if lease > 0 {
			pipe.PExpire(ctx, "q:"+u, lease)
		}
		pipe.XAdd(ctx, &redis.XAddArgs{Stream: "x:" + u, Values: []string{"k", "v"}})
		pipe.XGroupCreate(ctx, "x:"+u, "g", "0")
	}
	_, err := pipe.Exec(ctx)
	must(err)
	// Every moment at which a figure changes with time alone: a round
	// of sweeps that one fell into is swept again. The TTLs count from
	// each key's write, which a loaded machine spreads over the whole
	// pipeline: the windows reach as far past their moment as the last
	// write came after n - lead (rate windows that ran out 0.3 s after
	// their window's end were seen under load).
	edges := newTimeEdges(now, n)
	edges.writtenFor(edges.since() + lead)
	ageSlack := 0.5
	check := func(when string, withReplica bool) {
		t.Helper()
		cl.WaitReplicated()
		// Swept even when not compared: counters of every sweep (keys
		// skipped) must have seen as many sweeps as the full read's.
		ageSlack = max(ageSlack, edges.sweepAtOneState(t, when, func() { changed.Sweep(); replica.Sweep(); full.Sweep() }))
		fm := full.Metrics()
		sameFiguresWithin(t, when, fm, changed.Metrics(), ageSlack)
		if withReplica {
			sameFiguresWithin(t, when+" (replicas)", fm, replica.Metrics(), ageSlack)
		}
	}
	check("first sweep", true)

	// Writes on every master.
	owners := map[*redistest.Server]bool{}
	wrote := edges.since()
	for i, u := range users[:12] {
		owners[cl.SlotOwner(tagSlot(u))] = true
		u = "{" + u + "}"
		switch i % 6 {
		case 0:
			must(cc.ZAdd(ctx, "s:"+u, redis.Z{Score: float64(n + 60_000), Member: "h3"}).Err())
		case 1:
			must(cc.ZRem(ctx, "s:"+u, "h1").Err())
		case 2:
			must(cc.Incr(ctx, "c:"+u).Err())
		case 3:
			must(cc.Set(ctx, "l:"+u, "another", 20*time.Second).Err())
		case 4:
			// Its 2s lease may have run out under load: a pop of
			// nothing is a write all the same.
			if err := cc.RPop(ctx, "q:"+u).Err(); !errors.Is(err, redis.Nil) {
				must(err)
			}
		case 5:
			must(cc.Del(ctx, "s:"+u).Err())
		}
	}
	lockEdges(edges, wrote)
	if len(owners) != 3 {
		t.Fatalf("the writes reached %d masters, want all 3", len(owners))
	}
	check("after writes on every master", true)

	// Time alone: h1 stale, rate windows and 2s leases run out.
	if d := n + 3000 - now(); d > 0 {
		time.Sleep(time.Duration(d) * time.Millisecond)
	}
	check("time alone", true)

	// Halfway through a slot's migration, then done.
	from := cl.SlotOwner(slot)
	to := cl.OtherMaster(from)
	// Half its keys: how many are left by now (leases run out) depends
	// on how long the checks before took.
	inSlotKeys, err := cl.NodeClient(from).ClusterCountKeysInSlot(ctx, slot).Result()
	must(err)
	must(cl.BeginMigration(ctx, slot, from, to))
	if moved, err := cl.MoveKeys(ctx, slot, from, to, 7, int(inSlotKeys/2)); err != nil || moved == 0 || int64(moved) == inSlotKeys {
		t.Fatalf("moved %d keys of %d: %v", moved, inSlotKeys, err)
	}
	check("halfway through a slot's migration", false)
	_, err = cl.MoveKeys(ctx, slot, from, to, 100, 0)
	must(err)
	must(cl.FinishMigration(ctx, slot, from, to))
	cl.WaitHealthy(2 * time.Minute)
	check("slot migrated", true)
	// The moved keys written on their new node.
	for _, u := range inSlot[:4] {
		must(cc.ZAdd(ctx, "s:{"+u+"}", redis.Z{Score: float64(n + 60_000), Member: "h4"}).Err())
		must(cc.Incr(ctx, "c:{"+u+"}").Err())
	}
	check("moved keys written on their new node", true)

	// Slots holding members move to the next master while all three
	// exporters sweep over and over.
	masters := cl.Masters()
	next := map[*redistest.Server]*redistest.Server{masters[0]: masters[1], masters[1]: masters[2], masters[2]: masters[0]}
	done := make(chan error, 1)
	go func() {
		defer close(done)
		for _, u := range users[12:24] {
			s := tagSlot(u)
			o := cl.SlotOwner(s)
			if err := cl.MigrateSlot(ctx, s, o, next[o]); err != nil {
				done <- err
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	sweeps := 0
	for migrating := true; migrating; {
		select {
		case err := <-done:
			must(err)
			migrating = false
		default:
		}
		for _, h := range []*exportertest.Harness{changed, replica, full} {
			if err := h.Sweeper.SweepOnce(ctx); err != nil {
				t.Errorf("sweep during the reshard: %v", err)
			}
		}
		sweeps++
	}
	cl.WaitHealthy(2 * time.Minute)
	t.Logf("%d sweeps of each exporter overlapped the migration of 12 slots", sweeps)
	check("slots moved while sweeping", true)

	// A failover: the promoted replica is a node new to the sweep.
	cl.Failover(cl.Replicas()[0], 2*time.Minute)
	check("after a failover", true)
	must(cc.ZAdd(ctx, "s:{u30}", redis.Z{Score: float64(n + 60_000), Member: "h5"}).Err())
	check("written after the failover", true)

	// A master added under writes: a node new to the sweep, given the
	// slots of four users, whose keys are written on it once they are
	// there. It has no replica: the replica-reading exporter reads that
	// shard from its master.
	var addSlots []int
	for _, u := range users[24:28] {
		addSlots = append(addSlots, tagSlot(u))
	}
	added := cl.AddMaster(ctx, exporterUser, addSlots...)
	check("a master added", true)
	for _, u := range users[24:28] {
		if o := cl.SlotOwner(tagSlot(u)); o != added {
			t.Fatalf("%s's slot is on %s, not on the added master %s", u, o.Addr, added.Addr)
		}
		must(cc.ZAdd(ctx, "s:{"+u+"}", redis.Z{Score: float64(n + 60_000), Member: "h6"}).Err())
		must(cc.Incr(ctx, "c:{"+u+"}").Err())
	}
	check("written on the added master", true)

	// Change tracking reads only what changed on a cluster too: about
	// half the keys of a full read over this test's checkpoints, most of
	// them written or moved on purpose.
	f, c, r := scanned(full), scanned(changed), scanned(replica)
	t.Logf("keys read: %v by the full read, %v from the masters and %v from the replicas with track_changes", f, c, r)
	if c > 0.8*f || r > 0.8*f {
		t.Errorf("with track_changes on a cluster the exporters read %v and %v keys, the full read %v: they read every key, not what changed", c, r, f)
	}
}

// TestClusterKeyGoneMidMigration: a key of a slot being migrated that is
// deleted (or expires) on its source before it could move. The source's
// feed names it; the source answers ASK (not here) and the target, asked,
// has nothing: it is gone, and the change-driven exporter ends it, as a
// full read (whose SCAN no longer lists it) does. Carried instead, as a
// key that could not be read, its user stayed: the lock users a
// change-driven exporter counted halfway through a migration under load
// (17 against a full read's 14).
func TestClusterKeyGoneMidMigration(t *testing.T) {
	t.Parallel()
	m := deleteMidMigration(t, 0, "primary")
	m.compare("a key deleted on its source halfway through its slot's migration")
}

// TestClusterReplicaKeyGoneBeforeItsSlotMoved: reading replicas, a key
// deleted on its source halfway through its slot's migration, with no
// sweep until the migration is over. The source's replica names the key;
// asked for it, that replica now answers MOVED, and the new owner's
// replica has nothing. Its master's answer is the truth: carried as a key
// that could not be read, the key kept its user one sweep too long.
func TestClusterReplicaKeyGoneBeforeItsSlotMoved(t *testing.T) {
	t.Parallel()
	m := deleteMidMigration(t, 1, "replica")
	ctx := context.Background()
	if _, err := m.cl.MoveKeys(ctx, m.slot, m.from, m.to, 100, 0); err != nil {
		t.Fatal(err)
	}
	if err := m.cl.FinishMigration(ctx, m.slot, m.from, m.to); err != nil {
		t.Fatal(err)
	}
	m.cl.WaitHealthy(time.Minute)
	m.cl.WaitReplicated()
	m.compare("a key deleted on its source before its slot moved")
}

// midMigration is a cluster with 4 lock keys in one slot, a full-read
// exporter and a change-driven one, halfway through the slot's migration:
// 2 keys moved, and one of the 2 left on the source deleted there.
type midMigration struct {
	t             *testing.T
	cl            *redistest.Cluster
	slot          int
	from, to      *redistest.Server
	full, changed *exportertest.Harness
	began         time.Time
}

func deleteMidMigration(t *testing.T, replicas int, readFrom string) *midMigration {
	cl := redistest.StartCluster(t, 3, replicas)
	cc := cl.Client()
	ctx := context.Background()
	m := &midMigration{t: t, cl: cl, slot: 300, began: time.Now()}
	for _, u := range usersInSlot(m.slot, 4) {
		if err := cc.Set(ctx, "l:{"+u+"}", "token-"+u, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
	}
	cl.WaitReplicated()
	on := func(track string) *exportertest.Harness {
		return newConfiguredHarness(t, everyKindOn(redisproc.Config{Redis: clusterSection(cl, readFrom)},
			"interval: 1m", "window: 10m", "timeout: 2m", "track_changes: "+track), nil)
	}
	m.full, m.changed = on("false"), on("true")
	m.changed.Sweep()
	m.changed.Sweep()
	m.full.Sweep()
	sameFiguresWithin(t, "before the migration", m.full.Metrics(), m.changed.Metrics(), time.Since(m.began).Seconds())

	m.from = cl.SlotOwner(m.slot)
	m.to = cl.OtherMaster(m.from)
	if err := cl.BeginMigration(ctx, m.slot, m.from, m.to); err != nil {
		t.Fatal(err)
	}
	if moved, err := cl.MoveKeys(ctx, m.slot, m.from, m.to, 1, 2); err != nil || moved != 2 {
		t.Fatalf("moved %d keys of 4: %v", moved, err)
	}
	left, err := cl.NodeClient(m.from).ClusterGetKeysInSlot(ctx, m.slot, 10).Result()
	if err != nil || len(left) != 2 {
		t.Fatalf("keys left on the source: %q, %v", left, err)
	}
	if err := cl.NodeClient(m.from).Del(ctx, left[0]).Err(); err != nil {
		t.Fatal(err)
	}
	return m
}

// compare sweeps both exporters and compares them, and the lock users
// with the 3 keys left.
func (m *midMigration) compare(when string) {
	m.changed.Sweep()
	m.full.Sweep()
	got := m.changed.Metrics()
	sameFiguresWithin(m.t, when, m.full.Metrics(), got, time.Since(m.began).Seconds())
	if n := got[`slot_users_active{family="locks"}`]; n != 3 {
		m.t.Errorf("%s: slot_users_active{family=\"locks\"} = %v, want 3: one of the 4 lock keys was deleted", when, n)
	}
}

// hourSets is a config with one slot-set family, "slots" over s:*, whose
// members live an hour: the feed-limit tests write nothing that changes
// with time while they run.
func hourSets(addr string, sampling ...string) string {
	return redisproc.Config{
		Addr:     addr,
		Sampling: append([]string{"interval: 1m", "full_scan_interval: 5h", "redis_cpu_share: 0"}, sampling...),
		Families: []redisproc.Family{{Name: "slots", Kind: "slotset", Match: "s:*", Limit: 5, TTL: time.Hour, Heartbeat: time.Minute, MaxHold: 2 * time.Hour}},
	}.YAML()
}

// writeSets adds member, expiring at expiry, to slot sets from to
// from+n-1 of hourSets' family, in one pipeline.
func writeSets(t *testing.T, rc *redis.Client, from, n int, member string, expiry float64) {
	t.Helper()
	ctx := context.Background()
	p := rc.Pipeline()
	for i := from; i < from+n; i++ {
		p.ZAdd(ctx, fmt.Sprintf("s:{u%04d}", i), redis.Z{Score: expiry, Member: member})
	}
	if _, err := p.Exec(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestChangesPastLimitReadEverything: once more than a quarter of a
// family's keys on a node were written since its last read, the feed stops
// listing their names and the next sweep reads every key; under that,
// only what changed. Either way every figure is a full read's.
func TestChangesPastLimitReadEverything(t *testing.T) {
	srv := redistest.Start(t)
	rc := srv.Client()
	const sets = 6000 // the limit: 1500 names
	full := exportertest.New(t, rc, hourSets(srv.Addr, "window: 10m", "track_changes: false"))
	changed := exportertest.New(t, rc, hourSets(srv.Addr, "window: 10m", "track_changes: true"))
	expiry := float64(exportertest.RedisTime(t, rc) + time.Hour.Milliseconds())
	write := func(from, n int, member string) {
		t.Helper()
		writeSets(t, rc, from, n, member, expiry)
	}
	scanned := func() float64 { return changed.Metrics()[`slot_exporter_keys_scanned_total{family="slots"}`] }
	step := func(when string, least, most float64) {
		t.Helper()
		before := scanned()
		changed.Sweep()
		full.Sweep()
		if d := scanned() - before; d < least || d > most {
			t.Errorf("%s: the change-driven sweep read %v keys, want %v to %v", when, d, least, most)
		}
		sameFiguresWithin(t, when, full.Metrics(), changed.Metrics(), 0.5)
	}
	write(0, sets, "a")
	step("first sweep", sets, sets)
	// A slice of the reconciliation is due each sweep: 6000 keys * 1m
	// / 5h, 20 keys, a SCAN page at most.
	write(0, 1400, "b")
	step("1400 of 6000 written", 1400, 1400+40)
	write(100, 1600, "c")
	step("1600 of 6000 written", sets, sets)
	write(2000, 10, "d")
	step("10 written", 10, 10+40)
}

// TestChangesFirstReadLimit: before a first read completes nobody knows
// how many keys there are, so the feed's limit follows the keys read so
// far (a quarter of them, at least 1024 names). Every key written while
// the first read has read few of them is more than a quarter: by the end
// of the read the feed has given up listing their names, rather than
// hold every one. 1200 keys written once it has read 5200 of 6000 are
// under a quarter of those, and listed.
func TestChangesFirstReadLimit(t *testing.T) {
	const sets = 6000
	for _, c := range []struct {
		after, written int
		all            bool
	}{{0, sets, true}, {5200, 1200, false}} {
		srv := redistest.Start(t)
		rc := srv.Client()
		ctx := context.Background()
		// 2000 keys a second: the first read takes about 3s, the
		// writes below a few milliseconds.
		h := exportertest.New(t, rc, hourSets(srv.Addr, "max_keys_per_second: 2000", "track_changes: true"))
		expiry := float64(exportertest.RedisTime(t, rc) + time.Hour.Milliseconds())
		write := func(n int, member string) {
			t.Helper()
			writeSets(t, rc, 0, n, member, expiry)
		}
		// read is how many keys the first read has read: its PTTLs.
		read := func() int {
			t.Helper()
			info, err := rc.Do(ctx, "INFO", "commandstats").Text()
			if err != nil {
				t.Fatal(err)
			}
			_, calls, _ := strings.Cut(info, "cmdstat_pttl:calls=")
			calls, _, _ = strings.Cut(calls, ",")
			n, _ := strconv.Atoi(calls)
			return n
		}
		// tracking: the feed has connected, as the first sweep planned
		// its reads (a client with the flag t).
		tracking := func() bool {
			t.Helper()
			list, err := rc.ClientList(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			for _, line := range strings.Split(list, "\n") {
				if _, flags, ok := strings.Cut(line, " flags="); ok && strings.Contains(strings.Fields(flags)[0], "t") {
					return true
				}
			}
			return false
		}
		write(sets, "a")
		done := make(chan struct{})
		go func() { defer close(done); h.Sweep() }()
		for !tracking() || read() < c.after {
			select {
			case <-done:
				t.Fatalf("%d written after %d read: the first read ended first", c.written, c.after)
			case <-time.After(10 * time.Millisecond):
			}
		}
		write(c.written, "b")
		if c.all && read() >= sets {
			t.Fatalf("the first read had read every key when the writes were done: it cannot show the limit")
		}
		<-done
		names, err := h.Sweeper.TakeChanges(ctx, topology.Node{Addr: srv.Addr, C: rc}, "slots")
		if err != nil {
			t.Fatal(err)
		}
		if c.all && !names.All() {
			t.Errorf("%d written after %d read: the feed lists %d names, want none and All", c.written, c.after, names.Len())
		}
		if !c.all && (names.All() || names.Len() != c.written) {
			t.Errorf("%d written after %d read: All %v, %d names, want %d", c.written, c.after, names.All(), names.Len(), c.written)
		}
	}
}

// TestReconciliationScansAChunkAtATime: the slow reconciliation SCANs
// pages no larger than a chunk of reads (redisread.Plan.ScanPage), as a
// full read does: its pages of scan_count (1000) held Redis about a
// millisecond each, where other clients' p99 saw them. 5000 sets read
// again every 5 minutes at an interval of 1 minute is 1000 keys a sweep;
// a key budget of 100,000 a second makes the chunk 100.
func TestReconciliationScansAChunkAtATime(t *testing.T) {
	srv := redistest.Start(t)
	rc := srv.Client()
	const sets = 5000
	writeSets(t, rc, 0, sets, "h", float64(exportertest.RedisTime(t, rc)+time.Hour.Milliseconds()))
	h := exportertest.New(t, rc, redisproc.Config{
		Addr: srv.Addr,
		Sampling: []string{"interval: 1m", "full_scan_interval: 5m", "redis_cpu_share: 0", "max_keys_per_second: 100000",
			"window: 10m", "track_changes: true"},
		Families: []redisproc.Family{{Name: "slots", Kind: "slotset", Match: "s:*", Limit: 5, TTL: time.Hour, Heartbeat: time.Minute, MaxHold: 2 * time.Hour}},
	}.YAML())
	h.Sweep() // the first read, every key
	scans, reads := exportertest.Calls(t, rc, "scan"), exportertest.Calls(t, rc, "pttl")
	h.Sweep() // nothing written: the reconciliation's slice alone
	scans, reads = exportertest.Calls(t, rc, "scan")-scans, exportertest.Calls(t, rc, "pttl")-reads
	if reads < 900 || reads > 1100 {
		t.Fatalf("the reconciliation read %d keys, want about 1000", reads)
	}
	if scans < reads/150 {
		t.Errorf("the reconciliation read %d keys in %d SCANs: pages of more than the chunk of 100", reads, scans)
	}
}
