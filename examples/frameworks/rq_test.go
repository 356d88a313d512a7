package frameworks_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/redistest"
)

// rqStats is what examples/frameworks/rq/drive.py's stats prints: RQ
// 1.13's own API, read without its cleanups.
type rqStats struct {
	Queues map[string]struct {
		Count          int64    `json:"count"`
		StartedExpired []string `json:"started_expired"`
		Failed         int64    `json:"failed"`
		Scheduled      int64    `json:"scheduled"`
	} `json:"queues"`
	WorkerKeys []string `json:"worker_keys"`
}

// rqCleanup is what drive.py's cleanup prints: what RQ's maintenance did.
type rqCleanup struct {
	Queues map[string]struct {
		MovedToFailed []string `json:"moved_to_failed"`
		Started       []string `json:"started"`
		Failed        []string `json:"failed"`
	} `json:"queues"`
	Workers []string `json:"workers"`
}

type rqRig struct {
	t   *testing.T
	srv *redistest.Server
	rc  *redis.Client
	url string
	dir string
}

func newRQRig(t *testing.T) *rqRig {
	t.Helper()
	frameworkTool(t, debianPython, "-c", `import rq, sys; sys.exit(0 if rq.__version__.startswith("1.13") else "RQ %s, tested with 1.13" % rq.__version__)`)
	srv := redistest.Start(t)
	r := &rqRig{t: t, srv: srv, rc: srv.Client(), url: "redis://" + srv.Addr, dir: driverDir(t, "rq")}
	t.Cleanup(r.killHorses)
	return r
}

// killHorses ends the work horses a failed test left blocked on their
// gates (each in a session of its own, out of its worker's group).
func (r *rqRig) killHorses() {
	pids, err := r.rc.HVals(context.Background(), "fwtest:pids").Result()
	if err != nil {
		return
	}
	for _, p := range pids {
		pid, err := strconv.Atoi(p)
		if err != nil {
			continue
		}
		if cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && strings.Contains(string(cmdline), "drive.py") {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
	}
}

// worker starts an RQ worker. A monitoring interval of 1 s makes its
// started jobs expire 61 s after their last heartbeat
// (Worker.get_heartbeat_ttl: min(timeout left, interval) + 60).
func (r *rqRig) worker(name, queues string, extra ...string) *workerProc {
	r.t.Helper()
	argv := append([]string{debianPython, "drive.py", "worker", name, queues, "--monitoring", "1"}, extra...)
	return startWorkerProc(r.t, r.dir, r.url, name, argv...)
}

// exporter runs examples/frameworks/rq.yml on the rig's server.
func (r *rqRig) exporter() *swept {
	r.t.Helper()
	return exampleExporter(r.t, "rq.yml", r.srv.Addr, r.rc, map[string]any{"max_wait": "1m"})
}

// jobTime is a time field of an RQ job hash (Unix ms), read
// independently of the exporter.
func (r *rqRig) jobTime(id, field string) int64 {
	r.t.Helper()
	v, err := r.rc.HGet(context.Background(), "rq:job:"+id, field).Result()
	if err != nil {
		r.t.Fatal(err)
	}
	at, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		r.t.Fatal(err)
	}
	return at.UnixMilli()
}

func (r *rqRig) client(out any, args ...string) {
	r.t.Helper()
	runClient(r.t, r.dir, r.url, out, append([]string{debianPython, "drive.py"}, args...)...)
}

func (r *rqRig) enqueue(queue, gate string, n int) []string {
	r.t.Helper()
	var ids []string
	r.client(&ids, "enqueue", queue, gate, fmt.Sprint(n))
	return ids
}

func (r *rqRig) stats(queues string) rqStats {
	r.t.Helper()
	var s rqStats
	r.client(&s, "stats", queues)
	return s
}

// killWithHorse SIGKILLs a worker and the work horse running job id, as
// stopping its container would.
func (r *rqRig) killWithHorse(w *workerProc, id string) {
	r.t.Helper()
	pid, err := r.rc.HGet(context.Background(), "fwtest:pids", id).Int()
	if err != nil {
		r.t.Fatalf("the pid of job %s's work horse: %v", id, err)
	}
	w.kill()
	_ = syscall.Kill(-pid, syscall.SIGKILL)
}

// TestRQKilledMidJob: an RQ 1.13 worker is SIGKILLed (with its work horse)
// holding 1 of 3 jobs. Its StartedJobRegistry entry passes its expiry a
// minute later and stays: a returning worker within the 15 minutes of
// the queue's cleaning lock leaves it there, and does not requeue it; the
// registry cleanup, once it runs, moves it to failed.
func TestRQKilledMidJob(t *testing.T) {
	t.Parallel()
	r := newRQRig(t)
	ctx := context.Background()
	e := r.exporter()
	ids := r.enqueue("default", "g", 3)
	w := r.worker("rq-1", "default")
	started := awaitStarted(t, r.rc, 1)
	if started[0] != ids[0] {
		t.Fatalf("started %v, want the first of %v", started, ids)
	}
	e.sweep()
	e.expect("1 of 3 started", figures{jobs: map[string]float64{"waiting": 2, "active": 1}, live: 1})
	e.age("waiting", r.jobTime(ids[1], "enqueued_at"))
	r.killWithHorse(w, started[0])
	awaitRedis(t, "the started entry past its expiry and the worker key gone", func(ctx context.Context) (bool, error) {
		now, err := r.rc.Time(ctx).Result()
		if err != nil {
			return false, err
		}
		expired, err := r.rc.ZRangeByScore(ctx, "rq:wip:default", &redis.ZRangeBy{Min: "-inf", Max: fmt.Sprint(now.Unix())}).Result()
		if err != nil {
			return false, err
		}
		alive, err := r.rc.Exists(ctx, "rq:worker:rq-1").Result()
		return len(expired) == 1 && alive == 0, err
	})
	e.sweep()
	e.expect("killed, entry expired", figures{jobs: map[string]float64{"waiting": 2, "orphaned": 1}, dead: 1})
	e.age("orphaned", r.jobTime(started[0], "started_at"))
	if e.queue("default", "orphaned") != 1 {
		t.Errorf("slot_queue_jobs{queue=\"default\",state=\"orphaned\"} = %v, want 1", e.queue("default", "orphaned"))
	}
	// The queue stands where a user stands: holding an orphan, it is
	// active (its used is its orphaned jobs) and its floor runs.
	if got := e.get("slot_users_active"); got != 1 {
		t.Errorf("slot_users_active = %v, want 1 (the queue holding the orphan)", got)
	}
	s := r.stats("default")
	if q := s.Queues["default"]; q.Count != 2 || !slices.Equal(q.StartedExpired, started) || q.Failed != 0 {
		t.Fatalf("after the kill, RQ reports %+v", s)
	}
	if !slices.Equal(s.WorkerKeys, []string{"rq:worker:rq-1"}) {
		t.Fatalf("worker keys %v, want the dead one still registered", s.WorkerKeys)
	}
	e.sweep()
	e.expect("no worker", figures{jobs: map[string]float64{"waiting": 2, "orphaned": 1}, dead: 1})

	// A worker comes back within the cleaning lock's 899 s: it works the
	// queue but leaves the dead one's entry and registration.
	r.worker("rq-2", "default")
	again := awaitStarted(t, r.rc, 1)
	if again[0] != ids[1] {
		t.Fatalf("rq-2 started %v, want %s", again, ids[1])
	}
	s = r.stats("default")
	if q := s.Queues["default"]; q.Count != 1 || !slices.Equal(q.StartedExpired, started) || q.Failed != 0 {
		t.Fatalf("with rq-2 back, RQ reports %+v", s)
	}
	e.sweep()
	e.expect("rq-2 back, no cleanup", figures{jobs: map[string]float64{"waiting": 1, "active": 1, "orphaned": 1}, live: 1, dead: 1})

	// The lock runs out (deleted here rather than waited for): the next
	// worker to start cleans the queue's registries at once. The orphan
	// goes to failed, never back to the queue; the dead worker is
	// unregistered.
	if err := r.rc.Del(ctx, "rq:clean_registries:default").Err(); err != nil {
		t.Fatal(err)
	}
	r.worker("rq-3", "default")
	awaitStarted(t, r.rc, 1)
	awaitRedis(t, "the orphan moved to failed", func(ctx context.Context) (bool, error) {
		n, err := r.rc.ZScore(ctx, "rq:failed:default", started[0]).Result()
		if err == redis.Nil {
			return false, nil
		}
		return n > 0, err
	})
	s = r.stats("default")
	if q := s.Queues["default"]; q.Count != 0 || len(q.StartedExpired) != 0 || q.Failed != 1 {
		t.Fatalf("after the cleanup, RQ reports %+v", s)
	}
	if slices.Contains(s.WorkerKeys, "rq:worker:rq-1") {
		t.Errorf("worker keys %v still list the dead worker", s.WorkerKeys)
	}
	e.sweep()
	e.expect("cleaned up", figures{jobs: map[string]float64{"active": 2}, live: 2})
	openGate(t, r.rc, "g", 2)
	awaitDone(t, r.rc, 2)
	awaitRedis(t, "the started registry empty", func(ctx context.Context) (bool, error) {
		n, err := r.rc.ZCard(ctx, "rq:wip:default").Result()
		return n == 0, err
	})
	e.sweep()
	e.expect("done", figures{jobs: map[string]float64{}, live: 2})
}

// TestRQHealthy: a worker works two jobs, one at a time, and finishes
// them.
func TestRQHealthy(t *testing.T) {
	t.Parallel()
	r := newRQRig(t)
	ctx := context.Background()
	e := r.exporter()
	ids := r.enqueue("default", "g", 2)
	r.worker("rq-1", "default")
	awaitStarted(t, r.rc, 1)
	e.sweep()
	e.expect("working", figures{jobs: map[string]float64{"waiting": 1, "active": 1}, live: 1})
	if got, err := r.rc.ZRange(ctx, "rq:wip:default", 0, -1).Result(); err != nil || !slices.Equal(got, ids[:1]) {
		t.Fatalf("started registry %v, %v; want %v", got, err, ids[:1])
	}
	if s := r.stats("default"); s.Queues["default"].Count != 1 || !slices.Equal(s.WorkerKeys, []string{"rq:worker:rq-1"}) {
		t.Fatalf("while working, RQ reports %+v", s)
	}
	openGate(t, r.rc, "g", 2)
	awaitDone(t, r.rc, 2)
	awaitRedis(t, "the started registry empty", func(ctx context.Context) (bool, error) {
		n, err := r.rc.ZCard(ctx, "rq:wip:default").Result()
		return n == 0, err
	})
	if s := r.stats("default"); s.Queues["default"].Count != 0 || s.Queues["default"].Failed != 0 {
		t.Fatalf("after the jobs, RQ reports %+v", s)
	}
	e.sweep()
	e.expect("finished", figures{jobs: map[string]float64{}, live: 1})
}

// TestRQNoWorker: jobs wait in their queue and scheduled jobs fall due
// with no scheduler to move them.
func TestRQNoWorker(t *testing.T) {
	t.Parallel()
	r := newRQRig(t)
	ctx := context.Background()
	r.enqueue("mail", "g", 2)
	now := float64(exportertest.RedisTime(t, r.rc)) / 1000
	var ids []string
	r.client(&ids, "schedule", "mail", "g", fmt.Sprint(now-600), "2")
	due, err := r.rc.ZRangeByScore(ctx, "rq:scheduled:mail", &redis.ZRangeBy{Min: "-inf", Max: fmt.Sprint(now - 599)}).Result()
	if err != nil || len(due) != 2 {
		t.Fatalf("scheduled due 10 min ago: %v, %v", due, err)
	}
	s := r.stats("mail")
	if q := s.Queues["mail"]; q.Count != 2 || q.Scheduled != 2 || len(s.WorkerKeys) != 0 {
		t.Fatalf("RQ reports %+v", s)
	}
	e := r.exporter()
	e.sweep()
	e.expect("no worker", figures{jobs: map[string]float64{"waiting": 2, "overdue": 2}})
	head, err := r.rc.LIndex(ctx, "rq:queue:mail", 0).Result()
	if err != nil {
		t.Fatal(err)
	}
	e.age("waiting", r.jobTime(head, "enqueued_at"))
	if e.queue("mail", "overdue") != 2 || e.queue("mail", "waiting") != 2 {
		t.Errorf("slot_queue_jobs of mail: %v", exportertest.Series(e.m, "slot_queue_jobs"))
	}
}
