#!/usr/bin/env bash
# Installs the real servers the tests start: redis-server (with redis-cli and
# redis-benchmark), redis-sentinel, prometheus (for promtool) and
# alertmanager, and the headless browser of the on-call pages' tests
# (Debian's chromium). Runs apt-get once, as root, only when something is
# missing.
set -euo pipefail

need=()
command -v redis-server    >/dev/null || need+=(redis-server)
command -v redis-cli       >/dev/null || need+=(redis-tools)
command -v redis-sentinel  >/dev/null || need+=(redis-sentinel)
command -v promtool        >/dev/null || need+=(prometheus)
command -v prometheus      >/dev/null || need+=(prometheus)
if ! command -v alertmanager >/dev/null && ! command -v prometheus-alertmanager >/dev/null; then
	need+=(prometheus-alertmanager)
fi
command -v amtool          >/dev/null || need+=(prometheus-alertmanager)
if ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null; then
	need+=(chromium)
fi
# The libraries' tests drive redis-semaphore, redlock and
# rate-limiter-flexible from Node (examples/libraries).
command -v node            >/dev/null || need+=(nodejs)
command -v npm             >/dev/null || need+=(npm)
# The queue-framework tests drive Celery with its Redis transport
# (examples/libraries/celery), with Debian's python3-celery for
# /usr/bin/python3.
/usr/bin/python3 -c 'import celery, redis' >/dev/null 2>&1 || need+=(python3-celery python3-redis)
# A redis-server with a movable clock (internal/redistest.StartFakeClock).
command -v faketime        >/dev/null || need+=(faketime)
compgen -G '/usr/lib/*/libtcmalloc_minimal.so.4' >/dev/null || need+=(libtcmalloc-minimal4)
# The framework tests run real Sidekiq 6.4 (Ruby) and RQ 1.13 (for Debian's
# /usr/bin/python3) workers (examples/frameworks).
command -v sidekiq         >/dev/null || need+=(ruby-sidekiq)
/usr/bin/python3 -c 'import rq' 2>/dev/null || need+=(python3-rq)
# `make bench` (--bench) measures the peer beside the exporter: Debian's
# prometheus-redis-exporter. The tests do not need it.
if [ "${1:-}" = --bench ]; then
	command -v prometheus-redis-exporter >/dev/null || need+=(prometheus-redis-exporter)
fi

if [ ${#need[@]} -eq 0 ]; then
	exit 0
fi
# De-duplicate.
mapfile -t need < <(printf '%s\n' "${need[@]}" | sort -u)
if [ "$(id -u)" != 0 ]; then
	echo "missing: ${need[*]}; install them as root: apt-get install -y ${need[*]}" >&2
	exit 1
fi
echo "installing: ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
# Debian starts services from postinst where it can; the tests start their
# own on free ports, so stop any that came up.
for s in redis-server redis-sentinel prometheus prometheus-alertmanager prometheus-node-exporter prometheus-redis-exporter; do
	service "$s" stop >/dev/null 2>&1 || true
done
