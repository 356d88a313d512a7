// Package ownerlock is the cookbook's owner lock kept in Redis: a lease
// that only its holder can extend or release, and that frees itself when its
// holder dies.
//
// # Protocol
//
// One string key per lock; its value is the holder's token, a random value
// no other holder can guess.
//
//   - Acquire: SET key token NX PX ttl. NX: only if nobody holds it. PX: the
//     lease; if the holder dies (SIGKILL, a lost socket, a machine gone) the
//     lock frees itself after ttl.
//   - Extend, while the work lasts longer than the lease, well before the
//     lease runs out (every ttl/3 is usual): one Lua script,
//     if GET key == token then PEXPIRE key ttl. A holder whose Extend
//     returns false has lost the lock and must stop working under it.
//   - Release: one Lua script, if GET key == token then DEL key. Without the
//     token check, a holder that overran its lease (a GC pause, a stalled
//     disk) would delete the lock someone else acquired after the lease ran
//     out, and two holders would then run at once.
//
// # How the recipe fails when it is done otherwise
//
//   - SET NX without PX: the lock has no lease. A holder that crashes never
//     releases it, and everyone is locked out forever.
//   - A lease renewed forever by a holder that is stuck (its work hung, its
//     extend loop did not): the lock is never free, yet its holder does
//     nothing. The lease cannot save you from this one; a maximum hold time
//     watched from outside can.
//   - PX in the wrong unit (a ttl in seconds given to PX, or in milliseconds
//     given to EX): a lease 1000 times too long, so a crashed holder locks
//     everyone out for hours. Options takes a time.Duration, so the unit is
//     never implicit.
//   - Holders whose lease runs out under them: their work outlasts the lease
//     and they did not extend (or could not reach Redis to). Someone else
//     may then hold the lock while they still work; the token check keeps
//     them from releasing the new holder's lock, and a failed Extend tells
//     them to stop.
//
// slot_exporter's `lock` kind reads GET and PTTL of such keys: locks without
// a TTL, tokens held longer than max_hold (zombie), leases far longer than
// the ttl (future), and holds that ended by release or by their lease
// running out.
//
// In Redis Cluster each lock is one key, so each command and script touches
// one slot.
package ownerlock

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/recipe/internal/token"
)

var (
	//go:embed release.lua
	releaseLua string
	//go:embed extend.lua
	extendLua string

	releaseScript = redis.NewScript(releaseLua)
	extendScript  = redis.NewScript(extendLua)
)

// Client is what a Locker needs of a Redis client; *redis.Client,
// *redis.ClusterClient and *redis.Ring have it.
type Client interface {
	redis.Scripter
	SetArgs(ctx context.Context, key string, value any, a redis.SetArgs) *redis.StatusCmd
}

// Options configures a Locker.
type Options struct {
	// TTL is the lease: how long the lock stays held after an acquire or an
	// extend if its holder does nothing more. At least one millisecond; it
	// is sent to Redis in whole milliseconds.
	TTL time.Duration
}

// Locker acquires, extends and releases owner locks. It is safe for
// concurrent use.
type Locker struct {
	c   Client
	ttl time.Duration
}

// New returns a Locker using c. It refuses a lease shorter than a
// millisecond.
func New(c Client, o Options) (*Locker, error) {
	if c == nil {
		return nil, errors.New("ownerlock: nil client")
	}
	if o.TTL < time.Millisecond {
		return nil, fmt.Errorf("ownerlock: ttl %v must be at least 1ms", o.TTL)
	}
	return &Locker{c: c, ttl: o.TTL.Truncate(time.Millisecond)}, nil
}

// TTL returns the lease, in the whole milliseconds sent to Redis.
func (l *Locker) TTL() time.Duration { return l.ttl }

// NewToken returns a random token (128 bits, hex): unique per hold, so that
// a holder can only ever release or extend its own hold.
func NewToken() (string, error) {
	t, err := token.New()
	if err != nil {
		return "", fmt.Errorf("ownerlock: token: %w", err)
	}
	return t, nil
}

// Acquire takes the lock key with a fresh token if nobody holds it. ok is
// false when it is held; token is then empty.
func (l *Locker) Acquire(ctx context.Context, key string) (token string, ok bool, err error) {
	token, err = NewToken()
	if err != nil {
		return "", false, err
	}
	ok, err = l.AcquireToken(ctx, key, token)
	if !ok {
		token = ""
	}
	return token, ok, err
}

// AcquireToken is Acquire with a token the caller chose. The token must be
// unique to this hold: two holds sharing a token can release each other.
func (l *Locker) AcquireToken(ctx context.Context, key, token string) (bool, error) {
	if err := check(key, token); err != nil {
		return false, err
	}
	err := l.c.SetArgs(ctx, key, token, redis.SetArgs{Mode: "NX", TTL: l.ttl}).Err()
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, redis.Nil):
		return false, nil
	default:
		return false, fmt.Errorf("ownerlock: acquire %s: %w", key, err)
	}
}

// Extend renews the lease of key to TTL from now if token still holds it.
// false means the lock is lost: the lease ran out (and the lock may now be
// someone else's); the caller must stop the work it guards.
func (l *Locker) Extend(ctx context.Context, key, token string) (bool, error) {
	if err := check(key, token); err != nil {
		return false, err
	}
	n, err := extendScript.Run(ctx, l.c, []string{key}, token, l.ttl.Milliseconds()).Int64()
	if err != nil {
		return false, fmt.Errorf("ownerlock: extend %s: %w", key, err)
	}
	return n == 1, nil
}

// Release deletes key if token still holds it. false means it was not held
// with that token any more (its lease had run out): nothing was deleted,
// and a lock someone else acquired since is left alone.
func (l *Locker) Release(ctx context.Context, key, token string) (bool, error) {
	if err := check(key, token); err != nil {
		return false, err
	}
	n, err := releaseScript.Run(ctx, l.c, []string{key}, token).Int64()
	if err != nil {
		return false, fmt.Errorf("ownerlock: release %s: %w", key, err)
	}
	return n == 1, nil
}

func check(key, token string) error {
	if key == "" {
		return errors.New("ownerlock: empty key")
	}
	if token == "" {
		return errors.New("ownerlock: empty token")
	}
	return nil
}
