// Package streamqueue is the cookbook's work queue on a Redis stream with a
// consumer group: every entry is worked on until acknowledged, and the work
// of a consumer that died is taken over by the others.
//
// # Protocol
//
// A stream key holds the entries; a consumer group on it hands each entry to
// one consumer and remembers, per entry, who has it, since when, and how
// many times it was delivered: the group's pending entries list (PEL).
//
//   - Produce: XADD stream * field value ...
//   - Group: XGROUP CREATE stream group $ MKSTREAM, once (CreateGroup).
//   - Consume: XREADGROUP GROUP group consumer COUNT n BLOCK ms STREAMS
//     stream >. Each entry read enters the PEL, delivered once.
//   - Complete: XACK stream group id. The entry leaves the PEL. An entry
//     that is never acknowledged stays pending for ever.
//   - Take over: XAUTOCLAIM stream group consumer min-idle 0-0 COUNT n, run
//     by every consumer now and then. Entries pending for longer than
//     min-idle (their consumer died, or hangs) move to the claiming
//     consumer; each claim adds one to the entry's delivery count.
//   - Delivery counts, idle times and owners are visible with XPENDING
//     (Pending).
//
// # How the recipe fails when it is done otherwise
//
//   - A consumer dies mid-job and nobody runs XAUTOCLAIM: its entries stay
//     pending and idle for ever (stuck), and the consumer stays in the
//     group, dead, with pending work.
//   - A job that kills every worker that takes it (a poison entry): it is
//     claimed and delivered again and again, its delivery count climbing.
//     The fix is dead letters and retries with backoff: the point where the
//     cookbook says to move the queue to a broker built for it.
//   - A group that falls behind: entries are added faster than its
//     consumers take them; the group's lag grows.
//
// slot_exporter's `stream` kind reads XLEN, XINFO GROUPS, XPENDING and
// XINFO CONSUMERS: pending entries, lag, entries idle longer than max_hold
// (stuck), consumers idle with pending work (dead) and entries delivered
// more than max_deliveries times (poison).
//
// Each stream is one key, so in Redis Cluster every command touches one
// slot.
package streamqueue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Stream is one stream and one of its consumer groups. It is safe for
// concurrent use.
type Stream struct {
	c     redis.UniversalClient
	key   string
	group string
}

// Entry is one stream entry.
type Entry struct {
	ID     string
	Fields map[string]string
}

// Pending is one entry of the group's pending entries list.
type Pending struct {
	ID       string
	Consumer string
	// Idle is the time since the entry was last delivered.
	Idle time.Duration
	// Deliveries counts the times it was delivered: 1 for the first read,
	// plus one per claim.
	Deliveries int64
}

// New returns the stream key as seen by group.
func New(c redis.UniversalClient, key, group string) (*Stream, error) {
	if c == nil {
		return nil, errors.New("streamqueue: nil client")
	}
	if key == "" || group == "" {
		return nil, fmt.Errorf("streamqueue: stream %q and group %q must not be empty", key, group)
	}
	return &Stream{c: c, key: key, group: group}, nil
}

// Key returns the stream's key.
func (s *Stream) Key() string { return s.key }

// Group returns the consumer group's name.
func (s *Stream) Group() string { return s.group }

// CreateGroup creates the group, and the stream if it does not exist yet.
// start is the ID after which the group starts reading: "$" for entries
// added from now on, "0" for the whole stream. A group that already exists
// is left as it is.
func (s *Stream) CreateGroup(ctx context.Context, start string) error {
	if start == "" {
		return errors.New("streamqueue: empty start ID")
	}
	err := s.c.XGroupCreateMkStream(ctx, s.key, s.group, start).Err()
	if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
		return fmt.Errorf("streamqueue: create group %s on %s: %w", s.group, s.key, err)
	}
	return nil
}

// Add appends an entry with the given field, value pairs and returns its ID.
func (s *Stream) Add(ctx context.Context, fieldValues ...string) (string, error) {
	if len(fieldValues) == 0 || len(fieldValues)%2 != 0 {
		return "", fmt.Errorf("streamqueue: add to %s: want field, value pairs, got %d strings", s.key, len(fieldValues))
	}
	id, err := s.c.XAdd(ctx, &redis.XAddArgs{Stream: s.key, Values: fieldValues}).Result()
	if err != nil {
		return "", fmt.Errorf("streamqueue: add to %s: %w", s.key, err)
	}
	return id, nil
}

// Read hands consumer up to count entries never delivered to the group
// before, waiting up to block for the first one (block <= 0: do not wait).
// It returns no entries and no error when there was nothing to read.
func (s *Stream) Read(ctx context.Context, consumer string, count int, block time.Duration) ([]Entry, error) {
	if consumer == "" {
		return nil, errors.New("streamqueue: empty consumer name")
	}
	if count < 1 {
		return nil, fmt.Errorf("streamqueue: read count %d must be at least 1", count)
	}
	if block <= 0 {
		block = -1 // go-redis: no BLOCK argument at all; BLOCK 0 would wait for ever
	}
	res, err := s.c.XReadGroup(ctx, &redis.XReadGroupArgs{
		Group: s.group, Consumer: consumer, Streams: []string{s.key, ">"}, Count: int64(count), Block: block,
	}).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("streamqueue: read %s as %s/%s: %w", s.key, s.group, consumer, err)
	}
	var out []Entry
	for _, st := range res {
		out = appendEntries(out, st.Messages)
	}
	return out, nil
}

// Ack acknowledges entries: they leave the pending entries list. It returns
// how many were pending.
func (s *Stream) Ack(ctx context.Context, ids ...string) (int64, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	n, err := s.c.XAck(ctx, s.key, s.group, ids...).Result()
	if err != nil {
		return 0, fmt.Errorf("streamqueue: ack on %s/%s: %w", s.key, s.group, err)
	}
	return n, nil
}

// Claim moves to consumer up to count pending entries that have been idle
// for at least minIdle, whoever had them (XAUTOCLAIM, following its cursor
// through the whole pending list). Each claimed entry's delivery count goes
// up by one. Entries deleted from the stream while pending are dropped from
// the pending list by Redis and not returned.
func (s *Stream) Claim(ctx context.Context, consumer string, minIdle time.Duration, count int) ([]Entry, error) {
	if consumer == "" {
		return nil, errors.New("streamqueue: empty consumer name")
	}
	if count < 1 || minIdle < 0 {
		return nil, fmt.Errorf("streamqueue: claim count %d must be at least 1 and min idle %v not negative", count, minIdle)
	}
	var out []Entry
	start := "0-0"
	for len(out) < count {
		msgs, next, err := s.c.XAutoClaim(ctx, &redis.XAutoClaimArgs{
			Stream: s.key, Group: s.group, Consumer: consumer, MinIdle: minIdle, Start: start, Count: int64(count - len(out)),
		}).Result()
		if err != nil {
			return out, fmt.Errorf("streamqueue: claim on %s/%s for %s: %w", s.key, s.group, consumer, err)
		}
		out = appendEntries(out, msgs)
		if next == "0-0" || next == "" {
			break
		}
		start = next
	}
	return out, nil
}

// Pending lists up to count entries of the group's pending entries list,
// oldest first, with their owner, idle time and delivery count.
func (s *Stream) Pending(ctx context.Context, count int) ([]Pending, error) {
	if count < 1 {
		return nil, fmt.Errorf("streamqueue: pending count %d must be at least 1", count)
	}
	res, err := s.c.XPendingExt(ctx, &redis.XPendingExtArgs{
		Stream: s.key, Group: s.group, Start: "-", End: "+", Count: int64(count),
	}).Result()
	if err != nil {
		return nil, fmt.Errorf("streamqueue: pending on %s/%s: %w", s.key, s.group, err)
	}
	out := make([]Pending, len(res))
	for i, p := range res {
		out[i] = Pending{ID: p.ID, Consumer: p.Consumer, Idle: p.Idle, Deliveries: p.RetryCount}
	}
	return out, nil
}

func appendEntries(out []Entry, msgs []redis.XMessage) []Entry {
	for _, m := range msgs {
		e := Entry{ID: m.ID, Fields: make(map[string]string, len(m.Values))}
		for k, v := range m.Values {
			e.Fields[k] = fmt.Sprint(v)
		}
		out = append(out, e)
	}
	return out
}
