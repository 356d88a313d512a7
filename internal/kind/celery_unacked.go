package kind

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/slotexporter/slot_exporter/internal/jsonfields"
	"github.com/slotexporter/slot_exporter/internal/redisread"
	"github.com/slotexporter/slot_exporter/internal/resp"
)

// An unacked message is kombu's whole message (its body: the task's
// arguments; its headers, argsrepr among them), as large as the task's
// arguments. It streams over a raw connection (streamHMGet) through a
// scan that keeps the few fields read, each up to jsonfields.FieldMax:
// what the sweep makes of it is what decoding the whole value with
// encoding/json made of it, except that a field read longer than that is
// value_too_large rather than read.

// celeryIndex is the read of unacked_index's first celeryUnackedScan
// entries: the delivery tags whose messages are read, with their delivery
// times, and the tags too long to be read. A tag is kombu's UUID (36
// bytes), sent back as an HMGET argument and named in a skip line: a
// member of any length read whole was held, written back to Redis and
// logged every sweep (a 32 MB one allocated 67 MB, 201 MB when its
// message was bad). So the index streams, each tag kept up to
// redisread.MaxValueBytes, as a lock's token is; a longer one is
// value_too_large, its message not read.
type celeryIndex struct {
	read      *streamedRead
	tags      []string
	delivered []float64 // Unix seconds, by tag
	long      []BadData
}

func readCeleryIndex() *celeryIndex {
	ix := &celeryIndex{}
	tag := resp.NewCapped(redisread.MaxValueBytes)
	ix.read = streamZRange("unacked_index", celeryUnackedScan, tag, func(score float64) {
		if tag.Cut() {
			// The first bytes and the delivery time tell one such tag
			// from another in the log, which counts each once.
			ix.long = append(ix.long, BadData{Key: "unacked_index", Reason: redisread.SkipValueTooLarge,
				Detail: fmt.Sprintf("delivery tag %q... is %d bytes, more than the %d read (kombu's are 36): its message in unacked, delivered at %.3f, is not read",
					tag.Kept()[:32], tag.Len(), redisread.MaxValueBytes, score)})
			return
		}
		ix.tags = append(ix.tags, string(tag.Kept()))
		ix.delivered = append(ix.delivered, score)
	})
	return ix
}

// celeryUnacked is what the exporter uses of an unacked value, kombu's
// JSON [message, exchange, routing key]: where it was routed, and the
// message's id, task and retries (Celery protocol 2 headers; a protocol 1
// message has them in its body, and is counted without them).
type celeryUnacked struct {
	Exchange string        `json:"1"`
	Route    string        `json:"2"`
	Headers  celeryHeaders `json:"-"`
}

type celeryHeaders struct {
	ID      string `json:"id"`
	Task    string `json:"task"`
	Retries int64  `json:"retries"`
}

// newCeleryUnackedScan is the scan of one unacked value: exchange and
// routing key kept, the message fed to a scan of its headers, itself fed
// to one of id, task and retries. The headers merge as encoding/json
// decodes a struct-typed field.
func newCeleryUnackedScan() *jsonfields.Scan {
	headers := jsonfields.New([]string{"id", "task", "retries"}, "", nil)
	message := jsonfields.New([]string{"headers"}, "headers", headers).MergeNested()
	return jsonfields.New([]string{"0", "1", "2"}, "0", message)
}

// celeryUnackedOf is the unacked value scanned by s
// (newCeleryUnackedScan); an error says why it cannot be used, with
// errJSONFieldTooLarge for a field longer than the scan keeps.
func celeryUnackedOf(s *jsonfields.Scan) (celeryUnacked, error) {
	var u celeryUnacked
	if err := s.Finish(); err != nil {
		return u, fmt.Errorf("not JSON: %w", err)
	}
	switch {
	case s.Top() != '[':
		return u, fmt.Errorf("a JSON %s, not an array", jsonfields.KindOf(s.Top()))
	case s.Len() != 3:
		return u, fmt.Errorf("an array of %d, not of three", s.Len())
	}
	switch s.TooLong() {
	case "1":
		return u, fmt.Errorf("its exchange is %w (%d bytes)", errJSONFieldTooLarge, jsonfields.FieldMax)
	case "2":
		return u, fmt.Errorf("its routing key is %w (%d bytes)", errJSONFieldTooLarge, jsonfields.FieldMax)
	}
	if err := json.Unmarshal(s.Object(), &u); err != nil {
		return u, err
	}
	msg := s.Nested()
	switch {
	case s.NestedErr() != nil:
		return u, s.NestedErr()
	case s.NestedKind() == 'n':
		return u, nil // as encoding/json reads a null into a struct
	case s.NestedKind() != '{':
		return u, fmt.Errorf("its message is a JSON %s", jsonfields.KindOf(s.NestedKind()))
	case msg.NestedKind() == 0, msg.NestedKind() == 'n':
		return u, nil
	case msg.NestedKind() != '{':
		return u, fmt.Errorf("its message's headers are a JSON %s", jsonfields.KindOf(msg.NestedKind()))
	}
	return u, decodeKept(msg.Nested(), msg.NestedErr(), "header dict", &u.Headers)
}

// unacked counts the unacked message the hash gave for tag (found: it
// has one), scanned by s, under its queue: orphaned when delivered more
// than visibility_timeout ago, else active. Bad data goes into owner,
// the shared part.
func (c *celeryReads) unacked(owner *FrameworkRead, queues map[string]*QueueJobs, byRoute map[string]string, tag string, delivered float64, s *jsonfields.Scan, found bool) {
	if !found {
		owner.Bad = append(owner.Bad, BadData{Key: "unacked", Reason: redisread.SkipBadValue,
			Detail: fmt.Sprintf("delivery tag %s is in unacked_index but not in unacked", tag), Vanished: true})
		return
	}
	u, err := celeryUnackedOf(s)
	if err != nil {
		detail := fmt.Sprintf("delivery tag %s: not kombu's [message, exchange, routing_key] JSON: %v", tag, err)
		if errors.Is(err, errJSONFieldTooLarge) {
			detail = fmt.Sprintf("delivery tag %s: %v", tag, err)
		}
		owner.Bad = append(owner.Bad, BadData{Key: "unacked", Reason: skipReasonOf(err), Detail: detail})
		return
	}
	name := byRoute[u.Exchange+celerySep+u.Route]
	if name == "" {
		name = u.Route
	}
	q := queues[name]
	if q == nil {
		if !c.l.watches(name) {
			return
		}
		// Added to the queue's own figures when the sweep takes them,
		// whichever read has those, or none: a queue may have unacked
		// messages and no binding.
		nq := NewQueueJobs(name)
		q = &nq
		queues[name] = q
	}
	at := int64(delivered * 1000)
	if c.now-at > c.l.visibility {
		q.AddOrphan(Job{ID: u.Headers.ID, Name: u.Headers.Task, Started: at, Attempts: u.Headers.Retries})
	} else {
		q.Jobs[JobActive]++
	}
}
