package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/redistest"
	"github.com/slotexporter/slot_exporter/simulator"
)

func TestIncidentScenario(t *testing.T) {
	srv := redistest.Start(t)
	truthFile := filepath.Join(t.TempDir(), "truth.json")
	args := []string{
		"--redis.addr", srv.Addr, "--scenario", "incident",
		"--users", "100", "--limit", "3", "--stream-rate", "200", "--stream-duration", "10s",
		"--ttl", "10s", "--heartbeat-interval", "200ms",
		"--crash-rate", "0", "--zombie-rate", "0.05", "--future-rate", "0.05", "--counter-leak-rate", "0.1",
		"--kill-at", "1s", "--kill-share", "0.5", "--duration", "3500ms", "--truth-file", truthFile,
	}
	var stdout, stderr bytes.Buffer
	done := make(chan int)
	go func() { done <- run(args, &stdout, &stderr, nil) }()

	// The truth file is readable while slotsim runs, and shows the kill
	// (written as it happens, at 1 s of the run's 3.5).
	var mid simulator.Truth
	var code int
	ended := false
	for !ended && mid.Killed == 0 {
		select {
		case code = <-done:
			ended = true
			continue
		case <-time.After(50 * time.Millisecond):
		}
		if b, err := os.ReadFile(truthFile); err == nil {
			if err := json.Unmarshal(b, &mid); err != nil {
				t.Fatalf("truth file %q: %v", b, err)
			}
		}
	}
	if mid.Killed == 0 {
		t.Fatalf("truth file did not show the kill while running: %+v", mid)
	}
	if !ended {
		select {
		case code = <-done:
		case <-time.After(2 * time.Minute):
			t.Fatal("slotsim did not end after --duration")
		}
	}
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr.String())
	}
	var final simulator.Truth
	if err := json.Unmarshal(stdout.Bytes(), &final); err != nil {
		t.Fatalf("stdout %q: %v", stdout.String(), err)
	}
	if final.Killed != mid.Killed || final.Acquired < mid.Acquired || final.Acquired == 0 {
		t.Fatalf("final truth %+v, mid %+v", final, mid)
	}
	if len(final.KilledUsers) == 0 || final.CountersLeaked < final.Killed {
		t.Fatalf("killed users %v, counters leaked %d (killed holders never DECR)", final.KilledUsers, final.CountersLeaked)
	}
	var last simulator.Truth
	b, _ := os.ReadFile(truthFile)
	if err := json.Unmarshal(b, &last); err != nil || last.Acquired != final.Acquired {
		t.Fatalf("final truth file %s (%v), want the stdout truth", b, err)
	}
	if !strings.Contains(stderr.String(), "incident: SIGKILL") || !strings.Contains(stderr.String(), "killed=") {
		t.Fatalf("no kill log line in stderr:\n%s", stderr.String())
	}
	// The JSON keys are the documented snake_case names.
	for _, k := range []string{`"killed":`, `"zombies":`, `"counters_leaked":`, `"killed_users":`, `"in_flight":`} {
		if !bytes.Contains(stdout.Bytes(), []byte(k)) {
			t.Errorf("stdout lacks %s", k)
		}
	}
}

func TestSignalStops(t *testing.T) {
	srv := redistest.Start(t)
	sig := make(chan os.Signal, 1)
	var stdout, stderr bytes.Buffer
	done := make(chan int)
	go func() {
		done <- run([]string{"--redis.addr", srv.Addr, "--users", "10", "--stream-rate", "50", "--stream-duration", "1s",
			"--ttl", "2s", "--heartbeat-interval", "100ms"}, &stdout, &stderr, sig)
	}()
	// Once a stream has acquired (its slot set exists): the truth on
	// stdout must show one.
	c := srv.Client()
	acquired := func() bool {
		keys, _, _ := c.Scan(context.Background(), 0, simulator.DefaultKeyPrefix+"*", 1000).Result()
		return len(keys) > 0
	}
	exportertest.WaitFor(t, 2*time.Minute, "a slot set written by slotsim", acquired)
	sig <- syscall.SIGTERM
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("slotsim did not stop on SIGTERM")
	}
	var tr simulator.Truth
	if err := json.Unmarshal(stdout.Bytes(), &tr); err != nil || tr.Acquired == 0 {
		t.Fatalf("stdout %q: %v", stdout.String(), err)
	}
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--scenario", "bogus"},
		{"--kill-share", "2"},
		{"--crash-rate", "1.5"},
		{"--ttl", "1s", "--heartbeat-interval", "2s"},
		{"--pause-at", "-1s"},
		{"--lock.zombie", "-1"},
		{"--users", "3", "--list.healthy", "4"},
		{"--stream.poison", "1", "--stream.max-hold", "1s"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(append(args, "--redis.addr", "127.0.0.1:1"), &stdout, &stderr, nil); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

func TestRecipesScenario(t *testing.T) {
	srv := redistest.Start(t)
	truthFile := filepath.Join(t.TempDir(), "truth.json")
	args := []string{
		"--redis.addr", srv.Addr, "--scenario", "recipes", "--no-slot-streams", "--users", "40", "--seed", "3",
		"--ratelimit.window", "500ms", "--ratelimit.hit-interval", "25ms",
		"--lock.ttl", "600ms", "--lock.hold", "200ms", "--lock.max-hold", "1s", "--lock.healthy", "0",
		"--list.push-interval", "50ms", "--list.max-wait", "500ms",
		"--stream.add-interval", "50ms", "--stream.min-idle", "150ms", "--stream.restart-delay", "50ms", "--stream.max-hold", "600ms", "--stream.max-deliveries", "3",
		"--pause-at", "1500ms", "--duration", "1800ms", "--truth-file", truthFile,
	}
	var stdout, stderr bytes.Buffer
	if code := run(args, &stdout, &stderr, nil); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr.String())
	}
	var tr simulator.Truth
	if err := json.Unmarshal(stdout.Bytes(), &tr); err != nil {
		t.Fatalf("stdout %q: %v", stdout.String(), err)
	}
	if !tr.Paused || tr.Errors != 0 || tr.Acquired != 0 || tr.RateLimits == nil || tr.Locks == nil || tr.ListQueues == nil || tr.StreamQueues == nil {
		t.Fatalf("truth %s", stdout.String())
	}
	r, l, q, s := tr.RateLimits, tr.Locks, tr.ListQueues, tr.StreamQueues
	if len(r.Users) != 9 || r.KeysWithoutTTL != 1 || r.KeysTTLBeyondWindow != 1 || r.CallersLockedOut != 3 {
		t.Errorf("rate limits %+v", r)
	}
	// --lock.healthy 0 overrides the preset's 5.
	if len(l.Users) != 4 || l.WithoutTTL != 1 || l.Zombie != 2 || l.Expired == 0 {
		t.Errorf("locks %+v", l)
	}
	if len(q.Users) != 5 || q.Stalled != 1 || q.ProcessingStalled != 1 || q.Orphaned != 1 {
		t.Errorf("list queues %+v", q)
	}
	if len(s.Users) != 6 || s.ConsumersDead != 1 || s.PendingStuck != 1 || s.Redelivered != 1 || s.Lag < 10 {
		t.Errorf("stream queues %+v", s)
	}
	for _, k := range []string{`"ratelimits":`, `"keys_without_ttl":`, `"locks":`, `"list_queues":`, `"stream_queues":`, `"consumers_dead":`} {
		if !bytes.Contains(stdout.Bytes(), []byte(k)) {
			t.Errorf("stdout lacks %s", k)
		}
	}
	b, _ := os.ReadFile(truthFile)
	var last simulator.Truth
	if err := json.Unmarshal(b, &last); err != nil || last.StreamQueues == nil || last.StreamQueues.Added != s.Added {
		t.Fatalf("truth file %s (%v)", b, err)
	}
	if !strings.Contains(stderr.String(), "paused") || !strings.Contains(stderr.String(), "stream queues") {
		t.Errorf("stderr:\n%s", stderr.String())
	}
}
