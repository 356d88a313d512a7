#!/usr/bin/env node
// Drives the real npm libraries against a real Redis and prints the ground
// truth as one JSON object per line on stdout, so a test can compare what
// slot_exporter reports with what the library was made to do.
//
//   node drive.js semaphore --redis HOST:PORT --key NAME --limit N [--holders N]
//                           --ttl MS [--refresh MS] [--work-ms MS] [--skew-ms MS] [--role R]
//   node drive.js mutex     --redis HOST:PORT --key NAME --ttl MS [--refresh MS] [--work-ms MS] [--role R]
//   node drive.js redlock   --redis HOST:PORT[,HOST:PORT...] --key NAME --ttl MS
//                           [--extend-ms MS] [--work-ms MS] [--role R]
//   node drive.js ratelimit --redis HOST:PORT --key NAME --points N --duration S
//                           [--key-prefix P] [--block-duration S] [--consume N] [--reward N]
//
// The holding commands (semaphore, mutex, redlock) acquire, print
// {"event":"acquired",...}, and keep the library's own refresh running.
// A line "release" on stdin (or stdin closing) releases through the library,
// prints {"event":"released"} and exits 0. Killing the process with SIGKILL
// is a holder that dies without releasing. With --work-ms the "work" ends
// after that long ({"event":"work_done"}) but the refresh goes on and nothing
// is released: a refresh loop that outlived its work (a zombie). Each
// refresh prints {"event":"refresh"}.
//
// --skew-ms shifts this process's clock (Date.now), as a client host whose
// clock is off would: redis-semaphore writes the client's time as the score.
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const readline = require('node:readline');

function parseArgs(argv) {
  const [command, ...rest] = argv;
  const opts = {};
  for (let i = 0; i < rest.length; i++) {
    const a = rest[i];
    if (!a.startsWith('--')) {
      fail(`unexpected argument ${JSON.stringify(a)}`);
    }
    const name = a.slice(2);
    const value = rest[i + 1];
    if (value === undefined || value.startsWith('--')) {
      fail(`--${name} needs a value`);
    }
    opts[name] = value;
    i++;
  }
  return { command, opts };
}

function fail(msg) {
  process.stderr.write(`drive.js: ${msg}\n`);
  process.exit(2);
}

function need(opts, name) {
  if (opts[name] === undefined) fail(`--${name} is required`);
  return opts[name];
}

function int(opts, name, dflt) {
  const raw = opts[name];
  if (raw === undefined) {
    if (dflt === undefined) fail(`--${name} is required`);
    return dflt;
  }
  if (!/^-?[0-9]+$/.test(raw)) fail(`--${name}: want an integer, got ${JSON.stringify(raw)}`);
  return Number(raw);
}

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

// The versions reported are those installed, read from each package.json,
// so the truth names exactly what ran.
function versionOf(pkg) {
  const file = path.join(__dirname, 'node_modules', pkg, 'package.json');
  return JSON.parse(fs.readFileSync(file, 'utf8')).version;
}

const { command, opts } = parseArgs(process.argv.slice(2));

// Shift the clock before any library is loaded: redis-semaphore reads
// Date.now() at every acquire and refresh.
const skewMs = int(opts, 'skew-ms', 0);
if (skewMs !== 0) {
  const realNow = Date.now;
  Date.now = () => realNow() + skewMs;
}

const Redis = require('ioredis');

function client(addr) {
  const i = addr.lastIndexOf(':');
  if (i < 0) fail(`--redis: want HOST:PORT, got ${JSON.stringify(addr)}`);
  return new Redis({
    host: addr.slice(0, i),
    port: Number(addr.slice(i + 1)),
    // A test's Redis is local; fail fast instead of queueing forever.
    maxRetriesPerRequest: 2,
    enableOfflineQueue: true,
    lazyConnect: false,
  });
}

// waitForRelease resolves when stdin says "release" or closes. Reading
// stdin also keeps the process alive: the libraries' refresh timers are
// unref'd and would not.
function waitForRelease() {
  return new Promise((resolve) => {
    const rl = readline.createInterface({ input: process.stdin });
    let done = false;
    const finish = (why) => {
      if (done) return;
      done = true;
      rl.close();
      resolve(why);
    };
    rl.on('line', (line) => {
      if (line.trim() === 'release') finish('release');
    });
    rl.on('close', () => finish('stdin closed'));
  });
}

function startWork(workMs) {
  if (workMs > 0) {
    setTimeout(() => emit({ event: 'work_done', after_ms: workMs }), workMs);
  }
}

function onLost(err) {
  emit({ event: 'lost', error: String(err && err.message ? err.message : err) });
}

// countRefreshes reports each refresh the library's own timer makes, so
// the truth has the exact number of heartbeats written. It wraps the
// instance's _refresh (the method Lock's timer calls) and changes nothing
// of what it does.
function countRefreshes(lock) {
  const refresh = lock._refresh.bind(lock);
  lock._refresh = async () => {
    const ok = await refresh();
    emit({ event: 'refresh', holder: lock.identifier, ok });
    return ok;
  };
}

async function holdSemaphore(kind) {
  const { Semaphore, Mutex } = require('redis-semaphore');
  const redis = client(need(opts, 'redis'));
  const key = need(opts, 'key');
  const ttl = int(opts, 'ttl');
  const holders = int(opts, 'holders', 1);
  const limit = kind === 'semaphore' ? int(opts, 'limit') : 1;
  // The library's own default is round(0.8 x lockTimeout).
  const refresh = int(opts, 'refresh', Math.round(0.8 * ttl));
  const locks = [];
  for (let i = 0; i < holders; i++) {
    const options = {
      lockTimeout: ttl,
      refreshInterval: refresh,
      acquireTimeout: 2000,
      retryInterval: 20,
      onLockLost: onLost,
    };
    const lock = kind === 'semaphore'
      ? new Semaphore(redis, key, limit, options)
      : new Mutex(redis, key, options);
    if (!(await lock.tryAcquire())) {
      fail(`${kind} ${key}: not acquired (holder ${i + 1} of ${holders})`);
    }
    countRefreshes(lock);
    locks.push(lock);
  }
  emit({
    event: 'acquired',
    library: 'redis-semaphore',
    version: versionOf('redis-semaphore'),
    kind,
    key: `${kind}:${key}`,
    user: key,
    holders: locks.map((l) => l.identifier),
    ttl_ms: ttl,
    refresh_ms: refresh,
    skew_ms: skewMs,
    role: opts.role || 'healthy',
    pid: process.pid,
  });
  startWork(int(opts, 'work-ms', 0));
  const why = await waitForRelease();
  for (const lock of locks) await lock.release();
  emit({ event: 'released', why, holders: locks.map((l) => l.identifier) });
  await redis.quit();
}

async function holdRedlock() {
  const Redlock = require('redlock');
  const addrs = need(opts, 'redis').split(',');
  const clients = addrs.map(client);
  const key = need(opts, 'key');
  const ttl = int(opts, 'ttl');
  const extendMs = int(opts, 'extend-ms', Math.round(ttl / 2));
  const redlock = new Redlock(clients, { retryCount: 10, retryDelay: 50, retryJitter: 20 });
  redlock.on('clientError', (err) => process.stderr.write(`redlock client error: ${err}\n`));
  const lock = await redlock.lock(key, ttl);
  // Redlock 4 has no refresh of its own: the caller extends before the
  // lease runs out, as its README shows.
  const timer = setInterval(() => {
    lock.extend(ttl).then(
      () => emit({ event: 'refresh', holder: lock.value, ok: true }),
      onLost,
    );
  }, extendMs);
  emit({
    event: 'acquired',
    library: 'redlock',
    version: versionOf('redlock'),
    kind: 'lock',
    key,
    user: key,
    servers: addrs.length,
    holders: [lock.value],
    ttl_ms: ttl,
    refresh_ms: extendMs,
    role: opts.role || 'healthy',
    pid: process.pid,
  });
  startWork(int(opts, 'work-ms', 0));
  const why = await waitForRelease();
  clearInterval(timer);
  await lock.unlock();
  emit({ event: 'released', why, holders: [lock.value] });
  await Promise.all(clients.map((c) => c.quit()));
}

async function rateLimit() {
  const { RateLimiterRedis } = require('rate-limiter-flexible');
  const redis = client(need(opts, 'redis'));
  const key = need(opts, 'key');
  const limiter = new RateLimiterRedis({
    storeClient: redis,
    points: int(opts, 'points'),
    duration: int(opts, 'duration'),
    blockDuration: int(opts, 'block-duration', 0),
    // undefined keeps the library's default prefix, "rlflx".
    keyPrefix: opts['key-prefix'],
  });
  let allowed = 0;
  let refused = 0;
  const consume = int(opts, 'consume', 0);
  for (let i = 0; i < consume; i++) {
    try {
      await limiter.consume(key);
      allowed++;
    } catch (res) {
      // A RateLimiterRes is a refusal; anything else is a real error.
      if (res instanceof Error) throw res;
      refused++;
    }
  }
  const reward = int(opts, 'reward', 0);
  if (reward > 0) await limiter.reward(key, reward);
  const rlKey = limiter.getKey(key);
  const [value, pttl] = await Promise.all([redis.get(rlKey), redis.pttl(rlKey)]);
  emit({
    event: 'consumed',
    library: 'rate-limiter-flexible',
    version: versionOf('rate-limiter-flexible'),
    kind: 'ratelimit',
    key: rlKey,
    user: key,
    allowed,
    refused,
    rewarded: reward,
    value: value === null ? null : Number(value),
    pttl_ms: pttl,
  });
  await redis.quit();
}

const commands = {
  semaphore: () => holdSemaphore('semaphore'),
  mutex: () => holdSemaphore('mutex'),
  redlock: holdRedlock,
  ratelimit: rateLimit,
};

if (!commands[command]) {
  fail(`unknown command ${JSON.stringify(command)}; want one of ${Object.keys(commands).join(', ')}`);
}
commands[command]().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`drive.js ${command}: ${err && err.stack ? err.stack : err}\n`);
    process.exit(1);
  },
);
