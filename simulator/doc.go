// Package simulator drives Redis with the workloads slot_exporter watches,
// healthy and broken, and keeps the ground truth of what it did, so that
// tests can compare what the exporter reports with what actually happened.
//
// The slot-set workload (on unless Options.NoSlotStreams): streams that hold
// crash-safe slots (package limiter) and, optionally, legacy INCR/DECR
// counters, with the faults the exporter exists to see: holders that die
// mid-stream (SIGKILL), heartbeat loops that outlive their stream (zombies),
// unit-bug scores far in the future, heartbeats that never refresh the key's
// expiry, and counters that are INCRed but never DECRed. Its truth is Truth's
// top-level fields, and Slots.
//
// The other recipes, each off unless Options asks for some of its actors,
// each actor owning one user's key:
//
//   - RateLimits: fixed-window counters (package recipe/ratelimit), and
//     callers that never set a TTL, refresh it on every hit, or get its
//     unit wrong either way.
//   - Locks: owner locks (package recipe/ownerlock), and holders that set no
//     lease, renew it for ever, get its unit wrong, or are killed mid-lease.
//   - ListQueues: reliable queues (package recipe/listqueue), a queue nobody
//     consumes, and a worker killed holding a job.
//   - StreamQueues: streams with a consumer group (package
//     recipe/streamqueue), a consumer killed with pending work, a poison
//     entry redelivered for ever, and a group falling behind.
//
// Their truths are Truth.RateLimits, Truth.Locks, Truth.ListQueues and
// Truth.StreamQueues; each documents what its fields count. The simulator
// owns those keys: each actor deletes its key when it starts. Pause freezes
// every writer, so that a Truth taken while paused is exact.
//
// Goroutines are bounded: for slot sets, one arrival goroutine, a fixed pool
// of acquire workers, and one scheduler that, every tick, heartbeats all due
// holders and ends all due streams in pipelines; for the other recipes, one
// goroutine per actor (a caller, a holder, a producer, a worker, a
// consumer). Redis errors never stop the simulator: they are counted in
// Truth.Errors and it keeps going, so Redis may be restarted under it; the
// truth is exact only absent errors and data loss.
package simulator
