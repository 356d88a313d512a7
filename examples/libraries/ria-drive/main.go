// Command ria-drive holds slots of the "Redis in Action" fair semaphore
// (package riasemaphore) against a real Redis and prints the ground truth
// as JSON lines, the same protocol as node/drive.js:
//
//	ria-drive --redis HOST:PORT --key NAME --limit N [--holders N]
//	          --timeout 3s [--refresh 1s] [--work 500ms] [--skew 0s] [--role R]
//
// It acquires, prints {"event":"acquired",...} and refreshes every
// --refresh. A line "release" on stdin (or stdin closing) releases and
// exits 0; SIGKILL is a holder that dies without releasing; with --work the
// work ends ({"event":"work_done"}) but the refresh goes on: a zombie.
// Each refresh prints {"event":"refresh"}.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/examples/libraries/riasemaphore"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "ria-drive:", err)
		os.Exit(1)
	}
}

var out = struct {
	sync.Mutex
	enc *json.Encoder
}{enc: json.NewEncoder(os.Stdout)}

func emit(v map[string]any) {
	out.Lock()
	defer out.Unlock()
	_ = out.enc.Encode(v)
}

func run() error {
	addr := flag.String("redis", "", "HOST:PORT of the Redis server")
	key := flag.String("key", "", "the semaphore's name (its timeout set's key)")
	limit := flag.Int("limit", 0, "the semaphore's limit")
	holders := flag.Int("holders", 1, "slots to take")
	timeout := flag.Duration("timeout", 0, "a slot's timeout without refresh")
	refresh := flag.Duration("refresh", 0, "refresh interval (default timeout/3)")
	work := flag.Duration("work", 0, "the work ends after this long, the refresh goes on (0: the work lasts until release)")
	skew := flag.Duration("skew", 0, "this client's clock offset")
	role := flag.String("role", "healthy", "label echoed in the truth")
	flag.Parse()
	if *addr == "" || *key == "" {
		return fmt.Errorf("--redis and --key are required")
	}
	if *refresh == 0 {
		*refresh = *timeout / 3
	}
	if *refresh <= 0 || *refresh >= *timeout {
		return fmt.Errorf("--refresh %v must be between 0 and --timeout %v", *refresh, *timeout)
	}

	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: *addr, DisableIdentity: true})
	defer rdb.Close()
	sem, err := riasemaphore.New(rdb, *key, *limit, *timeout)
	if err != nil {
		return err
	}
	sem = sem.WithClock(func() time.Time { return time.Now().Add(*skew) })

	var ids []string
	for i := range *holders {
		id, err := sem.Acquire(ctx)
		if err != nil {
			return err
		}
		if id == "" {
			return fmt.Errorf("semaphore %s full: holder %d of %d not acquired", *key, i+1, *holders)
		}
		ids = append(ids, id)
	}
	timeouts, owners, counter := sem.Keys()
	emit(map[string]any{
		"event": "acquired", "library": "redis-in-action fair semaphore (Go)", "version": "chapter 6.3",
		"kind": "semaphore", "key": timeouts, "owner_key": owners, "counter_key": counter,
		"user": *key, "holders": ids, "ttl_ms": timeout.Milliseconds(), "refresh_ms": refresh.Milliseconds(),
		"skew_ms": skew.Milliseconds(), "role": *role, "pid": os.Getpid(),
	})

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(*refresh)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			for _, id := range ids {
				ok, err := sem.Refresh(ctx, id)
				if err != nil || !ok {
					emit(map[string]any{"event": "lost", "holder": id, "error": fmt.Sprint(err)})
					continue
				}
				emit(map[string]any{"event": "refresh", "holder": id, "ok": true})
			}
		}
	}()
	if *work > 0 {
		time.AfterFunc(*work, func() { emit(map[string]any{"event": "work_done", "after_ms": work.Milliseconds()}) })
	}

	why := "stdin closed"
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "release" {
			why = "release"
			break
		}
	}
	close(stop)
	wg.Wait()
	for _, id := range ids {
		if _, err := sem.Release(ctx, id); err != nil {
			return err
		}
	}
	emit(map[string]any{"event": "released", "why": why, "holders": ids})
	return nil
}
