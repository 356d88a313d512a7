package redisread

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/slotexporter/slot_exporter/internal/resp"
)

// replayConn replays recorded replies.
type replayConn struct {
	net.Conn
	r *bytes.Reader
}

func (c *replayConn) Read(p []byte) (int, error)      { return c.r.Read(p) }
func (c *replayConn) SetDeadline(time.Time) error     { return nil }
func (c *replayConn) SetReadDeadline(time.Time) error { return nil }

// BenchmarkParseReplies parses the replies to one batch of 1000 keys
// (ZSCAN of 1.6 UUID members on average, then PTTL) and hashes
// every member, as the raw reader does, without Redis. Reported per key.
func BenchmarkParseReplies(b *testing.B) {
	const keys = 1000
	var replies bytes.Buffer
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprintf("joishi:streams:{%012d}", i)
		n := 1 + i%5/2
		fmt.Fprintf(&replies, "*2\r\n$1\r\n0\r\n*%d\r\n", 2*n)
		for j := range n {
			fmt.Fprintf(&replies, "$36\r\n%08x-0000-4000-8000-%012x\r\n$13\r\n%d\r\n", i, j, 1764532123456+j)
		}
		replies.WriteString(":239000\r\n")
	}
	raw := replies.Bytes()
	reads := make([]KeyRead, keys)
	ctx := context.Background()
	// Each round parses every byte of raw, leaving the connection's
	// buffer empty: rewinding the replay starts the next one.
	nc := &replayConn{r: bytes.NewReader(raw)}
	var rd Reader
	c := resp.NewConn(nc, 0)
	b.SetBytes(int64(len(raw)) / keys)
	b.ResetTimer()
	for i := 0; i < b.N; i += keys {
		nc.r.Reset(raw)
		clear(reads)
		if _, _, err := rd.recvSlotReads(ctx, c, names, 1000, false, reads); err != nil {
			b.Fatal(err)
		}
	}
}
