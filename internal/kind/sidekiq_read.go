package kind

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/redisread"
	"github.com/slotexporter/slot_exporter/internal/resp"
)

// sidekiqScheduledRead bounds how many entries of `schedule` and of
// `retry` (the first due) one sweep reads to attribute them to their
// queues; the rest count under the queue of the last entry read, so that
// the family's totals stay exact.
const sidekiqScheduledRead = 1000

// sidekiqRead is one sweep's read of a Sidekiq layout under a namespace
// (redis-namespace's "<ns>:", empty without one), for one discovery key
// (the `queues` set).
type sidekiqRead struct {
	Queues map[string]*QueueJobs
	// Procs is every process in `processes`, and every remembered one
	// with jobs to judge.
	Procs map[string]sidekiqSighting
}

// queue returns q's figures, made on first use: a queue may show up only
// in a work entry or a scheduled job.
func (s *sidekiqRead) queue(q string) *QueueJobs {
	j := s.Queues[q]
	if j == nil {
		nj := NewQueueJobs(q)
		j = &nj
		s.Queues[q] = j
	}
	return j
}

// readSidekiq reads the layout in three pipelined rounds: the sets and
// the sizes of `schedule` and `retry`; per queue LLEN, per process the
// heartbeat's beat; and, streamed over raw connections by sr (jobs'
// JSON, of any size), per queue LINDEX -1 (Sidekiq pushes left and
// BRPOPs: the right end is the oldest), per process the work hash (both
// names), and the first entries of `schedule` and `retry`. queues
// overrides discovery. The discovery key's own error is judged on r; the
// other keys' through partJudge, once each.
func readSidekiq(ctx context.Context, c redis.Cmdable, sr *streamReader, r *redisread.KeyRead, fr *FrameworkRead, ns string, queues, remembered []string, now, maxWait int64) (*sidekiqRead, error) {
	out := &sidekiqRead{Queues: map[string]*QueueJobs{}, Procs: map[string]sidekiqSighting{}}
	scans := newSidekiqScans()
	pipe := c.Pipeline()
	qset := pipe.SMembers(ctx, r.Key)
	pset := pipe.SMembers(ctx, ns+"processes")
	type zread struct {
		key              string
		card, overdue    *redis.IntCmd
		entries          *streamedRead
		nOverdue, nSched int64
		ok               bool
		last             string // the queue of the last entry attributed
	}
	due := "-inf"
	if now-maxWait > 0 {
		due = fmt.Sprintf("(%d.%03d", (now-maxWait)/1000, (now-maxWait)%1000)
	}
	dueBefore := float64(now-maxWait) / 1000
	zs := []*zread{{key: ns + "schedule"}, {key: ns + "retry"}}
	for _, z := range zs {
		z.card, z.overdue = pipe.ZCard(ctx, z.key), pipe.ZCount(ctx, z.key, "-inf", due)
	}
	_, _ = pipe.Exec(ctx)
	if err := qset.Err(); err != nil {
		return nil, r.Judge(err)
	}
	if queues == nil {
		queues = qset.Val()
	}
	listed := map[string]bool{}
	if ok, err := partJudge(r, fr, ns+"processes", pset.Err()); err != nil {
		return nil, err
	} else if ok {
		for _, p := range pset.Val() {
			listed[p] = true
		}
	}
	var streamed []*streamedRead
	for _, z := range zs {
		ok, err := partJudge(r, fr, z.key, firstErr(z.card.Err(), z.overdue.Err()))
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		z.ok = true
		z.nOverdue, z.nSched = z.overdue.Val(), z.card.Val()-z.overdue.Val()
		z.entries = streamZRange(z.key, sidekiqScheduledRead, scans.entry, func(score float64) {
			q, err := sidekiqEntryQueue(scans.entry)
			if err == nil && q == "" {
				err = errors.New("it names no queue")
			}
			if err != nil {
				fr.Bad = append(fr.Bad, BadData{Key: z.key, Reason: skipReasonOf(err),
					Detail: fmt.Sprintf("an entry due at %.3f is not a job's JSON (%v): counted, not attributed", score, err)})
				return
			}
			z.last = q
			if score < dueBefore {
				out.queue(q).Jobs[JobOverdue]++
				z.nOverdue--
			} else {
				out.queue(q).Jobs[JobScheduled]++
				z.nSched--
			}
		})
		streamed = append(streamed, z.entries)
	}

	ids := make([]string, 0, len(listed)+len(remembered))
	for p := range listed {
		ids = append(ids, p)
	}
	for _, p := range remembered {
		if !listed[p] {
			ids = append(ids, p)
		}
	}
	pipe = c.Pipeline()
	lens := make([]*redis.IntCmd, len(queues))
	for i, q := range queues {
		lens[i] = pipe.LLen(ctx, ns+"queue:"+q)
	}
	beats := make([]*redis.StringCmd, len(ids))
	for i, id := range ids {
		beats[i] = pipe.HGet(ctx, ns+id, "beat")
	}
	_, _ = pipe.Exec(ctx)
	for i, q := range queues {
		key := ns + "queue:" + q
		qj := out.queue(q)
		if ok, err := partJudge(r, fr, key, lens[i].Err()); err != nil {
			return nil, err
		} else if !ok || lens[i].Val() == 0 {
			continue
		}
		qj.Jobs[JobWaiting] += lens[i].Val()
		// Its error, if any, is the list's, judged above: a list emptied
		// since has no next job.
		streamed = append(streamed, streamLIndex(key, -1, scans.queued, func() {
			at, ok, err := sidekiqEnqueuedAt(scans.queued)
			switch {
			case err != nil:
				fr.Bad = append(fr.Bad, BadData{Key: key, Reason: skipReasonOf(err), Detail: "the next job: " + err.Error()})
			case ok:
				qj.Waited(at)
			}
		}))
	}
	sightings := make([]sidekiqSighting, len(ids))
	works := make([][2]*streamedRead, len(ids))
	// A work hash's field (a thread id) names an entry in a log line:
	// its first bytes do.
	field := resp.NewCapped(256)
	for i, id := range ids {
		for k, suffix := range [2]string{":workers", ":work"} {
			key := ns + id + suffix
			works[i][k] = streamHGetAll(key, field, scans.work, func() {
				j, err := sidekiqWork(scans.work)
				if err != nil {
					fr.Bad = append(fr.Bad, BadData{Key: key, Reason: skipReasonOf(err), Detail: fmt.Sprintf("thread %s: %v", cappedText(field), err)})
					return
				}
				if sightings[i].Work == nil {
					sightings[i].Work = map[string]sidekiqJob{}
				}
				sightings[i].Work[j.JID] = j
			})
			streamed = append(streamed, works[i][k])
		}
	}
	if err := sr.read(ctx, c, streamed); err != nil {
		return nil, err
	}
	for _, z := range zs {
		if !z.ok {
			continue
		}
		// The entries' error is the key's, judged above with its
		// sizes; the ones not read count under the last queue read.
		if z.entries.Err == nil && z.last != "" {
			out.queue(z.last).Jobs[JobOverdue] += max(z.nOverdue, 0)
			out.queue(z.last).Jobs[JobScheduled] += max(z.nSched, 0)
		}
	}
	for i, id := range ids {
		s := &sightings[i]
		s.Listed = listed[id]
		beat, err := beats[i].Result()
		if ok, ferr := partJudge(r, fr, ns+id, err); ferr != nil {
			return nil, ferr
		} else if ok {
			s.Heartbeat = true
			if s.Beat, err = parseSidekiqBeat(beat); err != nil {
				fr.Bad = append(fr.Bad, BadData{Key: ns + id, Reason: redisread.SkipBadValue, Detail: err.Error()})
			}
		} else if err != nil && !isNil(err) {
			// Unreadable is not gone: never judged lost by it.
			s.Heartbeat = true
		}
		for k, w := range works[i] {
			key := ns + id + [2]string{":workers", ":work"}[k]
			if _, err := partJudge(r, fr, key, w.Err); err != nil {
				return nil, err
			}
		}
		out.Procs[id] = *s
		switch {
		case s.Listed && s.Heartbeat:
			fr.Workers[WorkerLive]++
		case s.Listed:
			fr.Workers[WorkerDead]++
		}
	}
	return out, nil
}

// skipReasonOf is the skip reason of a job's JSON the exporter could not
// use: value_too_large for a field longer than it reads, else bad_value.
func skipReasonOf(err error) redisread.SkipReason {
	if errors.Is(err, errJSONFieldTooLarge) {
		return redisread.SkipValueTooLarge
	}
	return redisread.SkipBadValue
}
