// Package limiter is a crash-safe per-user concurrency cap kept in Redis.
//
// Each user has one sorted set (a "slot set"): member = holder id, score =
// the moment that slot stops being believable, i.e. its expiry (now + ttl,
// in milliseconds by default, or seconds with ScoreUnit "s").
//
//   - Acquire runs one Lua script, atomically: ZREMRANGEBYSCORE key -inf now,
//     ZCARD key, and if below the limit ZADD key now+ttl id and
//     PEXPIRE key 2*ttl. A holder that already owns a slot is granted again
//     (idempotent re-acquire) and its expiry refreshed.
//   - Heartbeat, every heartbeat interval while the holder lives:
//     ZADD key XX GT CH now+ttl id and PEXPIRE key 2*ttl GT in one round trip.
//     XX never resurrects a released slot; GT never moves an expiry back (a
//     late heartbeat or a clock running behind is harmless). Refreshing the
//     key's own expiry avoids the trap where only Acquire sets it and Redis
//     deletes the set under a long-running stream.
//   - Release is ZREM. If it never happens (SIGKILL, lost socket), the slot
//     expires after ttl and the next Acquire for that user prunes it.
//
// Redis outages: by default (DefaultOptions) the limiter fails OPEN. When
// Redis cannot be reached, Acquire grants the slot anyway and returns a
// non-nil error wrapping ErrUnavailable, so that an outage of the cap does
// not become an outage of the product; the caller should log and count it.
// Set Options.FailOpen to false to refuse instead. Note that Go cannot give a
// bool field a default of true: a zero Options literal fails CLOSED; start
// from DefaultOptions() to get the default behaviour.
package limiter

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

//go:embed acquire.lua
var acquireLua string

var acquireScript = redis.NewScript(acquireLua)

// ErrUnavailable is wrapped by the errors the limiter returns when Redis
// could not be reached or could not serve the request (network errors,
// timeouts, a server that is loading, read-only, out of memory, ...).
var ErrUnavailable = errors.New("limiter: redis unavailable")

// Defaults.
const (
	DefaultTTL               = 120 * time.Second
	DefaultHeartbeatInterval = 20 * time.Second
)

// Score units.
const (
	ScoreUnitMillis  = "ms"
	ScoreUnitSeconds = "s"
)

// Options configures a Limiter. Zero durations and an empty ScoreUnit take
// their defaults; see FailOpen for the one field whose zero value is not the
// default.
type Options struct {
	// TTL is how long a slot stays believable after its last acquire or
	// heartbeat (default 120s). The key itself is given 2 x TTL.
	TTL time.Duration
	// HeartbeatInterval is how often holders are expected to call Heartbeat
	// (default 20s). The limiter does not schedule anything itself; the field
	// documents the contract and is there for callers and tools. It must be
	// well below TTL.
	HeartbeatInterval time.Duration
	// Now is the clock scores are computed from (default time.Now). A skewed
	// clock produces skewed scores, which is what the simulator uses it for.
	// Every client of one slot set must share a clock to within well under
	// TTL: acquire prunes the slots whose score is at or below its own now,
	// so a client whose clock runs ahead by more than what is left of
	// another holder's TTL removes that live slot and can be granted past
	// the limit (with TTL 120s, about 100 s ahead). The exporter shows such
	// a client's slots as future.
	Now func() time.Time
	// ScoreUnit is the unit of scores: "ms" (default) or "s".
	ScoreUnit string
	// FailOpen says what Acquire does when Redis is unreachable. With
	// FailOpen true, Acquire returns granted=true together with a non-nil
	// error wrapping ErrUnavailable: the cap fails open, streams are not
	// blocked by a Redis outage, and the caller should log/count the error.
	// With FailOpen false, Acquire returns granted=false with that error.
	// Heartbeat and HeartbeatMany likewise report alive=FailOpen for holders
	// they could not reach Redis for. The default is true (DefaultOptions);
	// a zero Options literal has it false.
	FailOpen bool
}

// DefaultOptions returns the defaults: TTL 120s, heartbeat interval 20s,
// time.Now, scores in milliseconds, and FailOpen true.
func DefaultOptions() Options {
	return Options{
		TTL:               DefaultTTL,
		HeartbeatInterval: DefaultHeartbeatInterval,
		Now:               time.Now,
		ScoreUnit:         ScoreUnitMillis,
		FailOpen:          true,
	}
}

// Limiter acquires, heartbeats and releases slots. It is safe for concurrent
// use.
type Limiter struct {
	c    redis.UniversalClient
	opts Options
}

// New returns a Limiter using client. Zero fields of opts take their
// defaults (FailOpen excepted: see Options.FailOpen). An unknown ScoreUnit
// panics, as a programming error.
func New(client redis.UniversalClient, opts Options) *Limiter {
	if opts.TTL <= 0 {
		opts.TTL = DefaultTTL
	}
	if opts.HeartbeatInterval <= 0 {
		opts.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	switch opts.ScoreUnit {
	case "":
		opts.ScoreUnit = ScoreUnitMillis
	case ScoreUnitMillis, ScoreUnitSeconds:
	default:
		panic(fmt.Sprintf("limiter: unknown score unit %q (want ms or s)", opts.ScoreUnit))
	}
	return &Limiter{c: client, opts: opts}
}

// Options returns the options in effect, defaults filled in.
func (l *Limiter) Options() Options { return l.opts }

// Score converts t to a score in the limiter's unit.
func (l *Limiter) Score(t time.Time) float64 {
	ms := t.UnixMilli()
	if l.opts.ScoreUnit == ScoreUnitSeconds {
		return float64(ms) / 1000
	}
	return float64(ms)
}

func (l *Limiter) formatScore(t time.Time) string {
	ms := t.UnixMilli()
	if l.opts.ScoreUnit == ScoreUnitSeconds {
		return strconv.FormatFloat(float64(ms)/1000, 'f', 3, 64)
	}
	return strconv.FormatInt(ms, 10)
}

// keyTTLMillis is the key's own expiry, 2 x TTL.
func (l *Limiter) keyTTLMillis() int64 {
	ms := (2 * l.opts.TTL).Milliseconds()
	if ms < 1 {
		ms = 1
	}
	return ms
}

// Acquire tries to take one of limit slots in the slot set key for holder id.
// It prunes expired slots first, so holders that died without releasing stop
// counting once their ttl has passed. A holder that already owns a slot is
// granted again and its expiry refreshed. used is the number of slots held
// after the call (the new one included when granted).
//
// When Redis is unavailable the error wraps ErrUnavailable and granted is
// Options.FailOpen. Other errors (a key of the wrong type, a cancelled ctx)
// return granted=false.
func (l *Limiter) Acquire(ctx context.Context, key, id string, limit int) (granted bool, used int, err error) {
	now := l.opts.Now()
	res, err := acquireScript.Run(ctx, l.c, []string{key},
		l.formatScore(now),
		l.formatScore(now.Add(l.opts.TTL)),
		l.keyTTLMillis(),
		limit,
		id,
	).Int64Slice()
	if err != nil {
		if l.unavailable(ctx, err) {
			return l.opts.FailOpen, 0, fmt.Errorf("%w: acquire %s: %w", ErrUnavailable, key, err)
		}
		return false, 0, fmt.Errorf("limiter: acquire %s: %w", key, err)
	}
	if len(res) != 2 {
		return false, 0, fmt.Errorf("limiter: acquire %s: unexpected reply %v", key, res)
	}
	return res[0] == 1, int(res[1]), nil
}

// Heartbeat extends holder id's slot to now+ttl and the key's own expiry to
// 2 x ttl, in one round trip (MULTI/EXEC):
//
//	ZADD key XX GT CH now+ttl id
//	PEXPIRE key 2*ttl GT
//	ZSCORE key id
//
// XX: a released or pruned slot is never resurrected. GT: a late heartbeat
// (or a clock running behind) never moves the expiry back. PEXPIRE GT only
// lengthens the key's expiry; on a key without any expiry (someone ran
// PERSIST) it does nothing, which is fine: such a key never vanishes under
// its slots.
//
// alive is false when the member no longer exists: it was released, pruned,
// or the whole key expired or was lost. The holder should then stop (or
// re-acquire). When Redis is unavailable the error wraps ErrUnavailable and
// alive is Options.FailOpen.
func (l *Limiter) Heartbeat(ctx context.Context, key, id string) (alive bool, err error) {
	return l.heartbeatOne(ctx, key, id, true)
}

// HeartbeatNoRefresh is the buggy heartbeat of the design's trap: it only
// runs ZADD key XX GT CH now+ttl id (plus a read-only ZSCORE to report
// alive) and leaves the key's own expiry alone. Only Acquire then sets the
// key's PEXPIRE (2 x ttl), so a stream that outlives 2 x ttl while its user
// acquires nothing else keeps heartbeating into a key Redis deletes under it:
// the slot vanishes and the cap silently stops counting it.
//
// It exists so that the simulator (and tests) can produce such keys on
// purpose, for the exporter's slot_sets_expiring_early to find. Do not use it
// in a real service.
func (l *Limiter) HeartbeatNoRefresh(ctx context.Context, key, id string) (alive bool, err error) {
	return l.heartbeatOne(ctx, key, id, false)
}

func (l *Limiter) heartbeatOne(ctx context.Context, key, id string, refresh bool) (bool, error) {
	pipe := l.c.TxPipeline()
	score := l.queueHeartbeat(ctx, pipe, key, id, refresh)
	_, err := pipe.Exec(ctx)
	if err == nil {
		err = score.Err()
	}
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, redis.Nil):
		return false, nil
	case l.unavailable(ctx, err):
		return l.opts.FailOpen, fmt.Errorf("%w: heartbeat %s: %w", ErrUnavailable, key, err)
	default:
		return false, fmt.Errorf("limiter: heartbeat %s: %w", key, err)
	}
}

// queueHeartbeat queues the heartbeat commands on pipe and returns the
// ZSCORE command, whose redis.Nil error means the member is gone.
func (l *Limiter) queueHeartbeat(ctx context.Context, pipe redis.Pipeliner, key, id string, refresh bool) *redis.FloatCmd {
	score := l.Score(l.opts.Now().Add(l.opts.TTL))
	pipe.ZAddArgs(ctx, key, redis.ZAddArgs{XX: true, GT: true, Ch: true, Members: []redis.Z{{Score: score, Member: id}}})
	if refresh {
		pipe.Do(ctx, "pexpire", key, l.keyTTLMillis(), "gt")
	}
	return pipe.ZScore(ctx, key, id)
}

// Beat is one holder's heartbeat for HeartbeatMany.
type Beat struct {
	Key, ID string
	// NoRefresh sends the buggy heartbeat (see HeartbeatNoRefresh).
	NoRefresh bool
}

// HeartbeatMany heartbeats many holders, possibly in many keys, in one
// pipelined round trip (not a transaction, so keys may live in different
// cluster slots). alive[i] reports beats[i] as Heartbeat would; err is the
// first error met, if any (wrapping ErrUnavailable when Redis could not be
// reached).
func (l *Limiter) HeartbeatMany(ctx context.Context, beats []Beat) (alive []bool, err error) {
	alive = make([]bool, len(beats))
	if len(beats) == 0 {
		return alive, nil
	}
	pipe := l.c.Pipeline()
	scores := make([]*redis.FloatCmd, len(beats))
	for i, b := range beats {
		scores[i] = l.queueHeartbeat(ctx, pipe, b.Key, b.ID, !b.NoRefresh)
	}
	_, _ = pipe.Exec(ctx)
	for i, sc := range scores {
		e := sc.Err()
		switch {
		case e == nil:
			alive[i] = true
		case errors.Is(e, redis.Nil):
		case l.unavailable(ctx, e):
			alive[i] = l.opts.FailOpen
			if err == nil {
				err = fmt.Errorf("%w: heartbeat %s: %w", ErrUnavailable, beats[i].Key, e)
			}
		default:
			if err == nil {
				err = fmt.Errorf("limiter: heartbeat %s: %w", beats[i].Key, e)
			}
		}
	}
	return alive, err
}

// Release gives holder id's slot back (ZREM). Releasing a slot that is gone
// is not an error.
func (l *Limiter) Release(ctx context.Context, key, id string) error {
	if err := l.c.ZRem(ctx, key, id).Err(); err != nil {
		if l.unavailable(ctx, err) {
			return fmt.Errorf("%w: release %s: %w", ErrUnavailable, key, err)
		}
		return fmt.Errorf("limiter: release %s: %w", key, err)
	}
	return nil
}

// unavailableReplies are error replies meaning "Redis is there but cannot
// serve this right now": treated like an unreachable server.
var unavailableReplies = []string{
	"LOADING", "BUSY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "READONLY", "OOM",
	"ERR max number of clients",
}

// unavailable reports whether err means Redis could not be reached or could
// not serve the request. A ctx cancelled by the caller is not an outage; a
// deadline (the caller's budget for Redis running out) is.
func (l *Limiter) unavailable(ctx context.Context, err error) bool {
	if err == nil || errors.Is(err, redis.Nil) {
		return false
	}
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return false
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		msg := rerr.Error()
		for _, p := range unavailableReplies {
			if strings.HasPrefix(msg, p) {
				return true
			}
		}
		return false
	}
	// Network errors, timeouts, EOF, pool exhaustion, a closed client.
	return true
}
