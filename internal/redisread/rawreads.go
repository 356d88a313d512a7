package redisread

import (
	"context"
	"fmt"
	"slices"

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
// plain client, or on each key's node of a cluster; else through go-redis.
func (rd *Reader) readBatch(ctx context.Context, c redis.Cmdable, p *Plan, keys []string) ([]KeyRead, error) {
	rr, ok := p.Reads.(RawReads)
	if !ok {
		return p.read(ctx, c, keys)
	}
	if cc, ok := c.(*redis.ClusterClient); ok {
		return rd.readRawByNode(ctx, cc, p, rr, keys)
	}
	cl := resp.Client(c)
	if cl == nil {
		return p.read(ctx, c, keys)
	}
	return rd.readRaw(ctx, cl, p, rr, keys)
}

// readRaw reads one batch over a raw connection to cl.
func (rd *Reader) readRaw(ctx context.Context, cl *redis.Client, p *Plan, rr RawReads, keys []string) ([]KeyRead, error) {
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

// readRawByNode reads a batch of a cluster's keys by name (the keys read
// every sweep: a literal match, keys skipped before) raw, each key from the
// node the cluster client would send it to, so that a list's head of any
// size streams there too rather than being held whole by go-redis. A key
// whose slot moved meanwhile answers MOVED or ASK, which the sweep's
// settling reads again through the cluster client. Where a node cannot be
// dialled raw, or the slots are not known, the batch goes through go-redis.
func (rd *Reader) readRawByNode(ctx context.Context, cc *redis.ClusterClient, p *Plan, rr RawReads, keys []string) ([]KeyRead, error) {
	replica := cc.Options().ReadOnly
	var nodes []*redis.Client
	of := make([]int, len(keys)) // the index in nodes of each key's node
	for i, k := range keys {
		var n *redis.Client
		var err error
		if replica {
			n, err = cc.SlaveForKey(ctx, k)
		} else {
			n, err = cc.MasterForKey(ctx, k)
		}
		if err != nil || resp.Client(n) == nil {
			return p.read(ctx, cc, keys)
		}
		j := slices.Index(nodes, n)
		if j < 0 {
			j = len(nodes)
			nodes = append(nodes, n)
		}
		of[i] = j
	}
	reads := make([]KeyRead, len(keys))
	for j, n := range nodes {
		var ks []string
		var at []int
		for i, k := range keys {
			if of[i] == j {
				ks, at = append(ks, k), append(at, i)
			}
		}
		got, err := rd.readRaw(ctx, n, p, rr, ks)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", n.Options().Addr, err)
		}
		for x, i := range at {
			reads[i] = got[x]
		}
	}
	return reads, nil
}
