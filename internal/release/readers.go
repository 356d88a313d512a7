package release

import (
	"context"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/cespare/xxhash/v2"
	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/kind"
	"github.com/slotexporter/slot_exporter/internal/redisread"
	"github.com/slotexporter/slot_exporter/internal/resp"
	"github.com/slotexporter/slot_exporter/internal/track"
)

// One reader per kind fills a KeyHolding (readKey picks it), each in one
// pipelined round trip, a stream's consumers in a second; false: the key
// is gone. Slot sets and lists are read raw (raw.go), the rest through
// go-redis, whose replies are bounded by the commands themselves.

func readSlotSet(ctx context.Context, c redis.Cmdable, f *config.Family, k *KeyHolding, now int64, o ReadOptions) (bool, error) {
	conn, err := dialFor(ctx, c, k.Key)
	if err != nil {
		return false, err
	}
	defer conn.put()
	// ZRANGE 0 max reads one member past the bound: it says the set has
	// more.
	if err := conn.SendSlotReads(ctx, []string{k.Key}, int64(o.MaxMembers), true); err != nil {
		return false, err
	}
	stop, err := conn.Deadline(ctx)
	defer stop()
	if err != nil {
		return false, err
	}
	n, _, zrErr, err := conn.ReadSlotHead(true)
	if err != nil {
		return false, conn.Fail(ctx, err)
	}
	rules := kind.Rules(f)
	b := rules.Bounds(now)
	w := resp.NewCapped(MaxMemberBytes)
	d := xxhash.New()
	for i := 0; i < n; i++ {
		w.Reset()
		track.MemberHashStart(d, k.Key)
		score, err := conn.ReadScored(io.MultiWriter(w, d))
		if err != nil {
			return false, conn.Fail(ctx, err)
		}
		if i >= o.MaxMembers {
			k.Truncated = true
			continue
		}
		k.Members = append(k.Members, member(&rules, &b, f, k.Key, w, d.Sum64(), score, now, o))
	}
	pttl, ptErr, err := conn.ReadInt()
	if err != nil {
		return false, conn.Fail(ctx, err)
	}
	conn.done = true
	for _, e := range [][]byte{zrErr, ptErr} {
		if e != nil {
			moved(c, e)
			return false, resp.ReplyError(e)
		}
	}
	k.PTTL = pttl
	if k.PTTL == -2 && len(k.Members) == 0 {
		return false, nil
	}
	return true, nil
}

// member is one member read into w, with its state; h is its
// track.MemberHash, taken as it streamed. One longer than MaxMemberBytes
// keeps its first MaxHeadBytes bytes only (Cut), and a release never
// sends it; its first-seen time is looked up by h all the same, so that
// a zombie shows as one however long its name.
func member(rules *track.Rules, b *track.Bounds, f *config.Family, key string, w *resp.Capped, h uint64, score float64, now int64, o ReadOptions) Member {
	m := Member{Score: score, Expiry: rules.Expiry(score), Size: w.Len()}
	if m.Cut = w.Cut(); m.Cut {
		m.Member = string(w.Kept()[:MaxHeadBytes])
	} else {
		m.Member = string(w.Kept())
	}
	m.FirstSeen, m.Tracked = firstSeen(o, f, key, h, now)
	if rules.HeartbeatScore {
		m.LastHeartbeat = score * rules.Unit
	} else {
		m.LastHeartbeat = m.Expiry - rules.TTL
	}
	m.State = rules.Classify(b, score, now, m.FirstSeen)
	return m
}

func firstSeen(o ReadOptions, f *config.Family, key string, memberHash uint64, now int64) (int64, bool) {
	if o.FirstSeen != nil {
		if t, ok := o.FirstSeen(f.Name, key, memberHash); ok {
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
	m := Member{Member: v, Score: expiry, Expiry: expiry, LastHeartbeat: math.NaN(), Size: int64(len(v))}
	m.FirstSeen, m.Tracked = firstSeen(o, f, k.Key, track.MemberHash(xxhash.New(), k.Key, v), now)
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

// readList reads a queue's length and next element, which only the page
// shows: it keeps the element's first MaxHeadBytes bytes as it streams.
func readList(ctx context.Context, c redis.Cmdable, f *config.Family, k *KeyHolding) (bool, error) {
	idx := "-1"
	if f.PopSide == config.PopLeft {
		idx = "0"
	}
	conn, err := dialFor(ctx, c, k.Key)
	if err != nil {
		return false, err
	}
	defer conn.put()
	conn.Queue("LLEN", k.Key)
	conn.Queue("LINDEX", k.Key, idx)
	if err := conn.Flush(ctx); err != nil {
		return false, err
	}
	stop, err := conn.Deadline(ctx)
	defer stop()
	if err != nil {
		return false, err
	}
	l, lenErr, err := conn.ReadInt()
	if err != nil {
		return false, conn.Fail(ctx, err)
	}
	w := resp.NewCapped(MaxHeadBytes)
	_, headErr, err := conn.ReadBulkTo(w)
	if err != nil {
		return false, conn.Fail(ctx, err)
	}
	conn.done = true
	for _, e := range [][]byte{lenErr, headErr} {
		if e != nil {
			moved(c, e)
			return false, resp.ReplyError(e)
		}
	}
	if l == 0 {
		return false, nil
	}
	k.Length, k.PTTL = l, -1
	k.Head, k.HeadBytes, k.HeadCut = string(w.Kept()), w.Len(), w.Cut()
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
