package redisread

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/resp"
)

// RawReads is Reads that can also read over a raw connection (package
// resp), on a plain client: what go-redis would read whole, such as a
// list's head of any size, is hashed as it streams. ReadRaw owns the
// connection's exchange: it writes the batch and reads every reply, or
// marks the connection broken.
type RawReads interface {
	Reads
	ReadRaw(ctx context.Context, c *resp.Conn, keys []string, reads []KeyRead) error
}

// readBatch reads one batch: over a raw connection for RawReads on a
// plain client, else through go-redis.
func (rd *Reader) readBatch(ctx context.Context, c redis.Cmdable, p *Plan, keys []string) ([]KeyRead, error) {
	rr, ok := p.Reads.(RawReads)
	cl := resp.Client(c)
	if !ok || cl == nil {
		return p.read(ctx, c, keys)
	}
	conn, err := rd.pool.Get(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("sweep connection: %w", err)
	}
	defer rd.pool.Put(cl, conn)
	reads := make([]KeyRead, len(keys))
	at := p.at()
	if err := rr.ReadRaw(ctx, conn, keys, reads); err != nil {
		conn.MarkBroken()
		return nil, err
	}
	p.stamp(reads, at)
	return reads, nil
}
