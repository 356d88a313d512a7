"""Drives the real Celery (with kombu's Redis transport) against a real Redis
and prints the ground truth as one JSON object per line on stdout, for
slot_exporter's queue-framework tests. Run with the Python that has Celery
(Debian's python3-celery: /usr/bin/python3).

    drive.py add    --redis HOST:PORT --queue Q --jobs N --job-ms MS
    drive.py work   --redis HOST:PORT --queue Q --visibility-s S
    drive.py counts --redis HOST:PORT --queue Q

add sends N tasks that each sleep MS and prints {"event":"added","ids":[...]}.
work runs one worker (solo pool, acks_late, prefetch 1: the running task
stays unacked until it ends), prints {"event":"acquired"} when it is ready,
{"event":"started","id":...} and {"event":"completed","id":...} per task.
SIGKILL is a worker that dies mid-task. counts prints what kombu itself says
the queue holds (queue_declare passive: message_count).
"""
import json
import sys
import time

import celery
from celery import Celery, signals


def out(ev):
    # The worker redirects sys.stdout to its logger: write to the real one.
    sys.__stdout__.write(json.dumps(ev) + "\n")
    sys.__stdout__.flush()


def parse(argv):
    command, rest = argv[0], argv[1:]
    opts = {}
    for i in range(0, len(rest), 2):
        if not rest[i].startswith("--") or i + 1 >= len(rest):
            sys.exit("drive.py: bad argument %r" % rest[i])
        opts[rest[i][2:]] = rest[i + 1]
    return command, opts


def make_app(opts):
    app = Celery("slotdrive", broker="redis://%s/0" % opts["redis"])
    app.conf.update(
        task_acks_late=True,
        worker_prefetch_multiplier=1,
        task_default_queue=opts["queue"],
        broker_transport_options={"visibility_timeout": int(opts.get("visibility-s", "3600"))},
        worker_hijack_root_logger=False,
        worker_redirect_stdouts=False,
    )

    @app.task(name="sleep")
    def sleep(ms):
        time.sleep(ms / 1000.0)

    return app, sleep


def main():
    command, opts = parse(sys.argv[1:])
    app, sleep = make_app(opts)
    lib = "celery " + celery.__version__
    if command == "add":
        ids = [sleep.apply_async(args=[int(opts["job-ms"])]).id for _ in range(int(opts["jobs"]))]
        out({"event": "added", "library": lib, "ids": ids})
    elif command == "counts":
        with app.connection_for_write() as conn:
            ok = conn.default_channel.queue_declare(opts["queue"], passive=True)
            out({"event": "counts", "library": lib, "waiting": ok.message_count})
    elif command == "work":
        @signals.worker_ready.connect
        def ready(**_):
            out({"event": "acquired", "library": lib, "key": opts["queue"], "role": "worker", "holders": []})

        @signals.task_prerun.connect
        def started(task_id=None, **_):
            out({"event": "started", "id": task_id})

        @signals.task_postrun.connect
        def completed(task_id=None, **_):
            out({"event": "completed", "id": task_id})

        app.Worker(pool="solo", concurrency=1, loglevel="WARNING", queues=[opts["queue"]],
                   without_heartbeat=True, without_mingle=True, without_gossip=True,
                   quiet=True).start()
    else:
        sys.exit("drive.py: unknown command %r" % command)


if __name__ == "__main__":
    main()
