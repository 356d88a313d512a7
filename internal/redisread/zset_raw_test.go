package redisread

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/redistest"
	"github.com/slotexporter/slot_exporter/internal/resp"
	"github.com/slotexporter/slot_exporter/internal/tlstest"
	"github.com/slotexporter/slot_exporter/internal/track"
)

// goRedisOnly hides the *redis.Client behind another type: the raw reader
// takes only a *redis.Client, so reads through it go through go-redis.
type goRedisOnly struct{ redis.Cmdable }

// readPath is one way the reader reaches Redis: "raw" over a connection
// of its own, "go-redis" through the client.
type readPath struct {
	name string
	c    redis.Cmdable
}

// bothPaths are c read raw and through go-redis.
func bothPaths(c *redis.Client) []readPath {
	return []readPath{{"raw", c}, {"go-redis", goRedisOnly{c}}}
}

// zsetPlan reads slot sets with at most maxMembers members member by
// member; bigger ones are counted at edges.
func zsetPlan(scanCount, maxMembers int64, edges Edges) *Plan {
	return &Plan{Match: "s:*", ScanCount: scanCount, Reads: &ZSetReads{MaxMembers: maxMembers, Edges: edges}}
}

// readKeys reads keys through a fresh Reader (over a raw connection when
// c is a plain *redis.Client) and returns the reads in key order.
func readKeys(ctx context.Context, c redis.Cmdable, p *Plan, keys []string) ([]KeyRead, error) {
	rd := NewReader(false)
	defer rd.Close()
	return readWith(ctx, rd, c, p, keys)
}

func readWith(ctx context.Context, rd *Reader, c redis.Cmdable, p *Plan, keys []string) ([]KeyRead, error) {
	out := make(chan []KeyRead, len(keys))
	err := rd.ReadKeys(ctx, c, p, keys, out)
	close(out)
	var reads []KeyRead
	for b := range out {
		reads = append(reads, b...)
	}
	return reads, err
}

// loadAwkward writes slot sets that exercise every branch of the reply
// parser, and returns what each one's members must hash to.
func loadAwkward(t *testing.T, c *redis.Client) map[string][]Member {
	t.Helper()
	ctx := context.Background()
	want := map[string][]Member{}
	add := func(key string, ttl time.Duration, zs ...redis.Z) {
		if err := c.ZAdd(ctx, key, zs...).Err(); err != nil {
			t.Fatal(err)
		}
		if ttl > 0 {
			c.PExpire(ctx, key, ttl)
		}
		d := xxhash.New()
		var ms []Member
		got, err := c.ZRangeWithScores(ctx, key, 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, z := range got {
			m := z.Member.(string)
			ms = append(ms, Member{Hash: hashMember(d, key, m), Score: z.Score})
			if track.MemberHash(d, key, m) != ms[len(ms)-1].Hash {
				t.Fatalf("%s %q: the reader and the tracker hash members differently", key, m)
			}
		}
		want[key] = ms
	}
	add("s:{plain}", time.Hour, redis.Z{Score: 1764532123456, Member: "a"}, redis.Z{Score: 1764532123457, Member: "b"})
	add("s:{inf}", time.Hour, redis.Z{Score: math.Inf(1), Member: "forever"}, redis.Z{Score: math.Inf(-1), Member: "never"})
	add("s:{frac}", 0, redis.Z{Score: 1764532123.456, Member: "seconds"}, redis.Z{Score: 1e-3, Member: "tiny"},
		redis.Z{Score: -5, Member: "neg"}, redis.Z{Score: 1764532123456000, Member: "micros"}, redis.Z{Score: 1.7645321234560001e+18, Member: "nanos"})
	add("s:{bytes}", time.Hour, redis.Z{Score: 1, Member: "crlf\r\nin\x00side\xff"}, redis.Z{Score: 2, Member: ""})
	add("s:{huge}", time.Hour, redis.Z{Score: 3, Member: strings.Repeat("m", 100<<10)}, redis.Z{Score: 4, Member: "small"})
	add("s:{big}", time.Hour, redis.Z{Score: 1, Member: "1"}, redis.Z{Score: 2, Member: "2"}, redis.Z{Score: 3, Member: "3"},
		redis.Z{Score: 4, Member: "4"}, redis.Z{Score: 5, Member: "5"}, redis.Z{Score: 6, Member: "6"})
	if err := c.Set(ctx, "s:{string}", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	return want
}

// TestRawReadsMatchGoRedis reads the same awkward keys through the raw
// connection and through go-redis: every field of every read must agree,
// and members must hash as memberHash does.
func TestRawReadsMatchGoRedis(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	want := loadAwkward(t, c)
	keys := []string{"s:{plain}", "s:{inf}", "s:{frac}", "s:{bytes}", "s:{huge}", "s:{big}", "s:{string}", "s:{missing}"}
	p := zsetPlan(3, 5, Edges{Expired: 2, StaleBelow: 3, FutureAbove: 4})
	ctx := context.Background()
	if resp.Client(c) == nil {
		t.Fatal("the raw reader refused a plain client")
	}
	raw, err := readKeys(ctx, c, p, keys)
	if err != nil {
		t.Fatalf("raw: %v", err)
	}
	slow, err := readKeys(ctx, goRedisOnly{c}, p, keys)
	if err != nil {
		t.Fatalf("go-redis: %v", err)
	}
	if len(raw) != len(keys) || len(slow) != len(keys) {
		t.Fatalf("read %d and %d keys, want %d", len(raw), len(slow), len(keys))
	}
	// The go-redis path of one batch, without the Reader, agrees too.
	direct := make([]KeyRead, len(keys))
	if err := p.Reads.Read(ctx, c, keys, direct); err != nil {
		t.Fatalf("ZSetReads.Read: %v", err)
	}
	for i, k := range keys {
		// Time passes between the reads.
		raw[i].PTTL, slow[i].PTTL, direct[i].PTTL = min(raw[i].PTTL, 1), min(slow[i].PTTL, 1), min(direct[i].PTTL, 1)
		if fmt.Sprint(raw[i]) != fmt.Sprint(slow[i]) || fmt.Sprint(raw[i]) != fmt.Sprint(direct[i]) {
			t.Errorf("%s:\n raw      %+v\n go-redis %+v\n direct   %+v", k, raw[i], slow[i], direct[i])
		}
		if w, ok := want[k]; ok && k != "s:{big}" && !slices.Equal(raw[i].Members, w) {
			t.Errorf("%s: members %+v, want %+v", k, raw[i].Members, w)
		}
	}
	byKey := map[string]KeyRead{}
	for _, r := range raw {
		byKey[r.Key] = r
	}
	if r := byKey["s:{string}"]; r.Status != Skipped || r.Skip != SkipWrongType {
		t.Errorf("string key: %+v", r)
	}
	if r := byKey["s:{missing}"]; r.Status != Gone {
		t.Errorf("missing key: %+v", r)
	}
	// Scores 1..6 against edges 2, 3, 4: a score at the expired edge is
	// expired, one at the stale edge is live (it was stale before the
	// rebuild: the ZCOUNT path now cuts where the per-member path does,
	// see TestStateEdgesSameOnBothPaths in internal/sweep), one at the
	// future edge is live.
	if r := byKey["s:{big}"]; !r.Oversized || r.Ranges != [NumRanges]int64{RangeExpired: 2, RangeStale: 0, RangeLive: 2, RangeFuture: 2} || r.Newest != 4 {
		t.Errorf("oversized key: %+v", r)
	}
	if r := byKey["s:{frac}"]; r.PTTL != -1 {
		t.Errorf("key without expiry: pttl %d", r.PTTL)
	}

	// A whole scan, with several batches in flight on one connection,
	// sees the same as go-redis one batch at a time.
	scan := func(c redis.Cmdable) map[string]string {
		rd := NewReader(false)
		defer rd.Close()
		out := make(chan []KeyRead, 100)
		if err := rd.ScanNode(ctx, c, p, out); err != nil {
			t.Fatalf("scan: %v", err)
		}
		close(out)
		got := map[string]string{}
		for b := range out {
			for _, r := range b {
				r.PTTL = min(r.PTTL, 1)
				got[r.Key] = fmt.Sprint(r)
			}
		}
		return got
	}
	a, b := scan(c), scan(goRedisOnly{c})
	if len(a) != len(keys)-1 || fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("scan:\n raw      %v\n go-redis %v", a, b)
	}
}

// TestRawReadsManyBatches: a keyspace of many pages read with batches in
// flight keeps replies matched to their keys.
func TestRawReadsManyBatches(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	ctx := context.Background()
	const n = 5000
	pipe := c.Pipeline()
	for i := range n {
		k := fmt.Sprintf("s:{u%d}", i)
		for j := range i % 3 {
			pipe.ZAdd(ctx, k, redis.Z{Score: float64(i*10 + j), Member: fmt.Sprintf("m%d", j)})
		}
		if i%3 == 0 {
			pipe.Set(ctx, k, "x", 0) // wrong type, mixed in
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	p := zsetPlan(100, 10, Edges{})
	rd := NewReader(false)
	defer rd.Close()
	out := make(chan []KeyRead, n)
	if err := rd.ScanNode(ctx, c, p, out); err != nil {
		t.Fatal(err)
	}
	close(out)
	seen, d := 0, xxhash.New()
	for b := range out {
		for _, r := range b {
			seen++
			var i int
			fmt.Sscanf(r.Key, "s:{u%d}", &i)
			switch {
			case i%3 == 0:
				if r.Status != Skipped {
					t.Fatalf("%s: %+v", r.Key, r)
				}
			case len(r.Members) != i%3:
				t.Fatalf("%s: %d members, want %d", r.Key, len(r.Members), i%3)
			}
			for j, m := range r.Members {
				if m.Score != float64(i*10+j) || m.Hash != hashMember(d, r.Key, fmt.Sprintf("m%d", j)) {
					t.Fatalf("%s member %d: %+v", r.Key, j, m)
				}
			}
		}
	}
	if seen != n {
		t.Fatalf("read %d keys, want %d", seen, n)
	}
}

// TestRawReadsAuthAndDB: the raw connection authenticates as the client
// does (an ACL user, a password from a credentials provider) and selects
// the client's database; bad credentials fail the read with AUTH in the
// error rather than reading nothing.
func TestRawReadsAuthAndDB(t *testing.T) {
	srv := redistest.Start(t, "--requirepass", "adminpw")
	ctx := context.Background()
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr, Password: "adminpw"})
	defer admin.Close()
	if err := admin.Do(ctx, "ACL", "SETUSER", "sweeper", "on", ">sweeppw", "~s:*", "+@read", "+ping", "+select", "+hello", "+readonly").Err(); err != nil {
		t.Fatal(err)
	}
	db3 := redis.NewClient(&redis.Options{Addr: srv.Addr, Password: "adminpw", DB: 3})
	defer db3.Close()
	db3.ZAdd(ctx, "s:{a}", redis.Z{Score: 7, Member: "x"})
	p := zsetPlan(10, 10, Edges{})
	cases := []struct {
		name    string
		opt     redis.Options
		wantErr string
	}{
		{"acl user", redis.Options{Username: "sweeper", Password: "sweeppw", DB: 3}, ""},
		{"credentials provider", redis.Options{DB: 3, CredentialsProviderContext: func(context.Context) (string, string, error) {
			return "sweeper", "sweeppw", nil
		}}, ""},
		{"requirepass", redis.Options{Password: "adminpw", DB: 3}, ""},
		{"wrong password", redis.Options{Username: "sweeper", Password: "nope", DB: 3}, "AUTH"},
		{"no password", redis.Options{DB: 3}, "NOAUTH"},
	}
	for _, tc := range cases {
		opt := tc.opt
		opt.Addr = srv.Addr
		opt.MaxRetries = -1
		c := redis.NewClient(&opt)
		if resp.Client(c) == nil {
			t.Fatalf("%s: the raw reader refused the client", tc.name)
		}
		reads, err := readKeys(ctx, c, p, []string{"s:{a}"})
		c.Close()
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: err %v, want one mentioning %s", tc.name, err, tc.wantErr)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case len(reads) != 1 || len(reads[0].Members) != 1 || reads[0].Members[0].Score != 7:
			t.Errorf("%s: read %+v from db 3", tc.name, reads[0])
		}
	}
}

// TestRawReadsTLS: the raw connection uses the client's dialer, so it
// speaks TLS (with a client certificate) to a TLS-only server.
func TestRawReadsTLS(t *testing.T) {
	certs := tlstest.New(t)
	srv := tlstest.StartRedis(t, certs, true)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, TLSConfig: certs.ClientConfig()})
	defer c.Close()
	ctx := context.Background()
	if err := c.ZAdd(ctx, "s:{tls}", redis.Z{Score: 5, Member: "m"}).Err(); err != nil {
		t.Fatal(err)
	}
	if resp.Client(c) == nil {
		t.Fatal("the raw reader refused a TLS client")
	}
	reads, err := readKeys(ctx, c, zsetPlan(10, 10, Edges{}), []string{"s:{tls}"})
	if err != nil || len(reads) != 1 || len(reads[0].Members) != 1 || reads[0].Members[0].Score != 5 {
		t.Fatalf("read over TLS: %+v %v", reads, err)
	}
}

// TestRawReadsCancel: a sweep cut off by its context returns promptly with
// the context's error, and the connection is not reused.
func TestRawReadsCancel(t *testing.T) {
	srv := redistest.Start(t, "--enable-debug-command", "yes")
	c := srv.Client()
	ctx := context.Background()
	c.ZAdd(ctx, "s:{a}", redis.Z{Score: 1, Member: "x"})
	// A server that stops answering: DEBUG SLEEP on another connection
	// blocks the event loop.
	other := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer other.Close()
	go func() { _ = other.Do(ctx, "DEBUG", "SLEEP", "2").Err() }()
	time.Sleep(100 * time.Millisecond)
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	rd := NewReader(false)
	defer rd.Close()
	_, err := readWith(cctx, rd, c, zsetPlan(10, 10, Edges{}), []string{"s:{a}"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want the context's deadline", err)
	}
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Fatalf("returned after %v, not at the deadline", d)
	}
	if rd.pool.Idle(c) != 0 {
		t.Fatalf("a connection with a reply in flight went back to the pool")
	}
}

// TestRawReadsReadOnly: a Reader made for cluster replicas sends READONLY
// on its raw connections, one made for masters does not. A standalone
// server refuses READONLY, which makes the difference visible.
func TestRawReadsReadOnly(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	ctx := context.Background()
	c.ZAdd(ctx, "s:{a}", redis.Z{Score: 1, Member: "x"})
	p := zsetPlan(10, 10, Edges{})
	if reads, err := readKeys(ctx, c, p, []string{"s:{a}"}); err != nil || len(reads) != 1 || len(reads[0].Members) != 1 {
		t.Fatalf("for masters: %+v %v", reads, err)
	}
	rd := NewReader(true)
	defer rd.Close()
	_, err := readWith(ctx, rd, c, p, []string{"s:{a}"})
	if err == nil || !strings.Contains(err.Error(), "READONLY") {
		t.Fatalf("for replicas: err %v, want READONLY refused by a server that is not in a cluster", err)
	}
}
