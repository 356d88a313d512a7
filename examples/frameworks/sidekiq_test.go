package frameworks_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/redistest"
)

// sidekiqStats is what examples/frameworks/sidekiq/drive.rb's stats prints:
// Sidekiq 6.4.1's own API (Stats, ProcessSet without its pruning, Workers,
// Queue).
type sidekiqStats struct {
	Enqueued        int64 `json:"enqueued"`
	Scheduled       int64 `json:"scheduled"`
	Retry           int64 `json:"retry"`
	Dead            int64 `json:"dead"`
	ProcessesListed int64 `json:"processes_listed"`
	Processes       []struct {
		Identity string  `json:"identity"`
		Busy     int64   `json:"busy"`
		Beat     float64 `json:"beat"`
	} `json:"processes"`
	WorkersSize int64 `json:"workers_size"`
	Work        []struct {
		Process string `json:"process"`
		JID     string `json:"jid"`
		Queue   string `json:"queue"`
	} `json:"work"`
	Queues map[string]struct {
		Size    int64   `json:"size"`
		Latency float64 `json:"latency"`
	} `json:"queues"`
}

// sidekiqRig is one redis-server with Sidekiq's drivers pointed at it.
type sidekiqRig struct {
	t   *testing.T
	srv *redistest.Server
	rc  *redis.Client
	url string
	dir string
}

func newSidekiqRig(t *testing.T) *sidekiqRig {
	t.Helper()
	frameworkTool(t, "ruby", "-e", `require "sidekiq"; abort "Sidekiq #{Sidekiq::VERSION}, tested with 6.4" unless Sidekiq::VERSION.start_with?("6.4")`)
	srv := redistest.Start(t)
	return &sidekiqRig{t: t, srv: srv, rc: srv.Client(), url: "redis://" + srv.Addr, dir: driverDir(t, "sidekiq")}
}

// worker starts a Sidekiq process on queue with concurrency threads.
func (r *sidekiqRig) worker(name, queue string, concurrency int) *workerProc {
	r.t.Helper()
	return startWorkerProc(r.t, r.dir, r.url, name, "sidekiq", "-r", "./jobs.rb", "-q", queue, "-c", fmt.Sprint(concurrency))
}

// exporter runs examples/frameworks/sidekiq.yml on the rig's server.
func (r *sidekiqRig) exporter() *swept {
	r.t.Helper()
	return exampleExporter(r.t, "sidekiq.yml", r.srv.Addr, r.rc, map[string]any{"max_wait": "1m"})
}

// oldestEnqueued is the enqueued_at (Unix ms) of the job queue's next
// BRPOP takes, read independently of the exporter.
func (r *sidekiqRig) oldestEnqueued(queue string) int64 {
	r.t.Helper()
	v, err := r.rc.LIndex(context.Background(), "queue:"+queue, -1).Result()
	if err != nil {
		r.t.Fatal(err)
	}
	var job struct {
		EnqueuedAt float64 `json:"enqueued_at"`
	}
	if err := json.Unmarshal([]byte(v), &job); err != nil {
		r.t.Fatal(err)
	}
	return int64(job.EnqueuedAt * 1000)
}

func (r *sidekiqRig) client(out any, args ...string) {
	r.t.Helper()
	runClient(r.t, r.dir, r.url, out, append([]string{"ruby", "drive.rb"}, args...)...)
}

func (r *sidekiqRig) enqueue(queue, gate string, n int) []string {
	r.t.Helper()
	var jids []string
	r.client(&jids, "enqueue", queue, gate, fmt.Sprint(n))
	return jids
}

func (r *sidekiqRig) stats() sidekiqStats {
	r.t.Helper()
	var s sidekiqStats
	r.client(&s, "stats")
	return s
}

// processes is the `processes` set, read independently of Sidekiq.
func (r *sidekiqRig) processes() []string {
	r.t.Helper()
	ps, err := r.rc.SMembers(context.Background(), "processes").Result()
	if err != nil {
		r.t.Fatal(err)
	}
	return ps
}

// awaitWork waits until process id's work hash holds n jobs: the
// heartbeat (every 5 s) has recorded them.
func (r *sidekiqRig) awaitWork(id string, n int64) {
	r.t.Helper()
	awaitRedis(r.t, fmt.Sprintf("%d jobs in %s:workers", n, id), func(ctx context.Context) (bool, error) {
		got, err := r.rc.HLen(ctx, id+":workers").Result()
		return got == n, err
	})
}

// awaitOneProcess waits until `processes` lists exactly one process and
// returns it.
func (r *sidekiqRig) awaitProcesses(n int) []string {
	r.t.Helper()
	var ps []string
	awaitRedis(r.t, fmt.Sprintf("%d processes listed", n), func(ctx context.Context) (bool, error) {
		var err error
		ps, err = r.rc.SMembers(ctx, "processes").Result()
		return len(ps) == n, err
	})
	return ps
}

// TestSidekiqKilledMidJob: a Sidekiq 6.4.1 process with 3 threads takes 3
// of 6 jobs and is SIGKILLed. Its heartbeat and work hashes expire 60 s
// after its last beat; the jobs are gone from Redis for good (OSS Sidekiq
// never requeues them) and the process stays listed in `processes` until
// a live process prunes it.
func TestSidekiqKilledMidJob(t *testing.T) {
	t.Parallel()
	r := newSidekiqRig(t)
	ctx := context.Background()
	e := r.exporter()
	r.enqueue("default", "g", 6)
	w := r.worker("sidekiq-1", "default", 3)
	started := awaitStarted(t, r.rc, 3)
	id := r.awaitProcesses(1)[0]
	r.awaitWork(id, 3)

	s := r.stats()
	if len(s.Processes) != 1 || s.Processes[0].Busy != 3 || len(s.Work) != 3 || s.Queues["default"].Size != 3 {
		t.Fatalf("before the kill, Sidekiq reports %+v", s)
	}
	// The exporter must see the jobs in hand while the process lives.
	e.sweep()
	e.expect("3 of 6 in hand", figures{jobs: map[string]float64{"waiting": 3, "active": 3}, live: 1})
	e.age("waiting", r.oldestEnqueued("default"))
	if e.queue("default", "active") != 3 || e.queue("default", "waiting") != 3 {
		t.Errorf("slot_queue_jobs of default: %v", e.m)
	}

	w.kill()
	awaitRedis(t, "the killed process's heartbeat to expire", func(ctx context.Context) (bool, error) {
		n, err := r.rc.Exists(ctx, id, id+":workers").Result()
		return n == 0, err
	})
	s = r.stats()
	if s.ProcessesListed != 1 || len(s.Processes) != 0 || len(s.Work) != 0 || s.Queues["default"].Size != 3 {
		t.Fatalf("after the expiry, Sidekiq reports %+v", s)
	}
	e.sweep()
	e.expect("killed, heartbeat expired", figures{jobs: map[string]float64{"waiting": 3}, dead: 1, lost: 3})
	e.age("waiting", r.oldestEnqueued("default"))
	// Still, while no process runs.
	e.sweep()
	e.expect("no process", figures{jobs: map[string]float64{"waiting": 3}, dead: 1, lost: 3})
	// The 3 started jobs are nowhere in Redis: not queued, not in retry.
	queued, err := r.rc.LRange(ctx, "queue:default", 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, jid := range started {
		for _, q := range queued {
			if strings.Contains(q, jid) {
				t.Errorf("lost job %s is queued again: %s", jid, q)
			}
		}
	}

	// A returning process prunes the dead one (its scheduler's first
	// poll, 10-15 s after it starts) and works the 3 that waited; the
	// lost ones never run.
	r.worker("sidekiq-2", "default", 3)
	again := awaitStarted(t, r.rc, 3)
	r.awaitProcesses(1)
	awaitRedis(t, "the dead process pruned", func(ctx context.Context) (bool, error) {
		ok, err := r.rc.SIsMember(ctx, "processes", id).Result()
		return !ok, err
	})
	for _, jid := range again {
		for _, l := range started {
			if jid == l {
				t.Errorf("lost job %s ran again", jid)
			}
		}
	}
	id2 := r.awaitProcesses(1)[0]
	r.awaitWork(id2, 3)
	e.sweep()
	e.expect("a process back", figures{jobs: map[string]float64{"active": 3}, live: 1, lost: 3})
	openGate(t, r.rc, "g", 3)
	awaitDone(t, r.rc, 3)
	r.awaitWork(id2, 0)
	e.sweep()
	e.expect("done", figures{jobs: map[string]float64{}, live: 1, lost: 3})
	if s := r.stats(); s.Enqueued != 0 || len(s.Work) != 0 || s.Retry != 0 || s.Dead != 0 || len(s.Processes) != 1 {
		t.Errorf("at the end, Sidekiq reports %+v", s)
	}
}

// TestSidekiqHealthy: a Sidekiq process works two jobs and finishes them;
// its work hash shows them while they run and empties at the next beat.
func TestSidekiqHealthy(t *testing.T) {
	t.Parallel()
	r := newSidekiqRig(t)
	e := r.exporter()
	r.worker("sidekiq-1", "default", 2)
	r.enqueue("default", "g", 2)
	awaitStarted(t, r.rc, 2)
	id := r.awaitProcesses(1)[0]
	r.awaitWork(id, 2)
	if s := r.stats(); len(s.Processes) != 1 || s.Processes[0].Busy != 2 || len(s.Work) != 2 {
		t.Fatalf("while working, Sidekiq reports %+v", s)
	}
	e.sweep()
	e.expect("working", figures{jobs: map[string]float64{"active": 2}, live: 1})
	openGate(t, r.rc, "g", 2)
	awaitDone(t, r.rc, 2)
	r.awaitWork(id, 0)
	if s := r.stats(); len(s.Processes) != 1 || len(s.Work) != 0 || s.Enqueued != 0 {
		t.Fatalf("after the jobs, Sidekiq reports %+v", s)
	}
	e.sweep()
	e.expect("finished", figures{jobs: map[string]float64{}, live: 1})
}

// TestSidekiqNoWorker: jobs wait in their queue and scheduled jobs fall
// due with no process to poll them.
func TestSidekiqNoWorker(t *testing.T) {
	t.Parallel()
	r := newSidekiqRig(t)
	ctx := context.Background()
	r.enqueue("mail", "g", 2)
	now := float64(exportertest.RedisTime(t, r.rc)) / 1000
	var jids []string
	r.client(&jids, "schedule", "mail", "g", fmt.Sprint(now-600), "2")
	due, err := r.rc.ZRangeByScore(ctx, "schedule", &redis.ZRangeBy{Min: "-inf", Max: fmt.Sprint(now - 599)}).Result()
	if err != nil || len(due) != 2 {
		t.Fatalf("schedule due 10 min ago: %v, %v", due, err)
	}
	s := r.stats()
	if s.Enqueued != 2 || s.Scheduled != 2 || s.ProcessesListed != 0 || s.Queues["mail"].Size != 2 {
		t.Fatalf("Sidekiq reports %+v", s)
	}
	e := r.exporter()
	e.sweep()
	e.expect("no process", figures{jobs: map[string]float64{"waiting": 2, "overdue": 2}})
	e.age("waiting", r.oldestEnqueued("mail"))
	if e.queue("mail", "overdue") != 2 {
		t.Errorf("slot_queue_jobs{queue=\"mail\",state=\"overdue\"} = %v, want 2", e.queue("mail", "overdue"))
	}
	// Sidekiq's own latency (Queue#latency), taken before the sweep on
	// the same machine's clock, is at most the exporter's age.
	if got := e.get("slot_jobs_oldest_seconds", "state", "waiting"); s.Queues["mail"].Latency <= 0 || got < s.Queues["mail"].Latency-0.002 {
		t.Errorf("ages: Sidekiq's latency %v, exporter's %v", s.Queues["mail"].Latency, got)
	}
}
