package frameworks_test

// The framework side of the Sidekiq and RQ tests: real workers and clients
// (drivers in sidekiq/ and rq/) as child processes against the test's
// redis-server.

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
)

// eventTimeout ends a test whose awaited event never comes: generous, as
// a killed worker's keys take a minute to expire on a busy machine.
const eventTimeout = 4 * time.Minute

// debianPython is the interpreter Debian's python3-rq is installed for
// (a pyenv python3 earlier on PATH would not have it).
const debianPython = "/usr/bin/python3"

// frameworkTool fails the test when a tool is missing: never a skip,
// scripts/install-deps.sh installs them.
func frameworkTool(t *testing.T, check ...string) {
	t.Helper()
	if out, err := exec.Command(check[0], check[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s\nscripts/install-deps.sh installs Debian's ruby-sidekiq and python3-rq", strings.Join(check, " "), err, out)
	}
}

// workerProc is a framework worker run in a process group of its own, so
// that a kill takes it whole, as a container runtime's SIGKILL does (an
// RQ worker forks a work horse per job, which would otherwise live on).
type workerProc struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd
	log  *exportertest.Buffer
	done chan struct{}
}

func startWorkerProc(t *testing.T, dir, redisURL, name string, argv ...string) *workerProc {
	t.Helper()
	w := &workerProc{t: t, name: name, log: &exportertest.Buffer{}, done: make(chan struct{})}
	w.cmd = exec.Command(argv[0], argv[1:]...)
	w.cmd.Dir = dir
	w.cmd.Env = append(os.Environ(), "REDIS_URL="+redisURL)
	w.cmd.Stdout, w.cmd.Stderr = w.log, w.log
	w.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A child that outlives the worker (an RQ work horse, in a session of
	// its own) keeps the output pipe open; Wait returns anyway.
	w.cmd.WaitDelay = 2 * time.Second
	if err := w.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { _ = w.cmd.Wait(); close(w.done) }()
	t.Cleanup(func() {
		w.kill()
		if t.Failed() {
			t.Logf("%s log:\n%s", name, w.log.String())
		}
	})
	return w
}

// kill SIGKILLs the worker's whole process group and waits for it.
func (w *workerProc) kill() {
	select {
	case <-w.done:
		return
	default:
	}
	_ = syscall.Kill(-w.cmd.Process.Pid, syscall.SIGKILL)
	<-w.done
}

// exited reports whether the worker has exited (a burst worker's end).
func (w *workerProc) exited() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

// runClient runs a driver command that prints one JSON line and decodes it
// into out.
func runClient(t *testing.T, dir, redisURL string, out any, argv ...string) {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "REDIS_URL="+redisURL)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, stderr.String())
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%s printed %q: %v", strings.Join(argv, " "), b, err)
	}
}

// awaitStarted waits until n more jobs have said they started (the gate
// jobs RPUSH their id to fwtest:started) and returns their ids.
func awaitStarted(t *testing.T, rc *redis.Client, n int) []string {
	t.Helper()
	return awaitList(t, rc, "fwtest:started", n)
}

// awaitDone waits until n more jobs have finished.
func awaitDone(t *testing.T, rc *redis.Client, n int) []string {
	t.Helper()
	return awaitList(t, rc, "fwtest:done", n)
}

func awaitList(t *testing.T, rc *redis.Client, key string, n int) []string {
	t.Helper()
	ids := make([]string, 0, n)
	for len(ids) < n {
		kv, err := rc.BLPop(context.Background(), eventTimeout, key).Result()
		if err != nil {
			t.Fatalf("waiting for %d on %s (have %v): %v", n, key, ids, err)
		}
		ids = append(ids, kv[1])
	}
	return ids
}

// openGate lets n blocked gate jobs finish.
func openGate(t *testing.T, rc *redis.Client, gate string, n int) {
	t.Helper()
	vals := make([]any, n)
	for i := range vals {
		vals[i] = "go"
	}
	if err := rc.RPush(context.Background(), "fwtest:gate:"+gate, vals...).Err(); err != nil {
		t.Fatal(err)
	}
}

// awaitRedis polls Redis until cond holds: the event is a framework's own
// write or a key's expiry, which nothing announces.
func awaitRedis(t *testing.T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(eventTimeout)
	for {
		ok, err := cond(context.Background())
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, eventTimeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func driverDir(t *testing.T, name string) string {
	t.Helper()
	d, err := filepath.Abs(name)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
