package libraries_test

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slotexporter/slot_exporter/internal/redistest"
)

// TestBullMQ drives the real BullMQ 6.7.0 and Bull 4.16.5 (one layout, one
// kind) through examples/frameworks/bullmq.yml:
//
//  1. healthy: a worker of concurrency 3 finishes 6 jobs: nothing waits,
//     nothing is orphaned;
//  2. a worker of concurrency 3 is SIGKILLed holding 3 of 6 jobs: once
//     their locks expire, orphaned 3 and waiting 3, and they stay so while
//     no worker runs (the library's own counts call them active 3,
//     waiting 3: it cannot tell a dead worker's jobs from live ones);
//  3. a healthy worker returns: its stalled check moves the 3 back to wait
//     and it runs all 6: orphaned and waiting go to 0.
//
// At each step the exporter's figures are compared with Redis read by the
// test (LLEN, EXISTS of each lock) and with the library's getJobCounts().
func TestBullMQ(t *testing.T) {
	for _, lib := range []string{"bullmq", "bull"} {
		t.Run(lib, func(t *testing.T) {
			t.Parallel()
			testBullLayout(t, lib)
		})
	}
}

func testBullLayout(t *testing.T, lib string) {
	drive := append(nodeDriver(t)[:1], filepath.Join(repoRoot(t), "examples", "libraries", "node", "queues.js"))
	srv := redistest.Start(t)
	rc := srv.Client()
	ctx := context.Background()
	e := startExporter(t, filepath.Join(repoRoot(t), "examples", "frameworks", "bullmq.yml"), srv.Addr, nil)
	queue := "mail-" + lib
	args := func(cmd string, extra ...string) []string {
		return append(append(append([]string{}, drive...), cmd, "--lib", lib, "--redis", srv.Addr, "--queue", queue), extra...)
	}
	add := func(n int) []string {
		t.Helper()
		ev, err := runOnce(args("add", "--jobs", itoa(n), "--name", "send-welcome")...)
		if err != nil {
			t.Fatal(err)
		}
		return ev.strs("ids")
	}
	counts := func() event {
		t.Helper()
		ev, err := runOnce(args("counts")...)
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	// redisTruth is what Redis holds, read by the test: waiting ids, and
	// active ids with and without their lock.
	redisTruth := func() (waiting, locked, unlocked int) {
		t.Helper()
		base := "bull:" + queue + ":"
		w, err := rc.LLen(ctx, base+"wait").Result()
		if err != nil {
			t.Fatal(err)
		}
		ids, err := rc.LRange(ctx, base+"active", 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			n, err := rc.Exists(ctx, base+id+":lock").Result()
			if err != nil {
				t.Fatal(err)
			}
			if n == 1 {
				locked++
			} else {
				unlocked++
			}
		}
		return int(w), locked, unlocked
	}
	jobs := func(waiting, active, orphaned float64) func(metrics) error {
		return expect("jobs",
			w("slot_jobs", waiting, "state", "waiting"),
			w("slot_jobs", active, "state", "active"),
			w("slot_jobs", orphaned, "state", "orphaned"),
			w("slot_jobs", 0, "state", "stuck"),
			w("slot_jobs", 0, "state", "overdue"),
			w("slot_jobs_lost_total", 0),
		)
	}
	worker := func(name, jobMs string) *holder {
		return startHolder(t, queue+"/"+name, args("work", "--concurrency", "3", "--job-ms", jobMs, "--lock-ms", "2000", "--stalled-ms", "1000")...)
	}

	// 1. Healthy.
	healthy := worker("healthy", "20")
	add(6)
	for range 6 {
		healthy.wait("completed", 30*time.Second)
	}
	e.sweptAfter("jobs")
	e.waitFor(10*time.Second, "healthy: all done", jobs(0, 0, 0))
	if c := counts(); c.num("completed") != 6 || c.num("waiting") != 0 || c.num("active") != 0 {
		t.Fatalf("healthy: %s's own counts %v, want 6 completed", lib, c)
	}
	healthy.release()

	// 2. A worker killed holding 3 of 6 jobs.
	dying := worker("dying", "3600000")
	ids := add(6)
	var startedIDs []string
	for range 3 {
		startedIDs = append(startedIDs, dying.wait("started", 30*time.Second).str("id"))
	}
	dying.kill()
	t.Logf("%s: worker killed holding 3 of %v", lib, ids)
	m := e.waitFor(30*time.Second, "killed: orphaned once the locks expire", jobs(3, 0, 3))
	if v := m.val("slot_queue_jobs", "family", "jobs", "queue", queue, "state", "orphaned"); v != 3 {
		t.Errorf("slot_queue_jobs{queue=%q,state=orphaned} = %v, want 3", queue, v)
	}
	if v := m.val("slot_users_active", "family", "jobs"); v != 1 {
		t.Errorf("slot_users_active = %v, want 1 (the queue with orphans)", v)
	}
	if waiting, locked, unlocked := redisTruth(); waiting != 3 || locked != 0 || unlocked != 3 {
		t.Errorf("Redis holds waiting %d, active with lock %d, without %d; want 3, 0, 3", waiting, locked, unlocked)
	}
	if c := counts(); c.num("active") != 3 || c.num("waiting") != 3 {
		t.Errorf("killed: %s's own counts %v, want active 3, waiting 3", lib, c)
	}
	// The on-call page lists the three, and names the library's own
	// recovery; no release button.
	page := getPage(t, e.url+"/leaks/jobs/"+queue)
	for _, id := range startedIDs {
		if !strings.Contains(page, ">"+id+"<") {
			t.Errorf("the queue's page does not list orphaned job %s:\n%s", id, page)
		}
	}
	for _, s := range []string{"send-welcome", "stalled check", "not offered for queue frameworks"} {
		if !strings.Contains(page, s) {
			t.Errorf("the queue's page does not say %q:\n%s", s, page)
		}
	}
	// No worker: nothing moves them.
	e.holdsFor(3*time.Second, "killed, no worker: orphans stay", jobs(3, 0, 3))
	m = e.current()
	if age := m.val("slot_jobs_oldest_seconds", "family", "jobs", "state", "orphaned"); age < 2 {
		t.Errorf("oldest orphaned %vs, want at least the 2 s lock", age)
	}
	if floor := m.val("slot_user_floor_seconds", "family", "jobs", "user", queue); floor <= 0 {
		t.Errorf("floor of %s = %v, want > 0 while orphans stay", queue, floor)
	}

	// 3. A healthy worker returns: its stalled check requeues the three.
	back := worker("returning", "20")
	for range 6 {
		back.wait("completed", 60*time.Second)
	}
	e.sweptAfter("jobs")
	e.waitFor(10*time.Second, "recovered", jobs(0, 0, 0))
	if waiting, locked, unlocked := redisTruth(); waiting != 0 || locked != 0 || unlocked != 0 {
		t.Errorf("recovered: Redis holds waiting %d, active %d+%d; want none", waiting, locked, unlocked)
	}
	if c := counts(); c.num("completed") != 12 || c.num("active") != 0 {
		t.Errorf("recovered: %s's own counts %v, want 12 completed, none active", lib, c)
	}
	back.release()
}

// getPage GETs an on-call page, which must answer 200.
func getPage(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s\n%s", url, resp.Status, b)
	}
	return string(b)
}
