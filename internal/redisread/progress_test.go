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
				readInAttempts(t, all, 10*n, func(call int, rd *Reader, p *Plan, pos *Progress) []string {
					// 10 keys a batch (the least chunk), and SCAN COUNT 10.
					p.Budget = rate.NewLimiter(rate.Every(time.Hour), batch)
					keys, err := readCutOff(t, func(ctx context.Context, out chan<- []KeyRead) error {
						if list {
							return rd.ReadKeysFrom(ctx, path.c, p, all, pos, out)
						}
						return rd.ScanNodeFrom(ctx, path.c, p, pos, out)
					})
					if err != nil && ctx.Err() != nil {
						t.Fatal(err)
					}
					if len(keys) > batch {
						t.Fatalf("call %d read %d keys: the cut-off after a batch of %d did not happen", call, len(keys), batch)
					}
					return keys
				})
			})
		}
	}
}

// TestReadsGoOnFromProgressAsTheTableGrows: an attempt cut off in the
// middle of a SCAN page, then writes that grow Redis's table to twice the
// buckets, and the next attempt's SCAN from the same cursor ends its page
// far sooner: the keys the cut-off attempt handed over come in the pages
// after it too. Every key there from the start is still read exactly
// once; a key written in between at most once. (Kept only for the page
// itself, the handed keys were read again; a lock whose token changed in
// between counted twice for its user.)
func TestReadsGoOnFromProgressAsTheTableGrows(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	ctx := context.Background()
	const n, batch, grow = 600, 10, 1000
	for _, path := range bothPaths(c) {
		t.Run(path.name, func(t *testing.T) {
			if err := c.FlushDB(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			all := oneMemberSets(t, c, n)
			rd := NewReader(false)
			defer rd.Close()
			p := zsetPlan(1000, 10, Edges{})
			var pos Progress
			seen := map[string]int{}
			grown := false
			for calls := 1; !pos.Done; calls++ {
				if calls > 10*(n+grow) {
					t.Fatalf("no end after %d calls: %+v", calls, pos)
				}
				p.Budget = rate.NewLimiter(rate.Every(time.Hour), batch)
				keys, err := readCutOff(t, func(ctx context.Context, out chan<- []KeyRead) error {
					return rd.ScanNodeFrom(ctx, path.c, p, &pos, out)
				})
				if err != nil && ctx.Err() != nil {
					t.Fatal(err)
				}
				for _, k := range keys {
					seen[k]++
				}
				if !grown && pos.Sent != nil {
					// Cut off inside a page: 1600 keys take the table
					// from 1024 buckets to 2048.
					grown = true
					pipe := c.Pipeline()
					for i := range grow {
						pipe.ZAdd(ctx, fmt.Sprintf("s:{g%d}", i), redis.Z{Score: 1, Member: "m"})
					}
					if _, err := pipe.Exec(ctx); err != nil {
						t.Fatal(err)
					}
				}
			}
			if !grown {
				t.Fatal("no attempt was cut off inside a page: the test proves nothing")
			}
			for _, k := range all {
				if seen[k] != 1 {
					t.Errorf("%s read %d times", k, seen[k])
				}
			}
			for k, times := range seen {
				if times > 1 {
					t.Errorf("%s read %d times", k, times)
				}
			}
		})
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
	all := oneMemberSets(t, c, n)
	scans := func() int64 {
		info, err := c.Info(ctx, "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		return commandstats.Parse(info)["scan"].Calls
	}
	for _, path := range bothPaths(c) {
		t.Run(path.name, func(t *testing.T) {
			calls := readInAttempts(t, all, n, func(call int, rd *Reader, p *Plan, pos *Progress) []string {
				// A chunk (pacedChunk, SCAN COUNT too) now, the next
				// in an hour.
				p.Pace = rate.NewLimiter(rate.Every(time.Hour), pacedChunk)
				before := scans()
				keys, err := readCutOff(t, func(ctx context.Context, out chan<- []KeyRead) error {
					return rd.ScanNodeFrom(ctx, path.c, p, pos, out)
				})
				if err != nil && ctx.Err() != nil {
					t.Fatal(err)
				}
				if s := scans() - before; s != 1 && !pos.Done {
					t.Fatalf("call %d: %d SCANs for one page of reads: SCAN ran ahead", call, s)
				}
				if len(keys) > 2*pacedChunk {
					t.Fatalf("call %d read %d keys, more than a page", call, len(keys))
				}
				return keys
			})
			if calls < n/(2*pacedChunk) {
				t.Errorf("%d calls for %d keys: the pace let more than a page through at once", calls, n)
			}
		})
	}
}

// readInAttempts reads the slot sets of oneMemberSets, named all, in
// attempts that go on from one Progress, until it says done: attempt
// reads once (its call number from 1) and returns the keys it read. It
// fails after maxCalls attempts, and unless every key of all was read
// exactly once and no other; it returns the number of attempts.
func readInAttempts(t *testing.T, all []string, maxCalls int, attempt func(call int, rd *Reader, p *Plan, pos *Progress) []string) int {
	t.Helper()
	rd := NewReader(false)
	defer rd.Close()
	p := zsetPlan(1000, 10, Edges{})
	var pos Progress
	seen := map[string]int{}
	calls := 0
	for !pos.Done {
		if calls++; calls > maxCalls {
			t.Fatalf("no end after %d calls: %+v", maxCalls, pos)
		}
		for _, k := range attempt(calls, rd, p, &pos) {
			seen[k]++
		}
	}
	for _, k := range all {
		if seen[k] != 1 {
			t.Errorf("%s read %d times", k, seen[k])
		}
	}
	if len(seen) != len(all) || pos.Keys != len(all) {
		t.Errorf("%d keys read (%d by Progress), want %d", len(seen), pos.Keys, len(all))
	}
	return calls
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

// TestPacedScanChargesWhatItPassesOver: under the pace, the keys SCAN
// passes over are charged to it, a key read for every scanVisitsPerKey,
// so that a family matching few keys of a large keyspace does not SCAN it
// unpaced; with no pace nothing is charged.
func TestPacedScanChargesWhatItPassesOver(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	ctx := context.Background()
	const others, sets = 4000, 10
	pipe := c.Pipeline()
	for i := range others {
		pipe.Set(ctx, fmt.Sprintf("other:%d", i), "v", 0)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	oneMemberSets(t, c, sets)
	for _, paced := range []bool{true, false} {
		rd := NewReader(false)
		p := zsetPlan(1000, 10, Edges{})
		var spent int
		p.Spent = func(n int) { spent += n }
		if paced {
			p.Pace = rate.NewLimiter(rate.Inf, 1)
		}
		out := make(chan []KeyRead, 64)
		go func() {
			for range out {
			}
		}()
		err := rd.ScanNode(ctx, c, p, out)
		close(out)
		if err != nil {
			t.Fatal(err)
		}
		rd.Close()
		least, most := sets, sets
		if paced {
			// SCAN's COUNT is of hash buckets, which hold between half
			// a key and one each (Redis resizes at one): a page is
			// charged as COUNT keys, never less than it looked at, and
			// at most twice as much.
			least += others / scanVisitsPerKey
			most += 2*others/scanVisitsPerKey + int(p.ScanPage())/scanVisitsPerKey
		}
		if spent < least || spent > most {
			t.Errorf("paced %v: %d keys charged, want %d to %d", paced, spent, least, most)
		}
	}
}

// TestPacedScanRecordsPagesWithoutKeys: under the pace, an attempt cut off
// among SCAN pages that hold none of the plan's keys (here, the keyspace
// holds none) records them as passed, and the next attempt goes on after
// them: a family that matches nothing in a keyspace too large for one
// attempt still gets through it.
func TestPacedScanRecordsPagesWithoutKeys(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	ctx := context.Background()
	pipe := c.Pipeline()
	for i := range 4000 {
		pipe.Set(ctx, fmt.Sprintf("other:%d", i), "v", 0)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	scans := func() int64 {
		info, err := c.Info(ctx, "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		return commandstats.Parse(info)["scan"].Calls
	}
	rd := NewReader(false)
	defer rd.Close()
	var pos Progress
	seen := map[string]int{}
	read := func(p *Plan, cutAfter int64) error {
		actx, cancel := context.WithCancel(ctx)
		defer cancel()
		if cutAfter > 0 {
			// Cut off once SCAN has made that many calls: an event,
			// not a time.
			from := scans()
			go func() {
				for actx.Err() == nil && scans() < from+cutAfter {
					time.Sleep(5 * time.Millisecond)
				}
				cancel()
			}()
		}
		out := make(chan []KeyRead, 64)
		done := make(chan struct{})
		go func() {
			for b := range out {
				for _, r := range b {
					seen[r.Key]++
				}
			}
			close(done)
		}()
		err := rd.ScanNodeFrom(actx, c, p, &pos, out)
		close(out)
		<-done
		return err
	}
	// 40 keys a page (the paced chunk), each page charged 10 keys: 200 a
	// second is 20 pages a second, about 5 s for the keyspace.
	p := zsetPlan(1000, 10, Edges{})
	p.Pace = rate.NewLimiter(200, 40)
	if err := read(p, 20); err == nil {
		t.Fatal("the first attempt was not cut off")
	}
	if pos.Done || pos.Cursor == 0 {
		t.Fatalf("cut off among pages without keys, the progress did not move: %+v", pos)
	}
	p.Pace = rate.NewLimiter(rate.Inf, 1)
	before := scans()
	if err := read(p, 0); err != nil || !pos.Done {
		t.Fatalf("the second attempt: %v, %+v", err, pos)
	}
	// It went on: fewer SCANs than a walk of the whole keyspace (over
	// 100 pages of 40).
	if n := scans() - before; n >= 100 {
		t.Errorf("the second attempt made %d SCANs: it walked the keyspace again", n)
	}
	if len(seen) != 0 {
		t.Errorf("read %v, which the plan does not match", seen)
	}
}
