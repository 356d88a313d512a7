package kind

import (
	"context"

	"github.com/cespare/xxhash/v2"
	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/redisread"
	"github.com/slotexporter/slot_exporter/internal/resp"
	"github.com/slotexporter/slot_exporter/internal/snapshot"
	"github.com/slotexporter/slot_exporter/internal/track"
)

// A list is a queue: producers push at one end, consumers pop at the
// other (pop_side, right by default for LPUSH + BRPOP or BLMOVE ... RIGHT).
// It reads LLEN and LINDEX of the pop side (listReads), and PTTL when it
// holds queues to replay them (a held queue whose TTL ran out is gone,
// as a full read would find it, before Redis gets round to deleting it
// and client tracking names it). No command gives part of a list
// element: LINDEX sends it whole. Over a raw connection (a plain client,
// or each key's node of a cluster) the element is hashed as it streams and
// never held (ReadRaw); through go-redis (a client it cannot dial raw, or
// the cluster client re-reading keys that moved mid-sweep) it is read whole
// first, and a batch's heads are in memory together.
//
// track.HeadTracker remembers which element is next in each queue and
// since when (the first sweep that saw it next). An element next for
// longer than max_wait means nobody is taking work: the queue counts in
// slot_queues_stalled and its user carries AnomalyKind, so the series cap
// shows it first. A queue the exporter sees for the first time starts its
// wait then, whatever came before. Two elements with equal values (or
// equal 64-bit hashes) in a row read as one that did not move: jobs need
// unique ids, which a reliable queue's LREM-by-value completion requires
// anyway. A wait is never negative when Redis time steps back.
//
// A reliable queue's processing list (BLMOVE queue processing RIGHT LEFT)
// is a list family of its own, with pop_side right: its right end holds
// the oldest job still being worked on, and a job that stays there past
// max_wait belonged to a worker that died. Give the two families match and
// user patterns that keep them apart (a processing list's name usually
// extends its queue's, and SCAN MATCH globs cannot exclude).
//
// used is LLEN: an empty list does not exist in Redis, so a queue that
// drains goes back to 0, and one that never does shows a floor that grows.
// slot_queue_items sums LLEN; slot_queue_head_wait_seconds{user} is the
// longest wait over the user's queues (0 when they are all empty). The
// limit is optional (a queue's capacity); over it is an anomaly.
func init() { register(config.KindList, newList) }

type list struct {
	maxWait int64 // ms
	left    bool
	limit   int64
	heads   *track.HeadTracker
	cur     listGauges
	last    listGauges
	held    map[uint64]listHeld
	gen     uint32
	// withTTL: this sweep reads PTTL, for the expiry of the keys held.
	withTTL bool
}

type listHeld struct {
	user   uint64
	length int64
	head   uint64
	expiry int64 // Redis ms; -1 none
	gen    uint32
}

type listGauges struct {
	items   int64
	stalled int
	// waits is the longest head wait (ms) per user with a non-empty
	// queue, by the user's hash, as the floor tracker knows users.
	waits map[uint64]int64
}

func newList(f *config.Family, _ *config.Sampling) Tracker {
	t := &list{heads: track.NewHeadTracker(), held: map[uint64]listHeld{}}
	t.Reconfigure(f, nil)
	return t
}

func (t *list) Reconfigure(f *config.Family, _ *config.Sampling) {
	t.maxWait, t.left, t.limit = f.MaxWait.Milliseconds(), f.PopSide == config.PopLeft, int64(f.Limit)
}

func (t *list) Limits() track.Limits {
	return track.Limits{Limit: t.limit, OverLimitIsAnomaly: true}
}

func (t *list) Begin(sw *Sweep) redisread.Reads {
	t.heads.Begin()
	t.cur = listGauges{waits: map[uint64]int64{}}
	t.gen++
	t.withTTL = sw.Hold
	return &listReads{left: t.left, withTTL: t.withTTL}
}

func (t *list) Apply(sw *Sweep, k Key) {
	head, _ := k.Read.Extra.(uint64)
	switch {
	case !sw.Hold:
	case !t.withTTL || k.Read.PTTL == pttlUnknown:
		delete(t.held, k.Hash)
	default:
		t.held[k.Hash] = listHeld{user: k.UserHash, length: k.Read.Value, head: head, expiry: expiryOf(k.Read.PTTL, sw.Now), gen: t.gen}
	}
	t.apply(sw, k.Hash, k.UserHash, k.User, k.Read.Value, head)
}

func (t *list) Held(h uint64) bool { _, ok := t.held[h]; return ok }

func (t *list) Forget(h uint64) { delete(t.held, h) }

// Replay: a queue's length and head change only by writes (a pop, a
// push, a move); the head's wait grows with time; a held expiry already
// passed is a queue gone.
func (t *list) Replay(sw *Sweep) int {
	n := 0
	for h, e := range t.held {
		if e.gen == t.gen {
			continue
		}
		if _, ok := sw.Carry[uint32(h)]; ok {
			continue
		}
		if _, ok := remaining(e.expiry, sw.Now); !ok {
			delete(t.held, h)
			continue
		}
		e.gen = t.gen
		t.held[h] = e
		t.apply(sw, h, e.user, "", e.length, e.head)
		n++
	}
	return n
}

func (t *list) apply(sw *Sweep, keyHash, userHash uint64, user string, length int64, head uint64) {
	wait := t.heads.Observe(keyHash, head, sw.Now)
	t.cur.items += length
	var flags uint8
	if wait > t.maxWait {
		t.cur.stalled++
		flags |= track.AnomalyKind
	}
	if w, ok := t.cur.waits[userHash]; !ok || wait > w {
		t.cur.waits[userHash] = wait
	}
	sw.Floor.Add(userHash, user, length, flags)
}

func (t *list) End(sw *Sweep, _, deferEnds bool) Ended {
	t.last = t.cur
	if !deferEnds {
		t.heads.Sweep(sw.Carry)
		dropUnseen(t.held, t.gen, sw.Carry, func(e listHeld) uint32 { return e.gen })
	}
	return Ended{}
}

func (t *list) Publish(f *snapshot.Family) {
	f.Gauges = append(f.Gauges,
		gauge(snapshot.QueueItems, float64(t.last.items)),
		gauge(snapshot.QueuesStalled, float64(t.last.stalled)))
}

func (t *list) UserExtra(v track.UserView) []snapshot.Value {
	return []snapshot.Value{gauge(snapshot.QueueHeadWait, float64(t.last.waits[v.ID])/1000)}
}

// listReads reads a queue's length and the element at its pop side:
// LLEN, and LINDEX -1 (right) or 0 (left), pipelined, and with withTTL
// PTTL. KeyRead.Value is the length, Extra the xxhash of the next element
// (a uint64). A list emptied between the reads is gone.
type listReads struct {
	left, withTTL bool
}

// ReadRaw is Read over a raw connection, where the next element is hashed
// as it streams and never held: eight queues with 50 MB heads took the
// exporter's RSS from 100 to 455 MB for a sweep read through go-redis.
func (l *listReads) ReadRaw(ctx context.Context, c *resp.Conn, keys []string, reads []redisread.KeyRead) error {
	index := "-1"
	if l.left {
		index = "0"
	}
	for _, k := range keys {
		c.Queue("LLEN", k)
		c.Queue("LINDEX", k, index)
		if l.withTTL {
			c.Queue("PTTL", k)
		}
	}
	if err := c.Flush(ctx); err != nil {
		return err
	}
	stop, err := c.Deadline(ctx)
	defer stop()
	if err != nil {
		return err
	}
	d := xxhash.New()
	for i, k := range keys {
		r := &reads[i]
		r.Key = k
		n, lenErr, err := c.ReadInt()
		if err != nil {
			return c.Fail(ctx, err)
		}
		d.Reset()
		none, headErr, err := c.ReadBulkTo(d)
		if err != nil {
			return c.Fail(ctx, err)
		}
		var pttl int64
		var pttlErr []byte
		if l.withTTL {
			if pttl, pttlErr, err = c.ReadInt(); err != nil {
				return c.Fail(ctx, err)
			}
			if pttlErr != nil && redisread.CommandRefused(string(pttlErr)) {
				pttl, pttlErr = pttlUnknown, nil
			}
		}
		// As Read judges them: the first error reply, else LINDEX's nil.
		judged := false
		for _, e := range [][]byte{lenErr, headErr, pttlErr} {
			if e != nil {
				if err := r.Judge(resp.ReplyError(e)); err != nil {
					return err
				}
				judged = true
				break
			}
		}
		switch {
		case judged:
		case none, n == 0, l.withTTL && pttl == -2:
			r.Status = redisread.Gone
		default:
			r.PTTL = pttl
			r.Value = n
			r.Extra = d.Sum64()
		}
	}
	return nil
}

func (l *listReads) Read(ctx context.Context, c redis.Cmdable, keys []string, reads []redisread.KeyRead) error {
	index := int64(-1)
	if l.left {
		index = 0
	}
	pipe := c.Pipeline()
	lens := make([]*redis.IntCmd, len(keys))
	heads := make([]*redis.StringCmd, len(keys))
	var ttls []*redis.DurationCmd
	if l.withTTL {
		ttls = make([]*redis.DurationCmd, len(keys))
	}
	for i, k := range keys {
		lens[i] = pipe.LLen(ctx, k)
		heads[i] = pipe.LIndex(ctx, k, index)
		if l.withTTL {
			ttls[i] = pipe.PTTL(ctx, k)
		}
	}
	_, _ = pipe.Exec(ctx)
	for i, k := range keys {
		r := &reads[i]
		r.Key = k
		n, err := lens[i].Result()
		var head string
		if err == nil {
			head, err = heads[i].Result()
		}
		if err == nil && l.withTTL {
			r.PTTL, err = heldPTTL(ttls[i])
		}
		if err != nil {
			// redis.Nil from LINDEX: no element, no list.
			if err := r.Judge(err); err != nil {
				return err
			}
			continue
		}
		if n == 0 || l.withTTL && r.PTTL == -2 {
			r.Status = redisread.Gone
			continue
		}
		r.Value = n
		r.Extra = xxhash.Sum64String(head)
	}
	return nil
}
