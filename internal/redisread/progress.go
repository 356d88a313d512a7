package redisread

import "math/bits"

// Progress is how far the read of one node (or one list of keys) has got:
// what has been handed to out, batch by batch. A sweep cut off at its
// timeout keeps it, and the next attempt passes it back to go on from
// there. Only the reader of that node writes it, as it hands each batch
// over; the caller reads it once the reader has returned.
type Progress struct {
	// Cursor is the SCAN cursor of the page being handed over (0 at the
	// start), and Sent the keys of that page handed over already: SCAN
	// from Cursor again may return the page with keys added or missing,
	// so the keys are named rather than counted. Nor does it end where
	// it ended: keys added in its part of the table (or a table grown
	// to twice the buckets) end it sooner, and the page after it holds
	// keys of Sent. So Sent is kept, and skipped, until the walk passes
	// SentUntil, the cursor that page ended at (0: the end of the walk).
	Cursor    uint64
	Sent      map[string]struct{}
	SentUntil uint64
	// Offset is how many keys of a list (ReadKeysFrom) have been handed
	// over, after the shard's filter.
	Offset int
	// Done is set once every key has been handed over.
	Done bool
	// Keys counts the keys handed over, in all, and Pages the SCAN pages
	// walked through, with keys or none: a walk through a keyspace that
	// holds few of the family's keys goes on for long without handing
	// any over.
	Keys  int
	Pages int
}

// page is a SCAN page, or a slice of a list of keys (scan false), on its
// way to the reads.
type page struct {
	keys         []string
	scan         bool
	cursor, next uint64 // the cursor that returned keys, and the one after
}

// handed records that chunk, a part of pg, has gone to out; last: the
// page's final part.
func (pos *Progress) handed(pg *page, chunk []string, last bool) {
	if pos == nil {
		return
	}
	pos.Keys += len(chunk)
	if !pg.scan {
		pos.Offset += len(chunk)
		return
	}
	if last {
		pos.Pages++
		pos.Cursor = pg.next
		pos.Done = pg.next == 0
		if pos.Done || !scanBefore(pg.next, pos.SentUntil) {
			pos.Sent, pos.SentUntil = nil, 0
		}
		return
	}
	pos.Cursor = pg.cursor
	switch {
	case pos.Sent == nil:
		pos.Sent, pos.SentUntil = make(map[string]struct{}, len(pg.keys)), pg.next
	case scanBefore(pos.SentUntil, pg.next):
		pos.SentUntil = pg.next
	}
	for _, k := range chunk {
		pos.Sent[k] = struct{}{}
	}
}

// scanBefore reports whether SCAN's walk reaches cursor a before b; a
// cursor 0 is the end of the walk here, never its start. Redis steps the
// cursor by adding one to its bits reversed, so that a later cursor has
// the larger reversed bits whatever the table's size (a key's bucket in
// a table twice as large is reached within the range of its bucket in
// the smaller one): the order holds across a table that grew between
// two attempts.
func scanBefore(a, b uint64) bool {
	switch {
	case a == 0:
		return false
	case b == 0:
		return true
	}
	return bits.Reverse64(a) < bits.Reverse64(b)
}
