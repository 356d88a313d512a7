package redisread

// Progress is how far the read of one node (or one list of keys) has got:
// what has been handed to out, batch by batch. A sweep cut off at its
// timeout keeps it, and the next attempt passes it back to go on from
// there. Only the reader of that node writes it, as it hands each batch
// over; the caller reads it once the reader has returned.
type Progress struct {
	// Cursor is the SCAN cursor of the page being handed over (0 at the
	// start), and Sent the keys of that page handed over already: SCAN
	// from Cursor again may return the page with keys added or missing,
	// so the keys are named rather than counted.
	Cursor uint64
	Sent   map[string]struct{}
	// Offset is how many keys of a list (ReadKeysFrom) have been handed
	// over, after the shard's filter.
	Offset int
	// Done is set once every key has been handed over.
	Done bool
	// Keys counts the keys handed over, in all.
	Keys int
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
		pos.Cursor, pos.Sent = pg.next, nil
		pos.Done = pg.next == 0
		return
	}
	if pos.Cursor != pg.cursor || pos.Sent == nil {
		pos.Cursor, pos.Sent = pg.cursor, make(map[string]struct{}, len(pg.keys))
	}
	for _, k := range chunk {
		pos.Sent[k] = struct{}{}
	}
}
