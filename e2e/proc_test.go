package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/slotexporter/slot_exporter/internal/redisproc"
)

// tailBuffer keeps the last max bytes written to it: a process's output
// for the failure report, without holding a whole run's log in memory.
type tailBuffer struct {
	mu        sync.Mutex
	buf       []byte
	max       int
	truncated bool
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
		b.truncated = true
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.truncated {
		return "[...]\n" + string(b.buf)
	}
	return string(b.buf)
}

// proc is one server process owned by the test.
type proc struct {
	name string
	cmd  *exec.Cmd
	out  *tailBuffer
	done chan struct{}
	err  error // set before done is closed
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop asks the process to end (SIGTERM) and kills it if it has not within
// 10s, so that a hung server cannot hang the test.
func (p *proc) stop() {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(2 * time.Minute):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// env owns the processes of one test. Its cleanup (registered by newEnv)
// first reports on failure, while every server still runs and can be asked
// what it saw, and then stops the processes, last started first.
type env struct {
	t     *testing.T
	mu    sync.Mutex
	procs []*proc
	diags []func() string
}

// newEnv must be called after every t.TempDir the processes use: cleanups
// run last-registered first, and a directory must not be removed under a
// running server.
func newEnv(t *testing.T) *env {
	e := &env{t: t}
	t.Cleanup(func() {
		if t.Failed() {
			e.report()
		}
		e.mu.Lock()
		procs := e.procs
		e.mu.Unlock()
		for i := len(procs) - 1; i >= 0; i-- {
			procs[i].stop()
		}
	})
	return e
}

// onFailure adds a section to the failure report.
func (e *env) onFailure(f func() string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.diags = append(e.diags, f)
}

func (e *env) report() {
	e.mu.Lock()
	procs, diags := e.procs, e.diags
	e.mu.Unlock()
	for _, p := range procs {
		state := "running"
		if p.exited() {
			state = fmt.Sprintf("exited: %v", p.err)
		}
		e.t.Logf("===== %s (%s), output tail:\n%s", p.name, state, p.out.String())
	}
	for _, d := range diags {
		e.t.Log(d())
	}
}

// start runs bin with its output captured. The process ends with the test.
func (e *env) start(name, bin string, args ...string) *proc {
	e.t.Helper()
	p := &proc{name: name, out: &tailBuffer{max: 64 << 10}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout = p.out
	p.cmd.Stderr = p.out
	if err := p.cmd.Start(); err != nil {
		e.t.Fatalf("start %s: %v", name, err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	e.mu.Lock()
	e.procs = append(e.procs, p)
	e.mu.Unlock()
	return p
}

// deadProc returns a process that ended before the test let it: every wait
// gives up at once then, instead of waiting for a server that is gone.
func (e *env) deadProc() *proc {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, p := range e.procs {
		if p.exited() {
			return p
		}
	}
	return nil
}

// waitFor polls cond every 200ms until it holds, failing the test after d
// or as soon as one of the processes has exited. cond returns a description
// of what it saw, for the failure message.
func (e *env) waitFor(d time.Duration, what string, cond func() (bool, string)) {
	e.t.Helper()
	deadline := time.Now().Add(d)
	for {
		ok, seen := cond()
		if ok {
			return
		}
		if p := e.deadProc(); p != nil {
			e.t.Fatalf("waiting for %s: %s exited (%v); last seen: %s", what, p.name, p.err, seen)
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("waiting for %s: not within %v; last seen: %s", what, d, seen)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitHTTP200 waits until GET url answers 200.
func (e *env) waitHTTP200(d time.Duration, what, url string) {
	e.t.Helper()
	e.waitFor(d, what, func() (bool, string) {
		code, body, err := httpGet(url)
		if err != nil {
			return false, err.Error()
		}
		return code == http.StatusOK, fmt.Sprintf("%d %.200s", code, body)
	})
}

var httpClient = &http.Client{Timeout: 2 * time.Minute}

func httpGet(url string) (int, string, error) {
	resp, err := httpClient.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	return resp.StatusCode, string(b), err
}

// buildBinaries builds slot_exporter and slotsim from this module into dir.
func buildBinaries(t *testing.T, dir string) (exporter, slotsim string) {
	t.Helper()
	bins, err := redisproc.BuildBinaries(context.Background(), dir, ".", "./cmd/slotsim")
	if err != nil {
		t.Fatal(err)
	}
	return bins[0], bins[1]
}
