package changefeed

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slotexporter/slot_exporter/internal/redistest"
	"github.com/slotexporter/slot_exporter/internal/topology"
)

// TestChangesBarrierPerCaller: families sweep at once, each asking the
// feed for its changes on the same node. Each call must wait for the
// answer to its own PING, not another's: a key written before the call
// is in what it returns, and no call waits on a PING answered to
// another (until the next one, or until the barrier gives up and the
// feed is dropped, costing every family a full read).
func TestChangesBarrierPerCaller(t *testing.T) {
	srv := redistest.Start(t)
	rc := srv.Client()
	ctx := context.Background()
	const callers, rounds = 6, 40
	var fams []Family
	for i := range callers {
		fams = append(fams, Family{Name: fmt.Sprintf("f%d", i), Match: fmt.Sprintf("k:%d:*", i),
			Re: regexp.MustCompile(fmt.Sprintf(`^k:%d:`, i))})
	}
	feed := New(fams, topology.Shard{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(feed.Close)
	n := topology.Node{Addr: srv.Addr, C: rc}
	if _, _, err := feed.Changes(ctx, n, "f0"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, callers*rounds)
	for i := range callers {
		wg.Go(func() {
			fam := fmt.Sprintf("f%d", i)
			for j := range rounds {
				key := fmt.Sprintf("k:%d:%d", i, j)
				if err := rc.Set(ctx, key, j, 0).Err(); err != nil {
					errs <- err
					return
				}
				began := time.Now()
				keys, _, err := feed.Changes(ctx, n, fam)
				switch took := time.Since(began); {
				case err != nil:
					errs <- fmt.Errorf("%s round %d: %v", fam, j, err)
					return
				case keys.Index(key) < 0:
					errs <- fmt.Errorf("%s round %d: %s was written before the call, which returned %v", fam, j, key, namesOf(keys))
				case took > time.Second:
					errs <- fmt.Errorf("%s round %d: the barrier took %v", fam, j, took)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestChangesIdleNodeDropped: a node no sweep asks about any more (a
// master demoted by a failover, a node removed from the cluster) must
// not keep its two connections and collect the name of every key written
// on it. One asked about every sweep is kept, under the same epoch.
func TestChangesIdleNodeDropped(t *testing.T) {
	kept, left := redistest.Start(t), redistest.Start(t)
	ctx := context.Background()
	fams := []Family{{Name: "f", Match: "k:*", Re: regexp.MustCompile(`^k:`)}}
	feed := New(fams, topology.Shard{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(feed.Close)
	feed.idle = 1500 * time.Millisecond
	nk, nl := topology.Node{Addr: kept.Addr, C: kept.Client()}, topology.Node{Addr: left.Addr, C: left.Client()}
	_, first, err := feed.Changes(ctx, nk, "f")
	if err != nil {
		t.Fatal(err)
	}
	_, leftEpoch, err := feed.Changes(ctx, nl, "f")
	if err != nil {
		t.Fatal(err)
	}
	tracking := func(s *redistest.Server) int {
		list, err := s.Client().ClientList(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(list, "sub=1")
	}
	if tracking(left) != 1 {
		t.Fatalf("no subscribed connection on %s: the test proves nothing", left.Addr)
	}
	// The deadline ends only a hung test: the idle connection is closed
	// 1.5 s after its node was last asked about.
	deadline := time.Now().Add(time.Minute)
	for tracking(left) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%s, not asked about for a minute with idle 1.5s, still has its subscribed connection", left.Addr)
		}
		if _, epoch, err := feed.Changes(ctx, nk, "f"); err != nil || epoch != first {
			t.Fatalf("the node asked about every 200ms: epoch %d (was %d), %v", epoch, first, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	feed.mu.Lock()
	_, still := feed.nodes[left.Addr]
	feed.mu.Unlock()
	if still {
		t.Errorf("%s dropped but still among the feed's nodes, with what it collected", left.Addr)
	}
	if tracking(kept) != 1 {
		t.Errorf("%s, asked about every 200ms, lost its tracking", kept.Addr)
	}
	if _, epoch, err := feed.Changes(ctx, nl, "f"); err != nil || epoch == leftEpoch {
		t.Errorf("%s asked about again: epoch %d, %v; want a new epoch (its changes meanwhile were not kept)", left.Addr, epoch, err)
	}
}

// TestChangesHugeKeyName: a key name longer than the feed's read buffer
// (64 KB) and than its message buffer (1 MB) is named whole, beside
// ordinary ones written in the same transaction (one invalidation).
func TestChangesHugeKeyName(t *testing.T) {
	srv := redistest.Start(t)
	rc := srv.Client()
	ctx := context.Background()
	fams := []Family{{Name: "f", Match: "k:*", Re: regexp.MustCompile(`^k:`)}}
	feed := New(fams, topology.Shard{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(feed.Close)
	n := topology.Node{Addr: srv.Addr, C: rc}
	if _, _, err := feed.Changes(ctx, n, "f"); err != nil {
		t.Fatal(err)
	}
	huge := "k:" + strings.Repeat("h", 2<<20)
	want := []string{"k:a", huge, "k:b"}
	pipe := rc.TxPipeline()
	for _, k := range want {
		pipe.Set(ctx, k, 1, 0)
	}
	pipe.Set(ctx, "other", 1, 0)
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	named, _, err := feed.Changes(ctx, n, "f")
	if err != nil {
		t.Fatal(err)
	}
	keys := namesOf(named)
	slices.Sort(keys)
	slices.Sort(want)
	if !slices.Equal(keys, want) {
		t.Errorf("named %d keys (lengths %v), want %d (lengths %v)", len(keys), lens(keys), len(want), lens(want))
	}
}

func lens(ss []string) []int {
	var out []int
	for _, s := range ss {
		out = append(out, len(s))
	}
	return out
}

// TestChangesLimit: SetLimit applies to the names a node has gathered
// already and to those of every sweep after; past it, Changes hands over
// Names that name everything, under the same epoch (nothing was lost: a
// read of every key is due), and the sweep after lists again. Another
// family keeps listing.
func TestChangesLimit(t *testing.T) {
	srv := redistest.Start(t)
	rc := srv.Client()
	ctx := context.Background()
	fams := []Family{{Name: "f", Match: "k:*", Re: regexp.MustCompile(`^k:`)},
		{Name: "g", Match: "j:*", Re: regexp.MustCompile(`^j:`)}}
	feed := New(fams, topology.Shard{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(feed.Close)
	n := topology.Node{Addr: srv.Addr, C: rc}
	_, epoch, err := feed.Changes(ctx, n, "f")
	if err != nil {
		t.Fatal(err)
	}
	write := func(prefix string, k int) {
		t.Helper()
		for i := range k {
			if err := rc.Set(ctx, fmt.Sprint(prefix, i), i, 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	changes := func(fam string) Names {
		t.Helper()
		keys, e, err := feed.Changes(ctx, n, fam)
		if err != nil {
			t.Fatal(err)
		}
		if e != epoch {
			t.Fatalf("the epoch went from %d to %d", epoch, e)
		}
		return keys
	}
	write("k:", 5)
	write("j:", 5)
	if keys := changes("f"); keys.All() || keys.Len() != 5 {
		t.Fatalf("5 names without a limit: All %v, Len %d", keys.All(), keys.Len())
	}
	write("k:", 5)
	feed.SetLimit("f", 3)
	if keys := changes("f"); !keys.All() || keys.Len() != 0 {
		t.Fatalf("5 names gathered before a limit of 3: All %v, Len %d", keys.All(), keys.Len())
	}
	write("k:", 3)
	if keys := changes("f"); keys.All() || keys.Len() != 3 {
		t.Fatalf("3 names under a limit of 3: All %v, Len %d", keys.All(), keys.Len())
	}
	write("k:", 4)
	if keys := changes("f"); !keys.All() {
		t.Fatalf("4 names under a limit of 3: Len %d", keys.Len())
	}
	feed.SetLimit("f", 0)
	write("k:", 4)
	if keys := changes("f"); keys.All() || keys.Len() != 4 {
		t.Fatalf("4 names, the limit lifted: All %v, Len %d", keys.All(), keys.Len())
	}
	if keys := changes("g"); keys.All() || keys.Len() != 5 {
		t.Fatalf("the other family: All %v, Len %d", keys.All(), keys.Len())
	}
}

// TestNamedSince: whether keys may have been written since the family's
// last Changes: a key written since is named; a flush of any database
// beyond the flushes counted (Flushes), or a connection lost since,
// leaves it unknown.
func TestNamedSince(t *testing.T) {
	srv := redistest.Start(t)
	rc := srv.Client()
	ctx := context.Background()
	feed := New([]Family{{Name: "f", Match: "k:*", Re: regexp.MustCompile(`^k:`)}}, topology.Shard{},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(feed.Close)
	n := topology.Node{Addr: srv.Addr, C: rc}
	take := func() int {
		t.Helper()
		_, epoch, err := feed.Changes(ctx, n, "f")
		if err != nil {
			t.Fatal(err)
		}
		return epoch
	}
	var sinceFlushes func(epoch, flushes int, keys ...string) bool
	since := func(epoch int, keys ...string) bool {
		t.Helper()
		return sinceFlushes(epoch, 0, keys...)
	}
	sinceFlushes = func(epoch, flushes int, keys ...string) bool {
		t.Helper()
		named, err := feed.NamedSince(ctx, n, "f", epoch, flushes, keys)
		if err != nil {
			t.Fatal(err)
		}
		return named
	}
	take()
	if err := rc.Set(ctx, "k:a", 1, 0).Err(); err != nil {
		t.Fatal(err)
	}
	epoch := take()
	if since(epoch, "k:a", "k:b") {
		t.Error("nothing written since, yet named")
	}
	if err := rc.Set(ctx, "k:b", 1, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if !since(epoch, "k:a", "k:b") || since(epoch, "k:a") {
		t.Error("k:b written since the last Changes: only it is named")
	}
	epoch = take()
	other := rc.Conn()
	t.Cleanup(func() { _ = other.Close() })
	if err := other.Select(ctx, 5).Err(); err != nil {
		t.Fatal(err)
	}
	if err := other.FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if !since(epoch, "k:a") {
		t.Error("a flush since leaves it unknown")
	}
	flushes := func(epoch int) (int, bool) {
		t.Helper()
		n, ok, err := feed.Flushes(ctx, n, "f", epoch)
		if err != nil {
			t.Fatal(err)
		}
		return n, ok
	}
	if got, ok := flushes(epoch); got != 1 || !ok {
		t.Fatalf("Flushes %d %v, want 1 true", got, ok)
	}
	if sinceFlushes(epoch, 1, "k:a") {
		t.Error("the one flush counted, and nothing written since: named")
	}
	if err := rc.Set(ctx, "k:c", 1, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if !sinceFlushes(epoch, 1, "k:c") || sinceFlushes(epoch, 1, "k:a") {
		t.Error("k:c written after the flush: only it is named")
	}
	if err := other.FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if !sinceFlushes(epoch, 1, "k:a") {
		t.Error("a second flush, beyond the one counted: unknown")
	}
	if got, ok := flushes(epoch); got != 2 || !ok {
		t.Errorf("Flushes %d %v, want 2 true", got, ok)
	}
	if !since(epoch+1, "k:a") {
		t.Error("under another epoch, unknown")
	}
	if _, ok := flushes(epoch + 1); ok {
		t.Error("Flushes under another epoch: known")
	}
}
