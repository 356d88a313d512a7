#!/usr/bin/env node
// Drives the real BullMQ and Bull against a real Redis and prints the ground
// truth as one JSON object per line on stdout, for slot_exporter's
// queue-framework tests.
//
//   node queues.js add    --lib bullmq|bull --redis HOST:PORT --queue Q --jobs N [--name NAME]
//   node queues.js work   --lib bullmq|bull --redis HOST:PORT --queue Q --concurrency N
//                         --job-ms MS [--lock-ms MS] [--stalled-ms MS]
//   node queues.js counts --lib bullmq|bull --redis HOST:PORT --queue Q
//
// add adds N jobs and prints {"event":"added","ids":[...]}. counts prints the
// library's own getJobCounts() as {"event":"counts",...}. work starts a worker
// with the library's own lock (lockDuration --lock-ms) and stalled check
// (every --stalled-ms), prints {"event":"acquired"} once it is ready, then
// {"event":"started","id":...} when a job starts and {"event":"completed",
// "id":...} when one ends; each job takes --job-ms (a very large value: a job
// that never ends). Killing the process with SIGKILL is a worker that dies
// mid-job, as after a deploy's docker stop.
'use strict';

function parseArgs(argv) {
  const [command, ...rest] = argv;
  const opts = {};
  for (let i = 0; i < rest.length; i += 2) {
    if (!rest[i].startsWith('--') || rest[i + 1] === undefined) fail(`bad argument ${JSON.stringify(rest[i])}`);
    opts[rest[i].slice(2)] = rest[i + 1];
  }
  return { command, opts };
}

function fail(msg) {
  process.stderr.write(`queues.js: ${msg}\n`);
  process.exit(2);
}

function need(opts, name) {
  if (opts[name] === undefined) fail(`--${name} is required`);
  return opts[name];
}

function out(ev) {
  process.stdout.write(JSON.stringify(ev) + '\n');
}

function redisOpts(opts) {
  const [host, port] = need(opts, 'redis').split(':');
  return { host, port: Number(port), maxRetriesPerRequest: null };
}

// A queue of either library behind one interface.
function open(opts) {
  const lib = need(opts, 'lib');
  const name = need(opts, 'queue');
  const redis = redisOpts(opts);
  const lockMs = Number(opts['lock-ms'] || 30000);
  const stalledMs = Number(opts['stalled-ms'] || 30000);
  if (lib === 'bullmq') {
    const { Queue, Worker } = require('bullmq');
    const queue = new Queue(name, { connection: redis });
    let worker;
    return {
      lib: 'bullmq ' + require('bullmq/package.json').version,
      add: async (jobName) => (await queue.add(jobName, { at: Date.now() })).id,
      counts: () => queue.getJobCounts(),
      work: async (concurrency, processor, onCompleted) => {
        const w = new Worker(name, async (job) => processor(job.id), {
          connection: redis, concurrency, lockDuration: lockMs, stalledInterval: stalledMs,
        });
        w.on('completed', (job) => onCompleted(job.id));
        w.on('error', (err) => process.stderr.write(`worker error: ${err}\n`));
        await w.waitUntilReady();
        worker = w;
      },
      close: () => queue.close(),
      closeWorker: async () => { await worker.close(true); await queue.close(); },
    };
  }
  if (lib === 'bull') {
    const Bull = require('bull');
    const queue = new Bull(name, {
      redis: { host: redis.host, port: redis.port },
      settings: { lockDuration: lockMs, stalledInterval: stalledMs },
    });
    return {
      lib: 'bull ' + require('bull/package.json').version,
      add: async (jobName) => (await queue.add(jobName, { at: Date.now() })).id,
      counts: () => queue.getJobCounts(),
      work: async (concurrency, processor, onCompleted) => {
        queue.on('completed', (job) => onCompleted(job.id));
        queue.on('error', (err) => process.stderr.write(`queue error: ${err}\n`));
        // process() resolves only when the queue closes: not awaited.
        queue.process('*', concurrency, async (job) => processor(job.id)).catch((err) => fail(String(err)));
        await queue.isReady();
      },
      close: () => queue.close(),
      closeWorker: () => queue.close(true),
    };
  }
  fail(`unknown --lib ${lib}`);
}

async function main() {
  const { command, opts } = parseArgs(process.argv.slice(2));
  const q = open(opts);
  switch (command) {
    case 'add': {
      const ids = [];
      for (let i = 0; i < Number(need(opts, 'jobs')); i++) ids.push(String(await q.add(opts.name || 'job')));
      out({ event: 'added', library: q.lib, ids });
      await q.close();
      process.exit(0);
      break;
    }
    case 'counts': {
      out({ event: 'counts', library: q.lib, ...(await q.counts()) });
      await q.close();
      process.exit(0);
      break;
    }
    case 'work': {
      const jobMs = Number(need(opts, 'job-ms'));
      await q.work(Number(need(opts, 'concurrency')), async (id) => {
        out({ event: 'started', id: String(id) });
        await new Promise((resolve) => setTimeout(resolve, Math.min(jobMs, 2 ** 31 - 1)));
      }, (id) => out({ event: 'completed', id: String(id) }));
      out({ event: 'acquired', library: q.lib, key: need(opts, 'queue'), role: 'worker', holders: [] });
      // A line "release" on stdin (or stdin closing) closes the worker
      // through the library, as a graceful shutdown does.
      const rl = require('node:readline').createInterface({ input: process.stdin });
      let closing = false;
      const stop = async () => {
        if (closing) return;
        closing = true;
        await q.closeWorker();
        out({ event: 'released' });
        process.exit(0);
      };
      rl.on('line', (line) => { if (line.trim() === 'release') stop(); });
      rl.on('close', stop);
      break;
    }
    default:
      fail(`unknown command ${JSON.stringify(command)}`);
  }
}

main().catch((err) => fail(err && err.stack ? err.stack : String(err)));
