package release

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/kind"
	"github.com/slotexporter/slot_exporter/internal/redisread"
	"github.com/slotexporter/slot_exporter/internal/resp"
)

// One reader per kind fills a KeyHolding (readKey picks it), each in one
// pipelined round trip, a stream's consumers in a second; false: the key
// is gone.

func readSlotSet(ctx context.Context, c redis.Cmdable, f *config.Family, k *KeyHolding, now int64, o ReadOptions) (bool, error) {
	pipe := c.Pipeline()
	zr := pipe.ZRangeWithScores(ctx, k.Key, 0, int64(o.MaxMembers))
	pt := pipe.PTTL(ctx, k.Key)
	_, _ = pipe.Exec(ctx)
	zs, err := zr.Result()
	if err != nil {
		return false, err
	}
	if err := k.setPTTL(pt); err != nil {
		return false, err
	}
	if k.PTTL == -2 && len(zs) == 0 {
		return false, nil
	}
	if len(zs) > o.MaxMembers {
		zs, k.Truncated = zs[:o.MaxMembers], true
	}
	rules := kind.Rules(f)
	b := rules.Bounds(now)
	for _, z := range zs {
		name, _ := z.Member.(string)
		m := Member{Member: name, Score: z.Score, Expiry: rules.Expiry(z.Score)}
		if rules.HeartbeatScore {
			m.LastHeartbeat = z.Score * rules.Unit
		} else {
			m.LastHeartbeat = m.Expiry - rules.TTL
		}
		m.FirstSeen, m.Tracked = firstSeen(o, f, k.Key, name, now)
		m.State = rules.Classify(&b, z.Score, now, m.FirstSeen)
		k.Members = append(k.Members, m)
	}
	return true, nil
}

func firstSeen(o ReadOptions, f *config.Family, key, member string, now int64) (int64, bool) {
	if o.FirstSeen != nil {
		if t, ok := o.FirstSeen(f.Name, key, member); ok {
			return t, true
		}
	}
	return now, false
}

func readLock(ctx context.Context, c redis.Cmdable, f *config.Family, k *KeyHolding, now int64, o ReadOptions) (bool, error) {
	pipe := c.Pipeline()
	get := redisread.BoundedGet(ctx, pipe, k.Key)
	pt := pipe.PTTL(ctx, k.Key)
	_, _ = pipe.Exec(ctx)
	v, err := get.Result()
	if err != nil {
		return false, err
	}
	if err := k.setPTTL(pt); err != nil {
		return false, err
	}
	if k.PTTL == -2 {
		return false, nil
	}
	if tooLarge(k, v) {
		return true, nil
	}
	k.Value = v
	rules := kind.Rules(f)
	expiry, b := kind.LockBounds(&rules, now, k.PTTL)
	m := Member{Member: v, Score: expiry, Expiry: expiry, LastHeartbeat: math.NaN()}
	m.FirstSeen, m.Tracked = firstSeen(o, f, k.Key, v, now)
	m.State = rules.Classify(&b, expiry, now, m.FirstSeen)
	k.Members = []Member{m}
	return true, nil
}

func readValue(ctx context.Context, c redis.Cmdable, k *KeyHolding, withTTL bool) (bool, error) {
	pipe := c.Pipeline()
	get := redisread.BoundedGet(ctx, pipe, k.Key)
	var pt *redis.DurationCmd
	if withTTL {
		pt = pipe.PTTL(ctx, k.Key)
	}
	_, _ = pipe.Exec(ctx)
	v, err := get.Result()
	if err != nil {
		return false, err
	}
	k.PTTL = -1
	if pt != nil {
		if err := k.setPTTL(pt); err != nil {
			return false, err
		}
	}
	// GETRANGE answers "" for a missing key: PTTL tells; without it (a
	// counter), "" holds nothing to release either way.
	if k.PTTL == -2 || pt == nil && v == "" {
		return false, nil
	}
	if tooLarge(k, v) {
		return true, nil
	}
	k.Value = v
	k.Int, k.IsInt = resp.ParseInt(v)
	return true, nil
}

// tooLarge marks k when v, a BoundedGet reply, is longer than
// redisread.MaxValueBytes: such a value is never read whole, shown or
// released (the exporter skips it as value_too_large).
func tooLarge(k *KeyHolding, v string) bool {
	if !redisread.TooLarge(v) {
		return false
	}
	k.Problem = fmt.Sprintf("holds a value longer than %d bytes: not read whole, not shown and not released (the exporter skips it as value_too_large)", redisread.MaxValueBytes)
	return true
}

// setPTTL takes the key's PTTL from the pipeline that read it.
func (k *KeyHolding) setPTTL(pt *redis.DurationCmd) error {
	d, err := pt.Result()
	if err != nil {
		return err
	}
	k.PTTL = redisread.PTTLMillis(d)
	return nil
}

func readList(ctx context.Context, c redis.Cmdable, f *config.Family, k *KeyHolding) (bool, error) {
	idx := int64(-1)
	if f.PopSide == config.PopLeft {
		idx = 0
	}
	pipe := c.Pipeline()
	n := pipe.LLen(ctx, k.Key)
	head := pipe.LIndex(ctx, k.Key, idx)
	_, _ = pipe.Exec(ctx)
	l, err := n.Result()
	if err != nil {
		return false, err
	}
	if l == 0 {
		return false, nil
	}
	k.Length, k.PTTL = l, -1
	v, err := head.Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return false, err
	}
	if len(v) > MaxHeadBytes {
		v, k.HeadCut = v[:MaxHeadBytes], true
	}
	k.Head = v
	return true, nil
}

func readStream(ctx context.Context, c redis.Cmdable, k *KeyHolding) (bool, error) {
	pipe := c.Pipeline()
	n := pipe.XLen(ctx, k.Key)
	groups := pipe.XInfoGroups(ctx, k.Key)
	_, _ = pipe.Exec(ctx)
	l, err := n.Result()
	if err != nil {
		return false, err
	}
	gs, err := groups.Result()
	if err != nil {
		// XINFO GROUPS on a missing key is an error; XLEN said 0.
		if l == 0 && strings.Contains(err.Error(), "no such key") {
			return false, nil
		}
		return false, err
	}
	k.Length, k.PTTL = l, -1
	if len(gs) > maxGroups {
		gs, k.GroupsCut = gs[:maxGroups], true
	}
	pipe = c.Pipeline()
	cons := make([]*redis.XInfoConsumersCmd, len(gs))
	for i, g := range gs {
		cons[i] = pipe.XInfoConsumers(ctx, k.Key, g.Name)
	}
	_, _ = pipe.Exec(ctx)
	for i, g := range gs {
		sg := StreamGroup{Name: g.Name, Pending: g.Pending, Lag: g.Lag, LastDelivered: g.LastDeliveredID}
		cs, err := cons[i].Result()
		if err != nil {
			return false, err
		}
		if len(cs) > maxConsumers {
			cs, sg.ConsumersCut = cs[:maxConsumers], true
		}
		for _, c := range cs {
			sg.Consumers = append(sg.Consumers, StreamConsumer{Name: c.Name, Pending: c.Pending, Idle: c.Idle, Inactive: c.Inactive})
		}
		k.Groups = append(k.Groups, sg)
	}
	return true, nil
}
