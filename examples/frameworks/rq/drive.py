"""Both sides of the RQ tests, through RQ's own API. One command per run;
the client commands print their result as one JSON line:

  worker NAME QUEUE[,QUEUE] [--burst] [--scheduler] [--monitoring S]
                               an rq Worker; it forks a work horse per job
  enqueue QUEUE GATE N         N gate jobs; prints their ids
  schedule QUEUE GATE AT N     N gate jobs in the ScheduledJobRegistry due at
                               AT (epoch s, past allowed)
  stats QUEUE[,QUEUE]          what RQ's API reports, without cleaning up
  cleanup QUEUE[,QUEUE]        what a worker's maintenance does: each queue's
                               registry cleanup (started entries past their
                               expiry go to failed) and Worker.all's pruning
                               of workers whose key is gone

REDIS_URL names the server. Run it with the python3 that has rq installed.
"""
import argparse
import json
import os
import sys
from datetime import datetime, timezone

import redis
from rq import Queue, Worker
from rq.registry import FailedJobRegistry, ScheduledJobRegistry, StartedJobRegistry

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# A gate blocks for as long as the test wants: longer than RQ's default
# job timeout (180 s), after which the horse would be killed.
JOB_TIMEOUT = 3600


def conn():
    return redis.Redis.from_url(os.environ["REDIS_URL"])


def queues(arg, c):
    return [Queue(q, connection=c) for q in arg.split(",")]


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("worker")
    w.add_argument("name")
    w.add_argument("queues")
    w.add_argument("--burst", action="store_true")
    w.add_argument("--scheduler", action="store_true")
    w.add_argument("--monitoring", type=int, default=30)
    e = sub.add_parser("enqueue")
    e.add_argument("queue")
    e.add_argument("gate")
    e.add_argument("n", type=int)
    s = sub.add_parser("schedule")
    s.add_argument("queue")
    s.add_argument("gate")
    s.add_argument("at", type=float)
    s.add_argument("n", type=int)
    st = sub.add_parser("stats")
    st.add_argument("queues")
    cl = sub.add_parser("cleanup")
    cl.add_argument("queues")
    a = p.parse_args()
    c = conn()

    if a.cmd == "worker":
        worker = Worker(queues(a.queues, c), connection=c, name=a.name, job_monitoring_interval=a.monitoring)
        worker.work(burst=a.burst, with_scheduler=a.scheduler, logging_level="INFO")
        return
    if a.cmd == "enqueue":
        q = Queue(a.queue, connection=c)
        out = [q.enqueue("rqjobs.gate", a.gate, job_timeout=JOB_TIMEOUT).id for _ in range(a.n)]
    elif a.cmd == "schedule":
        q = Queue(a.queue, connection=c)
        at = datetime.fromtimestamp(a.at, tz=timezone.utc)
        out = [q.enqueue_at(at, "rqjobs.gate", a.gate, job_timeout=JOB_TIMEOUT).id for _ in range(a.n)]
    elif a.cmd == "stats":
        out = {"queues": {}, "worker_keys": sorted(Worker.all_keys(connection=c))}
        for q in queues(a.queues, c):
            started = StartedJobRegistry(queue=q)
            out["queues"][q.name] = {
                "count": q.count,
                # get_job_ids would run the registry's cleanup first.
                "started_expired": sorted(started.get_expired_job_ids()),
                "failed": c.zcard(FailedJobRegistry(queue=q).key),
                "scheduled": c.zcard(ScheduledJobRegistry(queue=q).key),
            }
    else:
        out = {"queues": {}}
        for q in queues(a.queues, c):
            started = StartedJobRegistry(queue=q)
            moved = started.cleanup()
            out["queues"][q.name] = {
                "moved_to_failed": sorted(moved),
                "started": started.get_job_ids(),
                "failed": FailedJobRegistry(queue=q).get_job_ids(),
            }
        out["workers"] = sorted(w.name for w in Worker.all(connection=c))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
