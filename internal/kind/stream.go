package kind

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/redisread"
	"github.com/slotexporter/slot_exporter/internal/snapshot"
	"github.com/slotexporter/slot_exporter/internal/track"
)

// A stream is a work queue with consumer groups: XADD to produce,
// XREADGROUP to take, XACK when done, XAUTOCLAIM to take over the work of
// a consumer that died. It reads, in pipelined rounds per batch of keys
// (streamReads):
//
//  1. XLEN and XINFO GROUPS: length, and per group its pending count and
//     lag (Redis 7 and later; absent before, or when Redis cannot tell
//     after an XDEL or XTRIM);
//  2. for each group with entries pending (a drained group costs nothing
//     more): a page of XPENDING key group START + N (N is
//     streamPendingPage, 2000), pending entries with idle times and
//     delivery counts, and XINFO CONSUMERS (not bounded: a group has as
//     many consumers as workers);
//  3. further pages of the groups with more than N pending, pipelined over
//     those groups, up to streamPendingPages (10) pages per group and
//     sweep.
//
// The pages walk each group's pending entries list (PEL) in ID order, and
// a walk a sweep leaves unfinished resumes at the next sweep where it
// stopped (pelPasses): the stuck and redelivered counts are exact over
// every pending entry, as of the last walk that ended, however many are
// pending. A group with up to N pending entries is walked whole every
// sweep; one with P > 10N takes ceil(P/10N) sweeps per walk, and its
// figures are that much older. Until a group's first walk ends (the first
// such sweeps after the exporter starts), its figures are what the walk
// counted so far: a lower bound, never above the truth, and exact once
// the walk ends, so that no alert stays silent for more than a walk.
// Cost, measured with Redis 7.0 on a busy 2-core machine: XPENDING costs
// Redis about 0.3 µs per entry returned (a whole PEL of 63k entries in one
// call: 18 ms), so a page of 2000 blocks Redis about 0.6 ms, and a group
// with 110k pending costs at most about 6 ms of Redis per sweep and is
// exact again every 6 sweeps (TestStreamCountsPastOnePage). The oldest
// pending entry is the first of a walk's first page or, mid-walk,
// XPENDING key group - + 1.
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
//     (a consumer died mid-job), exact as of each group's last walk;
//   - slot_stream_consumers_dead: consumers with entries pending and idle
//     for max_hold or more (XINFO CONSUMERS idle);
//   - slot_stream_redelivered: pending entries delivered more than
//     max_deliveries times (poison jobs), exact as of each group's last
//     walk.
//
// slot_stream_oldest_pending_seconds{user,group} is Redis time minus the
// time in the ID of the group's oldest pending entry, never below 0, and
// 0 for a group with nothing pending. An ID written by hand rather than by
// XADD * carries no time and reads as very old. A user with several
// streams gets the oldest per group name. Group names are label values:
// bytes that are not UTF-8 are escaped as \xNN (and \ as \\), as user ids
// are; a group name over 1 KiB has no series (maxGroupNameBytes).
//
// used is the pending count over all groups: a stream whose pending never
// drains shows a floor that grows. A user with stuck entries, dead
// consumers or poison entries carries AnomalyKind, so that the series cap
// shows it first. The limit is optional; over it is an anomaly.
func init() { register(config.KindStream, newStream) }

// A sweep reads at most streamPendingPages pages of streamPendingPage
// pending entries per group; see stream.
const (
	streamPendingPage  = 2000
	streamPendingPages = 10
)

type stream struct {
	maxHold       int64 // ms
	maxDeliveries int64
	limit         int64
	cur, last     streamGauges
	passes        pelPasses
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
	t := &stream{passes: pelPasses{m: map[string]*pelPass{}}}
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
	return &streamReads{maxHold: t.maxHold, maxDeliveries: t.maxDeliveries, passes: &t.passes}
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
		if len(g.name) <= maxGroupNameBytes {
			ages = append(ages, groupAge{group: g.name, seconds: age})
		}
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
	t.passes.prune()
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

func (t *stream) UserExtra(v track.UserView) []snapshot.Value {
	ages := t.last.oldest[v.ID]
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
	if len(out) > maxGroupSeries {
		// The oldest, in group order.
		slices.SortStableFunc(out, func(a, b snapshot.Value) int { return cmp.Compare(b.V, a.V) })
		out = out[:maxGroupSeries]
		slices.SortFunc(out, func(a, b snapshot.Value) int { return strings.Compare(a.Labels[0], b.Labels[0]) })
	}
	return out
}

// maxGroupSeries bounds a user's slot_stream_oldest_pending_seconds
// series: the per-user series cap counts users, and one stream with 3,000
// groups made 3,000 series of one user. The oldest are kept; every group
// still counts in the family's totals.
const maxGroupSeries = 20

// maxGroupNameBytes bounds a group name that becomes a label, as
// config.MaxUserBytes bounds a user id and for the same reason: a name of
// megabytes would make a /metrics page that a scrape's label limit refuses
// whole. A group with a longer name has no series of its own; it still
// counts in the family's totals.
const maxGroupNameBytes = config.MaxUserBytes

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
