package kind

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/redisread"
)

// What a stream family reads, in pipelined rounds: XLEN and XINFO GROUPS
// for every key, then, per group with entries pending, a page of XPENDING
// and XINFO CONSUMERS, then further pages of the groups with more pending.
// stream.go says what the figures mean.

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

// streamReads reads streams in pipelined rounds; see stream.
type streamReads struct {
	maxHold       int64 // ms
	maxDeliveries int64
	passes        *pelPasses
}

// pelPasses are the walks over each group's pending entries list (PEL),
// resumed from sweep to sweep: the stuck and redelivered counts are exact
// over every pending entry, however many, while a sweep reads at most
// streamPendingPages pages of streamPendingPage entries of a group.
type pelPasses struct {
	mu  sync.Mutex
	m   map[string]*pelPass // by key and group
	gen uint32
}

// pelPass is one group's walk.
type pelPass struct {
	// next is the first ID the walk has not read ("-": a new walk).
	next string
	// stuck and redelivered are counted so far in this walk.
	stuck, redelivered int64
	// done: a walk ended; its counts are exact as of it, and published
	// while the next walk runs.
	done                       bool
	doneStuck, doneRedelivered int64
	gen                        uint32
}

func passKey(key, group string) string { return key + "\x00" + group }

// get returns the pass of key's group, marking it seen in this sweep.
func (ps *pelPasses) get(key, group string) *pelPass {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	k := passKey(key, group)
	p := ps.m[k]
	if p == nil {
		p = &pelPass{next: "-"}
		ps.m[k] = p
	}
	p.gen = ps.gen
	return p
}

// prune drops the passes of groups no sweep read since the last call
// (gone, drained, or their stream gone).
func (ps *pelPasses) prune() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for k, p := range ps.m {
		if p.gen != ps.gen {
			delete(ps.m, k)
		}
	}
	ps.gen++
}

// groupReads are one group's commands after the first round.
type groupReads struct {
	key, group int // indexes into reads and streamInfo.groups
	pass       *pelPass
	// page is the pending entries read from pass.next; pages counts
	// the pages read in this sweep.
	page   *redis.XPendingExtCmd
	pages  int
	oldest *redis.XPendingExtCmd // nil when the walk starts at "-"
	// consumers answers XINFO CONSUMERS.
	consumers *redis.XInfoConsumersCmd
	// seen and fresh: consumers with entries read in this sweep, and
	// those with one idle less than max_hold.
	seen, fresh map[string]bool
	err         error
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
	var second []*groupReads
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
			g := &groupReads{key: i, group: j, pass: s.passes.get(k, gs[j].name), seen: map[string]bool{}, fresh: map[string]bool{}}
			g.page = pipe.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: k, Group: gs[j].name, Start: g.pass.next, End: "+", Count: streamPendingPage})
			if g.pass.next != "-" {
				g.oldest = pipe.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: k, Group: gs[j].name, Start: "-", End: "+", Count: 1})
			}
			g.consumers = pipe.XInfoConsumers(ctx, k, gs[j].name)
			second = append(second, g)
		}
	}
	if len(second) > 0 {
		_, _ = pipe.Exec(ctx)
	}
	// Further pages of the groups whose walk goes on, pipelined over the
	// groups, until each walk ends or has read its pages for this sweep.
	for more := second; len(more) > 0; {
		pipe = c.Pipeline()
		var next []*groupReads
		for _, g := range more {
			info := &infos[g.key].groups[g.group]
			if !s.fold(info, g) {
				continue
			}
			g.page = pipe.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: keys[g.key], Group: info.name, Start: g.pass.next, End: "+", Count: streamPendingPage})
			next = append(next, g)
		}
		if len(next) > 0 {
			_, _ = pipe.Exec(ctx)
		}
		more = next
	}
	for _, g := range second {
		r := &reads[g.key]
		if r.Status != redisread.OK {
			continue // marked by an earlier group of the same key
		}
		if err := s.finish(&infos[g.key].groups[g.group], g); err != nil {
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

// fold counts one page of a group's walk, and reports whether the walk
// reads another page in this sweep.
func (s *streamReads) fold(gi *groupInfo, g *groupReads) bool {
	pend, err := g.page.Result()
	if err != nil {
		g.err = err
		return false
	}
	g.pages++
	maxHold := time.Duration(s.maxHold) * time.Millisecond
	p := g.pass
	if p.next == "-" && len(pend) > 0 {
		gi.oldest = idTime(pend[0].ID)
	}
	for _, e := range pend {
		if e.RetryCount > s.maxDeliveries {
			p.redelivered++
		}
		if e.Idle >= maxHold {
			p.stuck++
		} else {
			g.fresh[e.Consumer] = true
		}
		g.seen[e.Consumer] = true
	}
	if len(pend) < streamPendingPage {
		// The walk reached the end of the PEL: its counts are exact.
		p.done, p.doneStuck, p.doneRedelivered = true, p.stuck, p.redelivered
		p.next, p.stuck, p.redelivered = "-", 0, 0
		return false
	}
	p.next = afterID(pend[len(pend)-1].ID)
	return g.pages < streamPendingPages
}

// finish sets a group's figures once its pages are read. A group or
// stream that vanished meanwhile keeps what the first round said of it.
func (s *streamReads) finish(gi *groupInfo, g *groupReads) error {
	err := g.err
	var cons []redis.XInfoConsumer
	if err == nil && g.oldest != nil {
		var first []redis.XPendingExt
		if first, err = g.oldest.Result(); err == nil && len(first) > 0 {
			gi.oldest = idTime(first[0].ID)
		}
	}
	if err == nil {
		cons, err = g.consumers.Result()
	}
	if err != nil {
		if isNoSuchKey(err) || redis.HasErrorPrefix(err, "NOGROUP") {
			return nil
		}
		return err
	}
	if p := g.pass; p.done {
		gi.stuck, gi.redelivered = p.doneStuck, p.doneRedelivered
	} else {
		// The first walk of a group has not ended: what it counted so
		// far, a lower bound (see stream).
		gi.stuck, gi.redelivered = p.stuck, p.redelivered
	}
	maxHold := time.Duration(s.maxHold) * time.Millisecond
	// A server that does not report a consumer's idle time (it answers
	// -1, as some Redis-compatible servers do) leaves its pending entries
	// as the witness: a consumer all of whose pending entries read in
	// this sweep are idle past max_hold is dead.
	for _, c := range cons {
		switch {
		case c.Pending <= 0:
		case c.Idle >= maxHold:
			gi.dead++
		case c.Idle < 0 && g.seen[c.Name] && !g.fresh[c.Name]:
			gi.dead++
		}
	}
	return nil
}

// afterID is the stream ID right after id ("ms-seq"): where the next
// page of a walk starts (an exclusive "(" range needs Redis 6.2).
func afterID(id string) string {
	msPart, seqPart, _ := strings.Cut(id, "-")
	ms, err1 := strconv.ParseUint(msPart, 10, 64)
	seq, err2 := strconv.ParseUint(seqPart, 10, 64)
	if err1 != nil || err2 != nil {
		return "(" + id
	}
	if seq == math.MaxUint64 {
		return strconv.FormatUint(ms+1, 10) + "-0"
	}
	return msPart + "-" + strconv.FormatUint(seq+1, 10)
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
