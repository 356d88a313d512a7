package redisread

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/slotexporter/slot_exporter/internal/redistest"
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
	var fams []WatchedFamily
	for i := range callers {
		fams = append(fams, WatchedFamily{Name: fmt.Sprintf("f%d", i), Match: fmt.Sprintf("k:%d:*", i),
			Re: regexp.MustCompile(fmt.Sprintf(`^k:%d:`, i))})
	}
	feed := NewChangeFeed(fams, Shard{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(feed.Close)
	n := Node{Addr: srv.Addr, C: rc}
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
				case !slices.Contains(keys, key):
					errs <- fmt.Errorf("%s round %d: %s was written before the call, which returned %v", fam, j, key, keys)
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
