package redisread

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"

	"github.com/slotexporter/slot_exporter/internal/commandstats"
	"github.com/slotexporter/slot_exporter/internal/redistest"
)

// readCutOff runs read, cancelling it once one batch has come out (the
// way a sweep's timeout strikes), takes every batch the reader handed over
// before it returned, and returns the keys.
func readCutOff(t *testing.T, read func(ctx context.Context, out chan<- []KeyRead) error) ([]string, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := make(chan []KeyRead, 4)
	errc := make(chan error, 1)
	go func() { errc <- read(ctx, out); close(out) }()
	var keys []string
	for b := range out {
		for _, r := range b {
			keys = append(keys, r.Key)
		}
		cancel()
	}
	return keys, <-errc
}

// TestReadsGoOnFromProgress: a SCAN (and a list of keys) cut off after
// every batch and started again from its Progress reads every key exactly
// once, on the raw connection and through go-redis. SCAN pages come out a
// few keys larger than COUNT, the chunk, so that many cut-offs fall inside
// a page.
//
// Each attempt's key budget holds one batch and grants the next an hour
// later: the cut-off always ends the attempt waiting for it, after exactly
// one batch, however the machine schedules the reader and the test. (With
// a budget that never made the reader wait, a loaded machine let it read
// several batches before the cancel reached it, and the test saw fewer
// cut-offs than it asked for.)
func TestReadsGoOnFromProgress(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	ctx := context.Background()
	const n, batch = 1000, 10
	all := oneMemberSets(t, c, n)
	for _, path := range bothPaths(c) {
		for _, list := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/list=%v", path.name, list), func(t *testing.T) {
				rd := NewReader(false)
				defer rd.Close()
				p := zsetPlan(1000, 10, Edges{})
				var pos Progress
				seen := map[string]int{}
				calls := 0
				for !pos.Done {
					calls++
					if calls > 10*n {
						t.Fatalf("no end after %d calls: %+v", calls, pos)
					}
					// 10 keys a batch (the least chunk), and SCAN COUNT 10.
					p.Budget = rate.NewLimiter(rate.Every(time.Hour), batch)
					keys, err := readCutOff(t, func(ctx context.Context, out chan<- []KeyRead) error {
						if list {
							return rd.ReadKeysFrom(ctx, path.c, p, all, &pos, out)
						}
						return rd.ScanNodeFrom(ctx, path.c, p, &pos, out)
					})
					if err != nil && ctx.Err() != nil {
						t.Fatal(err)
					}
					if len(keys) > batch {
						t.Fatalf("call %d read %d keys: the cut-off after a batch of %d did not happen", calls, len(keys), batch)
					}
					for _, k := range keys {
						seen[k]++
					}
				}
				for _, k := range all {
					if seen[k] != 1 {
						t.Errorf("%s read %d times", k, seen[k])
					}
				}
				if len(seen) != n || pos.Keys != n {
					t.Errorf("%d keys read (%d by Progress), want %d", len(seen), pos.Keys, n)
				}
			})
		}
	}
}

// TestPacedScanReadsEachPageAsScanned: under the CPU pace a SCAN does not
// run ahead of the reads. Each page is scanned when the reads have waited
// for the pace, and read whole as soon as it comes, so that Redis finds
// its keys still in its caches. The pace here lets one chunk through and
// the next an hour later: every attempt reads one page, scans nothing
// ahead of it, and the attempts read every key exactly once.
func TestPacedScanReadsEachPageAsScanned(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	ctx := context.Background()
	const n = 1000
	oneMemberSets(t, c, n)
	scans := func() int64 {
		info, err := c.Info(ctx, "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		return commandstats.Parse(info)["scan"].Calls
	}
	for _, path := range bothPaths(c) {
		t.Run(path.name, func(t *testing.T) {
			rd := NewReader(false)
			defer rd.Close()
			p := zsetPlan(1000, 10, Edges{})
			var pos Progress
			seen := map[string]int{}
			calls := 0
			for !pos.Done {
				if calls++; calls > n {
					t.Fatalf("no end after %d calls: %+v", calls, pos)
				}
				// A chunk (pacedChunk, SCAN COUNT too) now, the next
				// in an hour.
				p.Pace = rate.NewLimiter(rate.Every(time.Hour), pacedChunk)
				before := scans()
				keys, err := readCutOff(t, func(ctx context.Context, out chan<- []KeyRead) error {
					return rd.ScanNodeFrom(ctx, path.c, p, &pos, out)
				})
				if err != nil && ctx.Err() != nil {
					t.Fatal(err)
				}
				if s := scans() - before; s != 1 && !pos.Done {
					t.Fatalf("call %d: %d SCANs for one page of reads: SCAN ran ahead", calls, s)
				}
				if len(keys) > 2*pacedChunk {
					t.Fatalf("call %d read %d keys, more than a page", calls, len(keys))
				}
				for _, k := range keys {
					seen[k]++
				}
			}
			for k, times := range seen {
				if times != 1 {
					t.Errorf("%s read %d times", k, times)
				}
			}
			if len(seen) != n || pos.Keys != n {
				t.Errorf("%d keys read (%d by Progress), want %d", len(seen), pos.Keys, n)
			}
			if calls < n/(2*pacedChunk) {
				t.Errorf("%d calls for %d keys: the pace let more than a page through at once", calls, n)
			}
		})
	}
}

// oneMemberSets writes n slot sets of one member each, s:{u0} to
// s:{u<n-1>}, and returns their names.
func oneMemberSets(t *testing.T, c *redis.Client, n int) []string {
	t.Helper()
	var keys []string
	pipe := c.Pipeline()
	for i := range n {
		k := fmt.Sprintf("s:{u%d}", i)
		keys = append(keys, k)
		pipe.ZAdd(context.Background(), k, redis.Z{Score: float64(i), Member: "m"})
	}
	if _, err := pipe.Exec(context.Background()); err != nil {
		t.Fatal(err)
	}
	return keys
}
