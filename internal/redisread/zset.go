package redisread

import (
	"context"
	"strconv"

	"github.com/cespare/xxhash/v2"
	"github.com/redis/go-redis/v9"
)

// Score ranges of an oversized set, counted with ZCOUNT.
const (
	RangeExpired = iota
	RangeStale
	RangeLive // live and zombie: without first-seen times they look alike
	RangeFuture
	NumRanges
)

// Edges are the state edges of a sweep in the key's own score space (see
// track.Bounds): the ZCOUNT ranges use exactly these numbers, so that an
// oversized set is split where a member read one by one would be.
type Edges struct {
	Expired, StaleBelow, FutureAbove float64
}

// ZSetReads reads a sorted set of slots: ZRANGE 0 max WITHSCORES and PTTL
// through go-redis (the raw path, zset_raw.go, reads with ZSCAN).
// A set with more than MaxMembers members is not read member by member
// but counted by score range (ZCOUNT) at Edges, with its newest
// unexpired score (for expiring-early checks).
type ZSetReads struct {
	MaxMembers int64
	Edges      Edges
}

func fmtScore(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// Read reads keys through go-redis, in one round trip plus one for the
// oversized sets.
func (z *ZSetReads) Read(ctx context.Context, c redis.Cmdable, keys []string, reads []KeyRead) error {
	pipe := c.Pipeline()
	zr := make([]*redis.ZSliceCmd, len(keys))
	pt := make([]*redis.DurationCmd, len(keys))
	for i, k := range keys {
		// Reading one member past the cap tells an oversized set apart
		// without a ZCARD, and bounds memory all the same.
		zr[i] = pipe.ZRangeWithScores(ctx, k, 0, z.MaxMembers)
		pt[i] = pipe.PTTL(ctx, k)
	}
	_, _ = pipe.Exec(ctx)
	var big []int
	digest := xxhash.New()
	for i, k := range keys {
		r := &reads[i]
		r.Key = k
		members, err := zr[i].Result()
		if err != nil {
			if err := judgeErr(r, err); err != nil {
				return err
			}
			continue
		}
		d, err := pt[i].Result()
		if err != nil {
			if err := judgeErr(r, err); err != nil {
				return err
			}
			continue
		}
		r.PTTL = PTTLMillis(d)
		if len(members) == 0 || r.PTTL == -2 {
			r.Status = Gone
			continue
		}
		if int64(len(members)) > z.MaxMembers {
			r.Oversized = true
			big = append(big, i)
			continue
		}
		r.Members = make([]Member, len(members))
		for j, m := range members {
			s, _ := m.Member.(string)
			r.Members[j] = Member{Hash: hashMember(digest, k, s), Score: m.Score}
		}
	}
	if len(big) > 0 {
		return z.countOversized(ctx, c, reads, big)
	}
	return nil
}

// hashMember hashes (key, 0, member) as the raw reader does from reply
// bytes; track.MemberHash is the same function for callers with strings.
func hashMember(d *xxhash.Digest, key, member string) uint64 {
	d.Reset()
	_, _ = d.WriteString(key)
	_, _ = d.Write([]byte{0})
	_, _ = d.WriteString(member)
	return d.Sum64()
}

// countOversized splits each oversized set into the ranges of Edges with
// ZCOUNT, and finds its newest unexpired, not future, score.
func (z *ZSetReads) countOversized(ctx context.Context, c redis.Cmdable, reads []KeyRead, idx []int) error {
	e := z.Edges
	exp, stale, fut := fmtScore(e.Expired), fmtScore(e.StaleBelow), fmtScore(e.FutureAbove)
	// Live is [StaleBelow, FutureAbove] when the stale range is not
	// empty, else (Expired, FutureAbove]: expired is checked first.
	liveMin := stale
	if e.StaleBelow <= e.Expired {
		liveMin = "(" + exp
	}
	pipe := c.Pipeline()
	type q struct {
		counts [NumRanges]*redis.IntCmd
		newest *redis.ZSliceCmd
	}
	qs := make([]q, len(idx))
	for j, i := range idx {
		k := reads[i].Key
		qs[j].counts = [NumRanges]*redis.IntCmd{
			RangeExpired: pipe.ZCount(ctx, k, "-inf", exp),
			RangeStale:   pipe.ZCount(ctx, k, "("+exp, "("+stale),
			RangeLive:    pipe.ZCount(ctx, k, liveMin, fut),
			RangeFuture:  pipe.ZCount(ctx, k, "("+fut, "+inf"),
		}
		// With REV, Redis takes the range as (max, min): go-redis passes
		// Start and Stop through as they are.
		qs[j].newest = pipe.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{
			Key: k, ByScore: true, Rev: true, Start: fut, Stop: "(" + exp, Count: 1,
		})
	}
	_, _ = pipe.Exec(ctx)
	for j, i := range idx {
		r := &reads[i]
		for rg, cmd := range qs[j].counts {
			n, err := cmd.Result()
			if err != nil {
				if err := judgeErr(r, err); err != nil {
					return err
				}
				break
			}
			r.Ranges[rg] = n
		}
		if r.Status != OK {
			continue
		}
		newest, err := qs[j].newest.Result()
		if err != nil {
			if err := judgeErr(r, err); err != nil {
				return err
			}
			continue
		}
		r.Newest = e.Expired
		if len(newest) > 0 {
			r.Newest = newest[0].Score
		}
	}
	return nil
}
