package kind

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/redisread"
)

// What a stream family reads, in two pipelined rounds: XLEN and XINFO
// GROUPS for every key, then, per group with entries pending, XPENDING and
// XINFO CONSUMERS. stream.go says what the figures mean.

// streamInfo is what streamReads decoded of one stream (KeyRead.Extra).
type streamInfo struct {
	length int64
	groups []groupInfo
}

type groupInfo struct {
	name    string
	pending int64
	lag     int64 // -1: not reported
	// oldest is the time (ms) in the ID of the oldest pending entry; -1
	// when there is none, or its ID was not read.
	oldest                   int64
	stuck, dead, redelivered int64
}

// streamReads reads streams in two pipelined rounds; see stream.
type streamReads struct {
	maxHold       int64 // ms
	maxDeliveries int64
}

// groupReads are one group's second-round commands.
type groupReads struct {
	key, group int // indexes into reads and streamInfo.groups
	pending    *redis.XPendingExtCmd
	idle       *redis.XPendingExtCmd // nil unless more than streamPendingScan are pending
	consumers  *redis.XInfoConsumersCmd
}

func (s *streamReads) Read(ctx context.Context, c redis.Cmdable, keys []string, reads []redisread.KeyRead) error {
	pipe := c.Pipeline()
	lens := make([]*redis.IntCmd, len(keys))
	groups := make([]*redis.Cmd, len(keys))
	for i, k := range keys {
		lens[i] = pipe.XLen(ctx, k)
		// Raw, because go-redis's XInfoGroups reads a lag Redis did not
		// send (before Redis 7) as 0.
		groups[i] = redis.NewCmd(ctx, "xinfo", "groups", k)
		groups[i].SetFirstKeyPos(2)
		_ = pipe.Process(ctx, groups[i])
	}
	_, _ = pipe.Exec(ctx)
	infos := make([]*streamInfo, len(keys))
	var second []groupReads
	pipe = c.Pipeline()
	for i, k := range keys {
		r := &reads[i]
		r.Key = k
		n, err := lens[i].Result()
		if err != nil {
			if err := r.Judge(err); err != nil {
				return err
			}
			continue
		}
		v, err := groups[i].Result()
		if err != nil {
			if isNoSuchKey(err) {
				r.Status = redisread.Gone
				continue
			}
			if err := r.Judge(err); err != nil {
				return err
			}
			continue
		}
		gs, err := parseGroups(v)
		if err != nil {
			return fmt.Errorf("reading %q: XINFO GROUPS: %w", k, err)
		}
		if len(gs) == 0 {
			r.SkipAs(redisread.SkipBadValue)
			continue
		}
		infos[i] = &streamInfo{length: n, groups: gs}
		for j := range gs {
			if gs[j].pending == 0 {
				continue
			}
			g := groupReads{key: i, group: j}
			g.pending = pipe.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: k, Group: gs[j].name, Start: "-", End: "+", Count: streamPendingScan})
			if gs[j].pending > streamPendingScan {
				g.idle = pipe.XPendingExt(ctx, &redis.XPendingExtArgs{
					Stream: k, Group: gs[j].name, Idle: time.Duration(s.maxHold) * time.Millisecond,
					Start: "-", End: "+", Count: streamPendingScan,
				})
			}
			g.consumers = pipe.XInfoConsumers(ctx, k, gs[j].name)
			second = append(second, g)
		}
	}
	if len(second) > 0 {
		_, _ = pipe.Exec(ctx)
	}
	for _, g := range second {
		r := &reads[g.key]
		if r.Status != redisread.OK {
			continue // marked by an earlier group of the same key
		}
		if err := s.fold(&infos[g.key].groups[g.group], &g); err != nil {
			if err := r.Judge(err); err != nil {
				return err
			}
		}
	}
	for i := range reads {
		if reads[i].Status == redisread.OK && infos[i] != nil {
			reads[i].Extra = infos[i]
		}
	}
	return nil
}

// fold adds a group's second-round replies to g. A group or stream that
// vanished between the two rounds keeps what the first round said of it.
func (s *streamReads) fold(gi *groupInfo, g *groupReads) error {
	pend, err := g.pending.Result()
	if err == nil && g.idle != nil {
		_, err = g.idle.Result()
	}
	var cons []redis.XInfoConsumer
	if err == nil {
		cons, err = g.consumers.Result()
	}
	if err != nil {
		if isNoSuchKey(err) || redis.HasErrorPrefix(err, "NOGROUP") {
			return nil
		}
		return err
	}
	maxHold := time.Duration(s.maxHold) * time.Millisecond
	if len(pend) > 0 {
		gi.oldest = idTime(pend[0].ID)
	}
	for _, p := range pend {
		if p.RetryCount > s.maxDeliveries {
			gi.redelivered++
		}
		if g.idle == nil && p.Idle >= maxHold {
			gi.stuck++
		}
	}
	if g.idle != nil {
		gi.stuck = int64(len(g.idle.Val()))
	}
	// A server that does not report a consumer's idle time (it answers
	// -1, as some Redis-compatible servers do) leaves its pending entries
	// as the witness: a consumer all of whose pending entries seen here are
	// idle past max_hold is dead.
	fresh := map[string]bool{}
	seen := map[string]bool{}
	for _, p := range pend {
		seen[p.Consumer] = true
		if p.Idle < maxHold {
			fresh[p.Consumer] = true
		}
	}
	for _, c := range cons {
		switch {
		case c.Pending <= 0:
		case c.Idle >= maxHold:
			gi.dead++
		case c.Idle < 0 && seen[c.Name] && !fresh[c.Name]:
			gi.dead++
		}
	}
	return nil
}

// isNoSuchKey is XINFO's answer for a missing key.
func isNoSuchKey(err error) bool {
	return redis.HasErrorPrefix(err, "no such key")
}

// idTime is the time part of a stream ID ("ms-seq"), or -1.
func idTime(id string) int64 {
	msPart, _, _ := strings.Cut(id, "-")
	n, err := strconv.ParseInt(msPart, 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// parseGroups decodes XINFO GROUPS in RESP2 (a flat list of name, value
// pairs per group) or RESP3 (a map per group).
func parseGroups(v any) ([]groupInfo, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("unexpected reply %T", v)
	}
	out := make([]groupInfo, 0, len(list))
	for _, e := range list {
		g := groupInfo{lag: -1, oldest: -1}
		set := func(name string, val any) error {
			switch name {
			case "name":
				s, ok := val.(string)
				if !ok {
					return fmt.Errorf("group name: unexpected %T", val)
				}
				g.name = s
			case "pending":
				n, ok := val.(int64)
				if !ok {
					return fmt.Errorf("pending: unexpected %T", val)
				}
				g.pending = n
			case "lag":
				// nil when Redis cannot tell.
				if n, ok := val.(int64); ok {
					g.lag = n
				}
			}
			return nil
		}
		switch f := e.(type) {
		case []any:
			for i := 0; i+1 < len(f); i += 2 {
				name, _ := f[i].(string)
				if err := set(name, f[i+1]); err != nil {
					return nil, err
				}
			}
		case map[any]any:
			for k, val := range f {
				name, _ := k.(string)
				if err := set(name, val); err != nil {
					return nil, err
				}
			}
		default:
			return nil, fmt.Errorf("unexpected group %T", e)
		}
		out = append(out, g)
	}
	return out, nil
}
