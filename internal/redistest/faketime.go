package redistest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/slotexporter/slot_exporter/internal/redisproc"
)

// FakeClock is a redis-server whose wall clock the test moves: TIME, key
// expiry and everything else Redis reads from the real-time clock follow
// the machine's clock plus an offset that Step changes at once, as an NTP
// step, a VM restore or a failover to a node with another clock would.
// The monotonic clock is left alone, so Redis's own timers keep running.
//
// It runs redis-server under libfaketime (LD_PRELOAD, the offset read
// from a file on every clock call). Debian's redis-server is linked with
// jemalloc, which deadlocks with libfaketime while both initialise; a
// preloaded tcmalloc takes over malloc before either, and jemalloc is
// then only asked for statistics.
type FakeClock struct {
	*Server
	t    testing.TB
	file string

	mu     sync.Mutex
	offset time.Duration
}

// fakeClockLibs are where Debian puts the two libraries, per
// architecture.
var fakeClockLibs = []struct{ pkg, glob string }{
	{"faketime", "/usr/lib/*/faketime/libfaketime.so.1"},
	{"libtcmalloc-minimal4", "/usr/lib/*/libtcmalloc_minimal.so.4"},
}

// StartFakeClock runs a redis-server with a movable clock, at offset 0.
// Extra args are appended to the command line.
func StartFakeClock(t testing.TB, extra ...string) *FakeClock {
	t.Helper()
	var preload []string
	for _, l := range fakeClockLibs {
		m, _ := filepath.Glob(l.glob)
		if len(m) == 0 {
			t.Fatalf("%s not found: `make test` installs it (apt-get install -y %s)", l.glob, l.pkg)
		}
		preload = append(preload, m[0])
	}
	server := Binary(t, "redis-server")
	dir := t.TempDir()
	f := &FakeClock{t: t, file: filepath.Join(dir, "faketime.rc")}
	f.write(0)
	s := StartWith(t, redisproc.Options{
		Binary:  "env",
		Dir:     dir,
		LogName: "redis.log",
		Command: func(port int, dir string) ([]string, error) {
			return append([]string{
				"LD_PRELOAD=" + preload[0] + ":" + preload[1],
				"FAKETIME_TIMESTAMP_FILE=" + f.file,
				// Read the offset on every call, not every 10 s.
				"FAKETIME_NO_CACHE=1",
				"FAKETIME_DONT_FAKE_MONOTONIC=1",
				server,
				"--port", strconv.Itoa(port),
				"--bind", "127.0.0.1",
				"--save", "",
				"--appendonly", "no",
				"--dir", dir,
				"--daemonize", "no",
				"--logfile", filepath.Join(dir, "redis.log"),
			}, extra...), nil
		},
	})
	f.Server = s
	return f
}

// Step moves the server's clock by d (negative: back) from where it is.
// Call it from the test's goroutine.
func (f *FakeClock) Step(d time.Duration) {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.offset += d
	f.write(f.offset)
}

// Offset is how far the server's clock is from the machine's.
func (f *FakeClock) Offset() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.offset
}

// write replaces the offset file in one rename, so that the server never
// reads it half written.
func (f *FakeClock) write(offset time.Duration) {
	f.t.Helper()
	tmp := f.file + ".tmp"
	if err := os.WriteFile(tmp, []byte(fmt.Sprintf("%+.3f\n", offset.Seconds())), 0o600); err != nil {
		f.t.Fatalf("fake clock: %v", err)
	}
	if err := os.Rename(tmp, f.file); err != nil {
		f.t.Fatalf("fake clock: %v", err)
	}
}
