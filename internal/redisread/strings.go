package redisread

import (
	"context"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// IntReads reads an integer string: GET, and PTTL when WithTTL. A value
// that is not an integer is skipped as bad_value.
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
		gets[i] = pipe.Get(ctx, k)
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
		}
		n, perr := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if perr != nil {
			r.skip(SkipBadValue)
			continue
		}
		r.Value = n
	}
	return nil
}

// MaxTokenBytes bounds what TokenReads reads of a value: a lock token is a
// short random string, and a huge value under a lock's name must not be
// read whole every sweep.
const MaxTokenBytes = 512

// TokenReads reads a string held as an owner's token, with its PTTL:
// GETRANGE 0 MaxTokenBytes-1 and PTTL.
type TokenReads struct{}

// Read implements Reads.
func (TokenReads) Read(ctx context.Context, c redis.Cmdable, keys []string, reads []KeyRead) error {
	pipe := c.Pipeline()
	gets := make([]*redis.StringCmd, len(keys))
	ttls := make([]*redis.DurationCmd, len(keys))
	for i, k := range keys {
		gets[i] = pipe.GetRange(ctx, k, 0, MaxTokenBytes-1)
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
		r.Text = v
	}
	return nil
}
