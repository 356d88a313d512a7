package sweep

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/slotexporter/slot_exporter/config"
)

// The in-process part of a sweep, without Redis: `go test -run '^$' -bench
// . -benchmem ./collector`. `make bench` measures the whole sweep against
// a real redis-server.

// benchMembers makes n member hashes spread over n/1.6 keys.
func benchMembers(n int) []slotMember {
	ms := make([]slotMember, n)
	for i := range ms {
		ms[i] = slotMember{Hash: xxhash.Sum64String(strconv.Itoa(i)), Score: 2e12}
	}
	return ms
}

// BenchmarkObserve is one steady-state sighting of a member already
// tracked, in a table of 1.6 million: what each member of each sweep
// costs the tracker.
func BenchmarkObserve(b *testing.B) {
	rules := SlotRules{TTL: 120e3, Heartbeat: 20e3, StaleAfter: 40e3, MaxHold: 900e3, Skew: 5e3}
	ms := benchMembers(1_600_000)
	tr := NewMemberTracker()
	now := int64(1e12)
	for _, m := range ms {
		tr.Observe(m.Hash, m.Hash>>7, float64(now+100e3), now, &rules)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		j := i % len(ms)
		if j == 0 {
			now += 5000
		}
		tr.Observe(ms[j].Hash, ms[j].Hash>>7, float64(now+100e3), now, &rules)
	}
}

// BenchmarkTrackerSweep ends nothing and keeps 1.6 million members: the
// pass over the table at the end of every sweep.
func BenchmarkTrackerSweep(b *testing.B) {
	rules := SlotRules{TTL: 120e3, Heartbeat: 20e3, StaleAfter: 40e3, MaxHold: 900e3, Skew: 5e3}
	tr := NewMemberTracker()
	for _, m := range benchMembers(1_600_000) {
		tr.Observe(m.Hash, 1, 2e12, 1e12, &rules)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tr.Sweep(1e12, nil, false)
	}
}

// BenchmarkApply folds one key's read (1.6 members on average) into a
// sweep of a family tracking 100k keys: user extraction, member tracking,
// states and the per-user floor. Reported per key.
func BenchmarkApply(b *testing.B) {
	cfg, err := config.Parse([]byte(`
redis: {addr: "127.0.0.1:1"}
families:
  - name: streams
    kind: slotset
    match: "joishi:streams:*"
    user: '^joishi:streams:\{?([^}]+)\}?$'
    limit: 3
    ttl: 120s
    heartbeat_interval: 20s
    max_hold: 15m
`))
	if err != nil {
		b.Fatal(err)
	}
	s := NewSweeper(cfg, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	r := s.fams[0]
	const keys = 100_000
	now := int64(1e12)
	reads := make([]keyRead, keys)
	d := xxhash.New()
	for i := range reads {
		k := fmt.Sprintf("joishi:streams:{%012d}", i)
		reads[i] = keyRead{key: k, pttl: 240e3}
		for j := range 1 + i%5/2 { // 1, 1, 2, 2, 3: 1.8 a key
			m := fmt.Sprintf("%08x-0000-4000-8000-%012x", i, j)
			reads[i].members = append(reads[i].members, slotMember{Hash: memberHash(d, k, m), Score: float64(now + 110e3)})
		}
	}
	st := &sweepState{now: now, carry: Carry{}}
	r.floor.Begin()
	for i := range reads {
		r.apply(st, &reads[i])
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		j := i % keys
		if j == 0 {
			now += 5000
			st = &sweepState{now: now, carry: Carry{}}
			r.floor.Begin()
		}
		r.apply(st, &reads[j])
	}
}

// replayConn replays recorded replies.
type replayConn struct {
	net.Conn
	r *bytes.Reader
}

func (c *replayConn) Read(p []byte) (int, error)      { return c.r.Read(p) }
func (c *replayConn) SetDeadline(time.Time) error     { return nil }
func (c *replayConn) SetReadDeadline(time.Time) error { return nil }

// BenchmarkParseReplies parses the replies to one batch of 1000 keys
// (ZRANGE WITHSCORES of 1.6 UUID members on average, then PTTL) and hashes
// every member, as the raw reader does. Reported per key.
func BenchmarkParseReplies(b *testing.B) {
	const keys = 1000
	var replies bytes.Buffer
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprintf("joishi:streams:{%012d}", i)
		n := 1 + i%5/2
		fmt.Fprintf(&replies, "*%d\r\n", 2*n)
		for j := range n {
			fmt.Fprintf(&replies, "$36\r\n%08x-0000-4000-8000-%012x\r\n$13\r\n%d\r\n", i, j, 1764532123456+j)
		}
		replies.WriteString(":239000\r\n")
	}
	raw := replies.Bytes()
	reads := make([]keyRead, keys)
	ctx := context.Background()
	c := &respConn{rd: bufio.NewReaderSize(nil, 64<<10)}
	b.SetBytes(int64(len(raw)) / keys)
	b.ResetTimer()
	for i := 0; i < b.N; i += keys {
		c.nc = &replayConn{r: bytes.NewReader(raw)}
		c.rd.Reset(c.nc)
		clear(reads)
		if _, err := c.recvSlotReads(ctx, names, 1000, reads); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkObserveMap is BenchmarkObserve on the map-based reference
// tracker the table replaced, for comparison.
func BenchmarkObserveMap(b *testing.B) {
	rules := SlotRules{TTL: 120e3, Heartbeat: 20e3, StaleAfter: 40e3, MaxHold: 900e3, Skew: 5e3}
	ms := benchMembers(1_600_000)
	tr := &refTracker{m: map[uint64]refRec{}}
	now := int64(1e12)
	for _, m := range ms {
		tr.observe(m.Hash, m.Hash>>7, float64(now+100e3), now, &rules)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		j := i % len(ms)
		if j == 0 {
			now += 5000
		}
		tr.observe(ms[j].Hash, ms[j].Hash>>7, float64(now+100e3), now, &rules)
	}
}
