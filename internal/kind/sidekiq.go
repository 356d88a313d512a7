package kind

import (
	"context"
	"sort"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/redisread"
)

// sidekiq reads the layout of Sidekiq 6.4 (and 7's renamed work hash),
// learned from its source (lib/sidekiq/launcher.rb, fetch.rb,
// processor.rb, scheduled.rb, client.rb, api.rb of 6.4.1). Under an
// optional namespace ns (redis-namespace), Sidekiq keeps:
//
//   - queues, the set of queue names (the discovery key), and queue:<q>,
//     a list of jobs' JSON (jid, class, enqueued_at in s), LPUSHed by the
//     client and BRPOPed by a process: the right end is the oldest;
//   - processes, the set of process identities (host:pid:nonce), and per
//     process its heartbeat hash <identity> (beat, busy, info; 60 s TTL)
//     and its work hash <identity>:workers (<identity>:work from 7), one
//     field per busy thread: {"queue", "payload": the job's JSON, "run_at"}.
//     Both are rewritten every 5 s (Launcher#❤);
//   - schedule and retry, sorted sets of jobs' JSON scored by due time (s),
//     which a live process's poller moves to their queues.
//
// OSS Sidekiq holds a started job only in the process's memory: a process
// killed mid-job leaves its work hash to expire with its heartbeat, and
// nothing requeues the job. So the exporter samples every work hash while
// its process lives, and counts a job lost (slot_jobs_lost_total) when it
// vanishes together with its process's heartbeat (sidekiqProcesses says
// how a job that finished is told apart). Per queue:
//
//   - waiting: LLEN queue:<q>, aged by the oldest job's enqueued_at;
//   - active: work entries of a process with a heartbeat, stuck once
//     started (run_at) more than max_hold ago;
//   - orphaned: work entries of a process whose heartbeat is gone (the
//     two hashes expire together, so this is rarely seen);
//   - scheduled and overdue: schedule and retry entries, due more than
//     max_wait ago being overdue (no process polls them).
//
// Workers: listed processes with a heartbeat are live, without one dead
// (a live process's poller prunes them from processes).
func init() {
	registerFramework(config.KindSidekiq, func() frameworkLayout { return &sidekiqLayout{procs: newSidekiqProcesses(), stream: newStreamReader()} })
}

type sidekiqLayout struct {
	ns               string
	queues           []string // nil: every queue found
	maxWait, maxHold int64    // ms
	watches          func(string) bool
	procs            *sidekiqProcesses
	stream           *streamReader
}

func (l *sidekiqLayout) configure(f *config.Family) {
	l.ns = ""
	if f.Prefix != "" {
		l.ns = f.Prefix + ":"
	}
	l.queues = nil
	if len(f.Queues) > 0 {
		l.queues = append([]string(nil), f.Queues...)
	}
	l.maxWait, l.maxHold = f.MaxWait.Milliseconds(), f.MaxHold.Milliseconds()
	fam := *f
	l.watches = fam.Watches
}

func (l *sidekiqLayout) reads(now int64) redisread.Reads {
	return &sidekiqReads{l: l, now: now, remembered: l.procs.remembered()}
}

func (l *sidekiqLayout) registersWorkers() bool { return true }

func (l *sidekiqLayout) recovery() string {
	return "Open-source Sidekiq never requeues a job whose process died: it was held only in that process's memory, and its work entry expired with the heartbeat (60 s). The job is lost: find it by jid in your logs and enqueue it again. A live process prunes the dead one from processes; Sidekiq Pro's super_fetch, or Enterprise's reliable fetch, recover such jobs."
}

// settle judges every job that left a work hash since the last sweep.
func (l *sidekiqLayout) settle(reads []*FrameworkRead, lost bool) int64 {
	if len(reads) == 0 {
		// The queues set was not read: nothing to judge by.
		return 0
	}
	l.procs.begin()
	var n int64
	for _, fr := range reads {
		procs, _ := fr.Extra.(map[string]sidekiqSighting)
		for id, s := range procs {
			for _, j := range l.procs.observe(id, s) {
				if l.watches(j.Queue) {
					n++
				}
			}
		}
	}
	l.procs.end()
	if lost {
		return 0
	}
	return n
}

type sidekiqReads struct {
	l          *sidekiqLayout
	now        int64
	remembered []string
}

func (s *sidekiqReads) Read(ctx context.Context, c redis.Cmdable, keys []string, reads []redisread.KeyRead) error {
	for i, k := range keys {
		r := &reads[i]
		r.Key = k
		fr := &FrameworkRead{}
		read, err := readSidekiq(ctx, c, s.l.stream, r, fr, s.l.ns, s.l.queues, s.remembered, s.now, s.l.maxWait)
		if err != nil {
			return err
		}
		if read == nil || r.Status != redisread.OK {
			continue
		}
		for _, p := range read.Procs {
			for _, j := range p.Work {
				q := read.queue(j.Queue)
				switch {
				case !p.Heartbeat:
					started := int64(-1)
					if j.RunAt > 0 {
						started = j.RunAt
					}
					q.AddOrphan(Job{ID: j.JID, Name: j.Class, Started: started, Attempts: j.Attempts})
				case j.RunAt > 0 && s.now-j.RunAt > s.l.maxHold:
					q.Jobs[JobStuck]++
				default:
					q.Jobs[JobActive]++
				}
			}
		}
		names := make([]string, 0, len(read.Queues))
		for q := range read.Queues {
			names = append(names, q)
		}
		sort.Strings(names)
		for _, q := range names {
			fr.Queues = append(fr.Queues, *read.Queues[q])
		}
		fr.Extra = read.Procs
		r.Extra = fr
	}
	return nil
}
