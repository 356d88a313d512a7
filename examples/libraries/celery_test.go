package libraries_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/slotexporter/slot_exporter/internal/redistest"
)

// celeryPython is the Python that has Celery: Debian's python3-celery is
// installed for /usr/bin/python3 (scripts/install-deps.sh installs it).
const celeryPython = "/usr/bin/python3"

// TestCelery drives the real Celery 5.2.6 (kombu 5.2.4's Redis transport)
// through examples/frameworks/celery.yml, with a worker as teams run it
// for reliability (acks_late, prefetch 1: the running task stays in
// unacked until it ends) and a visibility_timeout of 3 s:
//
//  1. healthy: a worker finishes 3 tasks: nothing waits or is unacked;
//  2. a worker SIGKILLed mid-task: its task stays unacked; once older than
//     visibility_timeout it is orphaned, the 2 others wait, and so they
//     stay while no worker runs;
//  3. a worker returns: it restores the orphan at its start (kombu's
//     restore_visible) and runs all 3: orphaned and waiting go to 0.
func TestCelery(t *testing.T) {
	t.Parallel()
	if err := exec.Command(celeryPython, "-c", "import celery").Run(); err != nil {
		t.Fatalf("%s cannot import celery (%v): install Debian's python3-celery (scripts/install-deps.sh does)", celeryPython, err)
	}
	srv := redistest.Start(t)
	rc := srv.Client()
	ctx := context.Background()
	e := startExporter(t, filepath.Join(repoRoot(t), "examples", "frameworks", "celery.yml"), srv.Addr,
		overrides{"tasks": {"visibility_timeout": "3s"}})
	const queue = "reports"
	args := func(cmd string, extra ...string) []string {
		return append([]string{celeryPython, filepath.Join(repoRoot(t), "examples", "libraries", "celery", "drive.py"),
			cmd, "--redis", srv.Addr, "--queue", queue}, extra...)
	}
	add := func(n int, jobMs string) []string {
		t.Helper()
		ev, err := runOnce(args("add", "--jobs", itoa(n), "--job-ms", jobMs)...)
		if err != nil {
			t.Fatal(err)
		}
		return ev.strs("ids")
	}
	waiting := func() float64 {
		t.Helper()
		ev, err := runOnce(args("counts")...)
		if err != nil {
			t.Fatal(err)
		}
		return ev.num("waiting")
	}
	redisTruth := func() (listed, unacked int64) {
		t.Helper()
		l, err := rc.LLen(ctx, queue).Result()
		if err != nil {
			t.Fatal(err)
		}
		u, err := rc.ZCard(ctx, "unacked_index").Result()
		if err != nil {
			t.Fatal(err)
		}
		return l, u
	}
	jobs := func(waiting, active, orphaned float64) func(metrics) error {
		return expect("tasks",
			w("slot_jobs", waiting, "state", "waiting"),
			w("slot_jobs", active, "state", "active"),
			w("slot_jobs", orphaned, "state", "orphaned"),
			w("slot_jobs_lost_total", 0),
		)
	}
	worker := func(name string) *holder {
		return startHolder(t, queue+"/"+name, args("work", "--visibility-s", "3")...)
	}

	// 1. Healthy.
	add(3, "20")
	healthy := worker("healthy")
	for range 3 {
		healthy.wait("completed", 60*time.Second)
	}
	e.sweptAfter("tasks")
	e.waitFor(10*time.Second, "healthy: all done", jobs(0, 0, 0))
	healthy.kill()

	// 2. A worker killed mid-task.
	ids := add(3, "3600000")
	dying := worker("dying")
	started := dying.wait("started", 60*time.Second)
	dying.kill()
	t.Logf("worker killed running %s of %v", started.str("id"), ids)
	e.waitFor(10*time.Second, "killed: unacked, still within visibility_timeout", jobs(2, 1, 0))
	m := e.waitFor(30*time.Second, "killed: orphaned after visibility_timeout", jobs(2, 0, 1))
	if v := m.val("slot_queue_jobs", "family", "tasks", "queue", queue, "state", "orphaned"); v != 1 {
		t.Errorf("slot_queue_jobs{queue=%q,state=orphaned} = %v, want 1", queue, v)
	}
	if listed, unacked := redisTruth(); listed != 2 || unacked != 1 {
		t.Errorf("Redis holds %d listed, %d unacked; want 2, 1", listed, unacked)
	}
	if n := waiting(); n != 2 {
		t.Errorf("kombu's own message_count = %v, want 2", n)
	}
	e.holdsFor(3*time.Second, "killed, no worker: the orphan stays", jobs(2, 0, 1))
	if age := e.current().val("slot_jobs_oldest_seconds", "family", "tasks", "state", "orphaned"); age < 3 {
		t.Errorf("oldest orphaned %vs, want beyond the 3 s visibility_timeout", age)
	}

	// 3. A worker returns, with short tasks now: it restores the orphan.
	back := worker("returning")
	// The restored task runs again (it sleeps an hour): the worker takes
	// it, or one of the two waiting; either way nothing is orphaned.
	back.wait("started", 60*time.Second)
	e.sweptAfter("tasks")
	e.waitFor(10*time.Second, "recovered: nothing orphaned", expect("tasks", w("slot_jobs", 0, "state", "orphaned"), w("slot_jobs", 1, "state", "active")))
	if listed, unacked := redisTruth(); listed != 2 || unacked != 1 {
		t.Errorf("recovered: Redis holds %d listed, %d unacked; want 2, 1 (one running again)", listed, unacked)
	}
}
