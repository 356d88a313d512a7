package kind

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cespare/xxhash/v2"
	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/redisread"
	"github.com/slotexporter/slot_exporter/internal/snapshot"
	"github.com/slotexporter/slot_exporter/internal/track"
)

// A stream is a work queue with consumer groups: XADD to produce,
// XREADGROUP to take, XACK when done, XAUTOCLAIM to take over the work of
// a consumer that died. It reads, in two pipelined rounds per batch of
// keys (streamReads):
//
//  1. XLEN and XINFO GROUPS: length, and per group its pending count and
//     lag (Redis 7 and later; absent before, or when Redis cannot tell
//     after an XDEL or XTRIM);
//  2. for each group with entries pending (a drained group costs nothing
//     more): XPENDING key group - + N, the N oldest pending entries with
//     idle times and delivery counts; XINFO CONSUMERS; and, only when more
//     than N are pending, XPENDING key group IDLE max_hold - + N for the
//     stuck count. N is streamPendingScan (1000). The extended XPENDING is
//     ordered by ID, so its first entry is the oldest pending one: the
//     summary form would add nothing. XINFO CONSUMERS is not bounded; a
//     group has as many consumers as workers.
//
// A key of another type is skipped as wrong_type. A stream with no groups
// is skipped as bad_value: it is a log, not a queue, and nothing about it
// can leak (its length is not counted either).
//
// Gauges, over the family's streams and groups:
//   - slot_stream_entries: XLEN;
//   - slot_stream_pending: delivered and not acked (XINFO GROUPS pending);
//   - slot_stream_lag: the lag of the groups that report it; the gauge is
//     absent when none does;
//   - slot_stream_pending_stuck: pending entries idle for max_hold or more
//     (a consumer died mid-job). Exact up to N pending entries per group;
//     beyond, at most N per group are counted;
//   - slot_stream_consumers_dead: consumers with entries pending and idle
//     for max_hold or more (XINFO CONSUMERS idle);
//   - slot_stream_redelivered: pending entries delivered more than
//     max_deliveries times (poison jobs). Counted among the N oldest
//     pending entries of each group, where poison entries stay: each claim
//     redelivers them without moving them.
//
// slot_stream_oldest_pending_seconds{user,group} is Redis time minus the
// time in the ID of the group's oldest pending entry, never below 0, and
// 0 for a group with nothing pending. An ID written by hand rather than by
// XADD * carries no time and reads as very old. A user with several
// streams gets the oldest per group name. Group names are label values:
// bytes that are not UTF-8 are escaped as \xNN (and \ as \\), as user ids
// are.
//
// used is the pending count over all groups: a stream whose pending never
// drains shows a floor that grows. A user with stuck entries, dead
// consumers or poison entries carries AnomalyKind, so that the series cap
// shows it first. The limit is optional; over it is an anomaly.
func init() { register(config.KindStream, newStream) }

// streamPendingScan bounds the pending entries read per group and sweep.
const streamPendingScan = 1000

type stream struct {
	maxHold       int64 // ms
	maxDeliveries int64
	limit         int64
	cur, last     streamGauges
}

type streamGauges struct {
	entries, pending, lag    int64
	haveLag                  bool
	stuck, dead, redelivered int64
	oldest                   map[uint64][]groupAge // by user hash
}

type groupAge struct {
	group   string
	seconds float64
}

func newStream(f *config.Family, _ *config.Sampling) Tracker {
	t := &stream{}
	t.Reconfigure(f, nil)
	return t
}

func (t *stream) Reconfigure(f *config.Family, _ *config.Sampling) {
	t.maxHold, t.maxDeliveries, t.limit = f.MaxHold.Milliseconds(), int64(f.MaxDeliveries), int64(f.Limit)
}

func (t *stream) Limits() track.Limits {
	return track.Limits{Limit: t.limit, OverLimitIsAnomaly: true}
}

func (t *stream) Begin(*Sweep) redisread.Reads {
	t.cur = streamGauges{oldest: map[uint64][]groupAge{}}
	return &streamReads{maxHold: t.maxHold, maxDeliveries: t.maxDeliveries}
}

func (t *stream) Apply(sw *Sweep, k Key) {
	s, ok := k.Read.Extra.(*streamInfo)
	if !ok {
		return
	}
	t.cur.entries += s.length
	var used, bad int64
	ages := t.cur.oldest[k.UserHash]
	for i := range s.groups {
		g := &s.groups[i]
		used += g.pending
		if g.lag >= 0 {
			t.cur.lag += g.lag
			t.cur.haveLag = true
		}
		t.cur.stuck += g.stuck
		t.cur.dead += g.dead
		t.cur.redelivered += g.redelivered
		bad += g.stuck + g.dead + g.redelivered
		age := 0.0
		if g.pending > 0 && g.oldest >= 0 {
			age = float64(max(sw.Now-g.oldest, 0)) / 1000
		}
		ages = append(ages, groupAge{group: g.name, seconds: age})
	}
	t.cur.oldest[k.UserHash] = ages
	t.cur.pending += used
	var flags uint8
	if bad > 0 {
		flags |= track.AnomalyKind
	}
	sw.Floor.Add(k.UserHash, k.User, used, flags)
}

func (t *stream) End(*Sweep, bool, bool) Ended {
	t.last = t.cur
	return Ended{}
}

func (t *stream) Publish(f *snapshot.Family) {
	g := &t.last
	f.Gauges = append(f.Gauges,
		gauge(snapshot.StreamEntries, float64(g.entries)),
		gauge(snapshot.StreamPending, float64(g.pending)),
		gauge(snapshot.StreamStuck, float64(g.stuck)),
		gauge(snapshot.StreamDead, float64(g.dead)),
		gauge(snapshot.StreamRedeliver, float64(g.redelivered)))
	if g.haveLag {
		f.Gauges = append(f.Gauges, gauge(snapshot.StreamLag, float64(g.lag)))
	}
}

func (t *stream) UserExtra(user string) []snapshot.Value {
	ages := t.last.oldest[xxhash.Sum64String(user)]
	if len(ages) == 0 {
		return nil
	}
	// One series per group name: the oldest over the user's streams.
	ages = slices.Clone(ages)
	slices.SortFunc(ages, func(a, b groupAge) int { return strings.Compare(a.group, b.group) })
	out := make([]snapshot.Value, 0, len(ages))
	for i, a := range ages {
		if i > 0 && a.group == ages[i-1].group {
			last := &out[len(out)-1]
			last.V = max(last.V, a.seconds)
			continue
		}
		out = append(out, gauge(snapshot.StreamOldest, a.seconds, labelValue(a.group)))
	}
	return out
}

// labelValue escapes what a label value cannot hold (bytes that are not
// UTF-8) as collector.UserLabel does for users: invalid bytes become \xNN
// and a backslash is doubled, so that distinct names stay distinct.
func labelValue(s string) string {
	if utf8.ValidString(s) && !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\\':
			b.WriteString(`\\`)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

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
