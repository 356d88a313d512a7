package redisread

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/resp"
)

// MaxValueBytes bounds what is read of a value under a string kind
// (counter, ratelimit, lock): a counter is at most 20 characters and a
// lock token is a short random string, but a key under the pattern can
// hold anything, and a 96 MB value read whole every sweep took the
// exporter past its memory limit. A string kind reads GETRANGE 0
// MaxValueBytes, one byte more than it keeps: a reply that long says the
// value is longer than MaxValueBytes (what a STRLEN in the same pipeline
// would say, without the extra command), and the key is skipped as
// value_too_large. Redis sends at most MaxValueBytes+1 bytes per key.
const MaxValueBytes = 512

// MaxTokenBytes is the longest lock token read: MaxValueBytes.
const MaxTokenBytes = MaxValueBytes

// BoundedGet queues the bounded read of a string value (see MaxValueBytes).
func BoundedGet(ctx context.Context, pipe redis.Pipeliner, key string) *redis.StringCmd {
	return pipe.GetRange(ctx, key, 0, MaxValueBytes)
}

// TooLarge reports whether a BoundedGet reply is a value longer than
// MaxValueBytes.
func TooLarge(v string) bool { return len(v) > MaxValueBytes }

// IntReads reads an integer string: GETRANGE 0 MaxValueBytes (a bounded
// GET), and PTTL when WithTTL. A value longer than MaxValueBytes is
// skipped as value_too_large, one that Redis would not take as an integer
// (resp.ParseInt) as bad_value.
//
// GETRANGE answers "" for a missing key as for an empty value: with PTTL
// (-2: no key) the two are told apart; without, "" is read as gone (it is
// no integer either way, and holds nothing).
type IntReads struct {
	WithTTL bool
}

// Read implements Reads.
func (g *IntReads) Read(ctx context.Context, c redis.Cmdable, keys []string, reads []KeyRead) error {
	pipe := c.Pipeline()
	gets := make([]*redis.StringCmd, len(keys))
	var ttls []*redis.DurationCmd
	if g.WithTTL {
		ttls = make([]*redis.DurationCmd, len(keys))
	}
	for i, k := range keys {
		gets[i] = BoundedGet(ctx, pipe, k)
		if g.WithTTL {
			ttls[i] = pipe.PTTL(ctx, k)
		}
	}
	_, _ = pipe.Exec(ctx)
	for i, k := range keys {
		r := &reads[i]
		r.Key = k
		v, err := gets[i].Result()
		if err != nil {
			if err := judgeErr(r, err); err != nil {
				return err
			}
			continue
		}
		if g.WithTTL {
			d, err := ttls[i].Result()
			if err != nil {
				if err := judgeErr(r, err); err != nil {
					return err
				}
				continue
			}
			if r.PTTL = PTTLMillis(d); r.PTTL == -2 {
				r.Status = Gone
				continue
			}
		} else if v == "" {
			r.Status = Gone
			continue
		}
		r.SetInt(v)
	}
	return nil
}

// SetInt judges a BoundedGet reply of an existing key as an integer
// value: r.Value, or skipped as value_too_large or bad_value.
func (r *KeyRead) SetInt(v string) {
	if TooLarge(v) {
		r.skip(SkipValueTooLarge)
		return
	}
	n, ok := resp.ParseInt(v)
	if !ok {
		r.skip(SkipBadValue)
		return
	}
	r.Value = n
}

// SetToken judges a BoundedGet reply of an existing key as a token:
// r.Text, or skipped as value_too_large.
func (r *KeyRead) SetToken(v string) {
	if TooLarge(v) {
		r.skip(SkipValueTooLarge)
		return
	}
	r.Text = v
}

// TokenReads reads a string held as an owner's token, with its PTTL:
// GETRANGE 0 MaxValueBytes and PTTL. A token longer than MaxValueBytes is
// skipped as value_too_large.
type TokenReads struct{}

// Read implements Reads.
func (TokenReads) Read(ctx context.Context, c redis.Cmdable, keys []string, reads []KeyRead) error {
	pipe := c.Pipeline()
	gets := make([]*redis.StringCmd, len(keys))
	ttls := make([]*redis.DurationCmd, len(keys))
	for i, k := range keys {
		gets[i] = BoundedGet(ctx, pipe, k)
		ttls[i] = pipe.PTTL(ctx, k)
	}
	_, _ = pipe.Exec(ctx)
	for i, k := range keys {
		r := &reads[i]
		r.Key = k
		v, err := gets[i].Result()
		if err == nil {
			pt, perr := ttls[i].Result()
			if perr != nil {
				err = perr
			} else {
				r.PTTL = PTTLMillis(pt)
			}
		}
		if err != nil {
			if err := judgeErr(r, err); err != nil {
				return err
			}
			continue
		}
		// GETRANGE answers "" for a missing key: PTTL tells.
		if r.PTTL == -2 {
			r.Status = Gone
			continue
		}
		r.SetToken(v)
	}
	return nil
}
