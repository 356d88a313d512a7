package kind

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/cespare/xxhash/v2"
	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/redisread"
	"github.com/slotexporter/slot_exporter/internal/resp"
)

// celery reads Celery's Redis broker as kombu's Redis transport writes it
// (kombu 5.2.4 with Celery 5.2.6, kombu/transport/redis.py):
//
//   - _kombu.binding.<exchange>, a set whose members are routing key,
//     pattern and queue joined by "\x06\x16": the discovery keys. The
//     fanout exchanges celery uses for events and remote control
//     (celeryev, *.pidbox) are pub/sub, not lists, and are passed over;
//   - each queue is a list (LPUSH to publish, BRPOP from the right: the
//     next message is at index -1), with one more list per priority step
//     above 0: <queue>\x06\x16<3|6|9>;
//   - unacked, a hash delivery tag -> JSON [message, exchange, routing
//     key], and unacked_index, a zset delivery tag -> delivery time (Unix
//     seconds): every message a worker took and has not acked, prefetched
//     ones included, and the running task itself with acks_late.
//
// A worker SIGKILLed leaves its messages in unacked. Only a worker
// restores them, at its start and about every 100 s after, and only those
// delivered more than visibility_timeout ago (1 h by default); a worker
// that shuts down cleanly restores its own at once. So an unacked message
// delivered more than visibility_timeout ago is orphaned (its worker died
// or hangs); any other is active. Messages carry no enqueue time: a
// queue's waiting age is how long its next message has been next, as the
// exporter saw it (the list kind's head wait).
//
// Once a sweep, one batch of discovery keys also reads the unacked
// index (its celeryUnackedScan oldest entries) and their messages, which
// are counted under the queue their routing key names. Beyond that many,
// unacked messages are not counted. An index entry whose message is
// missing, or a message that is not the JSON kombu writes, is skipped and
// counted as bad_value; one whose exchange, routing key, or header id,
// task or retries is longer than the exporter reads (the messages stream,
// celery_unacked.go), as value_too_large, and so is an index entry whose
// delivery tag is (celeryIndex), its message not read, and a binding
// member longer than redisread.MaxValueBytes (celeryBindings).
func init() {
	registerFramework(config.KindCelery, func() frameworkLayout {
		return &celeryLayout{heads: map[string]celeryHead{}, stream: newStreamReader()}
	})
}

const (
	celerySep         = "\x06\x16"
	celeryUnackedScan = 1000
)

var celeryPriorities = []string{"", celerySep + "3", celerySep + "6", celerySep + "9"}

type celeryLayout struct {
	visibility int64 // ms
	watches    func(string) bool

	mu     sync.Mutex
	heads  map[string]celeryHead // by queue: its next message, and since when
	stream *streamReader
}

type celeryHead struct {
	hash  uint64
	since int64 // Redis ms
}

func (l *celeryLayout) configure(f *config.Family) {
	l.visibility = f.VisibilityTimeout.Milliseconds()
	fam := *f
	l.watches = fam.Watches
}

func (l *celeryLayout) reads(now int64) redisread.Reads { return &celeryReads{l: l, now: now} }

func (l *celeryLayout) settle(reads []*FrameworkRead, _ bool) int64 {
	seen := map[string]bool{}
	for _, fr := range reads {
		for _, q := range fr.Queues {
			seen[q.Queue] = true
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for q := range l.heads {
		if !seen[q] {
			delete(l.heads, q)
		}
	}
	return 0
}

func (l *celeryLayout) registersWorkers() bool { return false }
func (l *celeryLayout) recovery() string {
	return "Celery (kombu's Redis transport) restores an unacked message to its queue only from a worker: when one starts, and about every 100 s after, for messages delivered more than visibility_timeout ago; the task then runs again. Start a worker that consumes this queue; nothing else restores them."
}

// headSince is when the queue's next message (hash h) became next, as
// first seen at now; an empty queue (ok false) forgets it.
func (l *celeryLayout) headSince(queue string, h uint64, ok bool, now int64) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !ok {
		delete(l.heads, queue)
		return -1
	}
	if cur, seen := l.heads[queue]; seen && cur.hash == h {
		return cur.since
	}
	l.heads[queue] = celeryHead{hash: h, since: now}
	return now
}

type celeryReads struct {
	l   *celeryLayout
	now int64
	// unacked: unacked_index and unacked are read once a sweep, beside
	// bindings whose read carries them into the sweep
	// (framework_shared.go).
	once sharedOnce
}

type celeryQueue struct {
	q    QueueJobs
	lens []*redis.IntCmd
	// by are the binding reads that name the queue, each carrying its
	// figures: a list answered MOVED has them all read again.
	by []int
	// heads are the xxhash of each priority list's next message, hashed
	// as it streams: a message is as large as its task's arguments.
	heads [4]struct {
		hash uint64
		ok   bool
	}
}

func (c *celeryReads) Read(ctx context.Context, cl redis.Cmdable, keys []string, reads []redisread.KeyRead) error {
	bindings := make([]*celeryBindings, len(keys))
	round := make([]*streamedRead, len(keys), len(keys)+1)
	for i, k := range keys {
		reads[i].Key = k
		bindings[i] = readCeleryBindings(k)
		round[i] = bindings[i].read
	}
	var index *celeryIndex
	var shared *SharedRead
	carried := false
	if c.once.claim() {
		// Its tags are not needed before round 3: read beside the
		// bindings, it adds no round of its own.
		index = readCeleryIndex()
		round = append(round, index.read)
		shared = &SharedRead{once: &c.once}
		defer func() {
			if !carried {
				c.once.release()
			}
		}()
	}
	// Round 1, streamed: the bindings, and unacked_index when this
	// batch claimed it. Each read keeps its own members, so a cluster's
	// nodes are read at once, as go-redis's pipeline read the bindings.
	if err := c.l.stream.readApart(ctx, cl, round); err != nil {
		return err
	}

	// Round 2: the lengths of each queue's lists.
	pipe := cl.Pipeline()
	frs := make([]*FrameworkRead, len(keys))
	queues := map[string]*celeryQueue{}
	byRoute := map[string]string{} // exchange + sep + routing key -> queue
	carrier := -1                  // the read the unacked figures go with
	for i, k := range keys {
		r := &reads[i]
		b := bindings[i]
		if err := b.read.Err; err != nil {
			if err := r.Judge(err); err != nil {
				return err
			}
			continue
		}
		exchange := strings.TrimPrefix(k, "_kombu.binding.")
		fr := &FrameworkRead{}
		frs[i] = fr
		if carrier < 0 {
			carrier = i
		}
		if exchange == "celeryev" || strings.HasSuffix(exchange, ".pidbox") {
			continue // fanout: pub/sub, no lists
		}
		fr.Bad = append(fr.Bad, b.long...)
		for _, m := range b.members {
			parts := strings.Split(m, celerySep)
			if len(parts) != 3 || parts[2] == "" {
				fr.Bad = append(fr.Bad, BadData{Key: k, Reason: redisread.SkipBadValue,
					Detail: fmt.Sprintf("binding %s is not routing key, pattern and queue", celeryQuote(m, int64(len(m))))})
				continue
			}
			name := parts[2]
			byRoute[exchange+celerySep+parts[0]] = name
			if !c.l.watches(name) {
				continue
			}
			if q := queues[name]; q != nil {
				if q.by[len(q.by)-1] != i {
					q.by = append(q.by, i)
					fr.Queues = append(fr.Queues, QueueJobs{Queue: name})
				}
				continue
			}
			q := &celeryQueue{q: NewQueueJobs(name), by: []int{i}}
			for _, p := range celeryPriorities {
				q.lens = append(q.lens, pipe.LLen(ctx, name+p))
			}
			queues[name] = q
			fr.Queues = append(fr.Queues, QueueJobs{Queue: name}) // filled below
		}
	}
	_, _ = pipe.Exec(ctx)

	// Round 3, streamed: each queue's next message, and the unacked ones.
	var streamed []*streamedRead
	var unacked *streamedRead
	unackedQueues := map[string]*QueueJobs{}
	if index != nil && carrier >= 0 {
		ok, err := partJudge(&reads[carrier], &shared.FrameworkRead, "unacked_index", index.read.Err)
		if err != nil {
			return err
		}
		if ok {
			shared.Bad = append(shared.Bad, index.long...)
		}
		if tags := index.tags; ok && len(tags) > 0 {
			scan := newCeleryUnackedScan()
			unacked = streamHMGet("unacked", tags, scan, func(i int, found bool) {
				c.unacked(&shared.FrameworkRead, unackedQueues, byRoute, tags[i], index.delivered[i], scan, found)
			})
			streamed = append(streamed, unacked)
		}
	}
	d := xxhash.New()
	for name, q := range queues {
		for j := range q.lens {
			key := name + celeryPriorities[j]
			var part redisread.KeyRead
			ok, err := partJudge(&part, frs[q.by[0]], key, q.lens[j].Err())
			if err != nil {
				return err
			}
			if part.Status == redisread.Missed {
				// Every read that carries the queue is read again:
				// one left carrying it unread would count it empty.
				for _, i := range q.by {
					reads[i].Status = redisread.Missed
				}
			}
			if ok && q.lens[j].Val() > 0 {
				q.q.Jobs[JobWaiting] += q.lens[j].Val()
				head := &q.heads[j]
				// Its error, if any, is the list's, judged above.
				streamed = append(streamed, streamLIndex(key, -1, d, func() { head.hash, head.ok = d.Sum64(), true }))
			}
		}
	}
	if err := c.l.stream.read(ctx, cl, streamed); err != nil {
		return err
	}
	if unacked != nil {
		// Its messages were counted as they streamed; an error reply
		// (a hash of another type) brought none, and is judged here.
		if _, err := partJudge(&reads[carrier], &shared.FrameworkRead, "unacked", unacked.Err); err != nil {
			return err
		}
	}
	for name, q := range queues {
		var head uint64
		haveHead := false
		for _, h := range q.heads {
			if h.ok {
				// The highest priority's next message is the next one.
				head, haveHead = h.hash, true
				break
			}
		}
		q.q.Waited(c.l.headSince(name, head, haveHead, c.now))
	}
	for i, fr := range frs {
		if fr == nil || reads[i].Status != redisread.OK {
			continue
		}
		for j := range fr.Queues {
			fr.Queues[j] = queues[fr.Queues[j].Queue].q
		}
		reads[i].Extra = fr
	}
	if shared != nil && carrier >= 0 && reads[carrier].Status == redisread.OK {
		for _, q := range unackedQueues {
			shared.Queues = append(shared.Queues, *q)
		}
		frs[carrier].Shared = shared
		carried = true
	}
	return nil
}

// celeryBindings is the read of one binding set: its members up to
// redisread.MaxValueBytes, and those longer. A member names a queue,
// whose name goes back to Redis (LLEN, LINDEX), or when malformed goes
// into a log line: read whole, a member of any length was held every
// sweep, then sent back or logged whole (a 32 MB one allocated 235 MB,
// 135 MB when malformed). So the set streams, each member kept up to the
// bound of a lock's token; a longer one is value_too_large, not used.
type celeryBindings struct {
	read    *streamedRead
	members []string
	long    []BadData
}

func readCeleryBindings(key string) *celeryBindings {
	b := &celeryBindings{}
	m := resp.NewCapped(redisread.MaxValueBytes)
	b.read = streamSMembers(key, m, func() {
		if m.Cut() {
			b.long = append(b.long, BadData{Key: key, Reason: redisread.SkipValueTooLarge,
				Detail: fmt.Sprintf("binding %s is more than the %d bytes read (kombu's are a routing key, pattern and queue name): not used",
					celeryQuote(string(m.Kept()[:32]), m.Len()), redisread.MaxValueBytes)})
			return
		}
		b.members = append(b.members, string(m.Kept()))
	})
	return b
}

// celeryQuote names a member of n bytes, of which s is the first, in a
// log line: whole up to 32 bytes, else by its first 32 and its length,
// which tell one from another without a line of any length.
func celeryQuote(s string, n int64) string {
	if n <= 32 {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%q... of %d bytes", s[:32], n)
}
