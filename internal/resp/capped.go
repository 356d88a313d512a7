package resp

// Capped is a writer for ReadBulkTo and ReadScored that keeps the first
// Max bytes written to it and counts the rest: a reply shown to a person
// (a queue's next element, a slot-set member on the on-call page) costs
// the same memory at 100 MB as at 100 bytes, and its length is still
// known.
type Capped struct {
	max int
	b   []byte
	n   int64
}

// NewCapped returns a writer that keeps the first max bytes.
func NewCapped(max int) *Capped {
	return &Capped{max: max, b: make([]byte, 0, max)}
}

// Write keeps what fits under the cap; it never fails, so a reply is
// always read to its end.
func (c *Capped) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	if room := c.max - len(c.b); room > 0 {
		c.b = append(c.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// Reset empties the writer for the next reply, keeping its buffer.
func (c *Capped) Reset() { c.b, c.n = c.b[:0], 0 }

// Kept is what was kept: the first Max bytes at most. It is valid until
// the next Write or Reset.
func (c *Capped) Kept() []byte { return c.b }

// Len is how many bytes were written, kept or not.
func (c *Capped) Len() int64 { return c.n }

// Cut reports whether more was written than kept.
func (c *Capped) Cut() bool { return c.n > int64(len(c.b)) }
