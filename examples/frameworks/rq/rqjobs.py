"""The jobs the framework tests run under a real RQ worker.

A gate job says it started and then blocks on its gate, so that a test can
kill its worker mid-job, or open the gate and watch it finish, waiting on
Redis rather than on the clock.
"""
import os

import redis
from rq import get_current_job


def gate(name):
    r = redis.Redis.from_url(os.environ["REDIS_URL"])
    job = get_current_job()
    # The work horse runs in a session of its own (Worker.fork_work_horse
    # calls setsid): a test that kills the worker as a container runtime
    # would, every process at once, needs its pid too.
    r.hset("fwtest:pids", job.id, os.getpid())
    r.rpush("fwtest:started", job.id)
    r.blpop(["fwtest:gate:" + name], 0)
    r.rpush("fwtest:done", job.id)
