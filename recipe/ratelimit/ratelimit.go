// Package ratelimit is the cookbook's fixed-window rate limit kept in Redis,
// written so that no crash can leave a counter that never restarts.
//
// # Protocol
//
// Each caller (a user, an API key, an IP) has one integer key, its counter
// for the current window. Allow runs one Lua script, atomically:
//
//	count = INCR key
//	if count == 1:            PEXPIRE key window   (the first hit opens the window)
//	else if PTTL key == -1:   PEXPIRE key window   (repair, see below)
//	return {count <= limit, count, PTTL}
//
// The window ends when the key expires; the next hit finds no key, INCR
// returns 1, and a new window starts. Refused hits are counted too, so a
// caller at the limit stays refused until its window ends, however hard it
// retries. Nothing is ever released or decremented: there is no finally to
// miss.
//
// # How the recipe fails when it is done otherwise
//
//   - INCR and EXPIRE as two commands. A process that dies between them (a
//     SIGKILL, a lost socket) leaves a counter without a TTL. It never
//     restarts: once it reaches the limit, the caller is refused forever.
//     The script runs both in one step, so that window cannot open; and a
//     counter some other writer left without a TTL gets one on its next hit
//     through this package.
//   - PEXPIRE on every hit. Each hit pushes the end of the window back, so a
//     caller that calls more often than once per window never sees its
//     counter restart: refused forever while it keeps calling.
//   - A window in the wrong unit: seconds passed where milliseconds are meant
//     (a window 1000 times too short: the limit barely limits) or the
//     reverse (1000 times too long: a caller at the limit is locked out for
//     hours). Options takes a time.Duration, so the unit is never implicit.
//
// slot_exporter's `ratelimit` kind reads GET and PTTL of such keys and
// reports counters without a TTL, TTLs longer than the window, and callers
// at the limit whose counter will not restart by itself.
//
// In Redis Cluster each key is its own slot: the script touches one key.
package ratelimit

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

//go:embed allow.lua
var allowLua string

var allowScript = redis.NewScript(allowLua)

// Options configures a Limiter. Both fields are required.
type Options struct {
	// Limit is the number of hits allowed per window (at least 1).
	Limit int64
	// Window is the length of a window, at least one millisecond; it is
	// sent to Redis in whole milliseconds.
	Window time.Duration
}

// Result is the outcome of one hit.
type Result struct {
	// Allowed reports whether the hit is within the limit.
	Allowed bool
	// Count is the number of hits in the current window, this one and
	// refused ones included.
	Count int64
	// TTL is what is left of the current window (the counter's PTTL): a
	// refused caller may retry after it.
	TTL time.Duration
}

// Limiter counts hits against fixed windows. It is safe for concurrent use.
type Limiter struct {
	c        redis.Scripter
	limit    int64
	windowMs int64
}

// New returns a Limiter using c (a client, cluster client or ring). It
// refuses a limit below 1 or a window shorter than a millisecond.
func New(c redis.Scripter, o Options) (*Limiter, error) {
	if c == nil {
		return nil, errors.New("ratelimit: nil client")
	}
	if o.Limit < 1 {
		return nil, fmt.Errorf("ratelimit: limit %d must be at least 1", o.Limit)
	}
	if o.Window < time.Millisecond {
		return nil, fmt.Errorf("ratelimit: window %v must be at least 1ms", o.Window)
	}
	return &Limiter{c: c, limit: o.Limit, windowMs: o.Window.Milliseconds()}, nil
}

// Limit returns the hits allowed per window.
func (l *Limiter) Limit() int64 { return l.limit }

// Window returns the window length, in the whole milliseconds sent to Redis.
func (l *Limiter) Window() time.Duration { return time.Duration(l.windowMs) * time.Millisecond }

// Allow counts one hit on key and reports whether it is within the limit.
// A key holding something other than an integer counter is an error, as is
// an empty key name.
func (l *Limiter) Allow(ctx context.Context, key string) (Result, error) {
	if key == "" {
		return Result{}, errors.New("ratelimit: empty key")
	}
	res, err := allowScript.Run(ctx, l.c, []string{key}, l.windowMs, l.limit).Int64Slice()
	if err != nil {
		return Result{}, fmt.Errorf("ratelimit: allow %s: %w", key, err)
	}
	if len(res) != 3 {
		return Result{}, fmt.Errorf("ratelimit: allow %s: unexpected reply %v", key, res)
	}
	return Result{
		Allowed: res[0] == 1,
		Count:   res[1],
		TTL:     time.Duration(max(res[2], 0)) * time.Millisecond,
	}, nil
}
