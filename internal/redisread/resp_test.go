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
	"github.com/slotexporter/slot_exporter/internal/tlstest"
)

// withRaw runs f with the raw reader on or off.
func withRaw(t *testing.T, on bool, f func()) {
	t.Helper()
	old := rawReads
	rawReads = on
	defer func() { rawReads = old }()
	f()
}

// loadAwkward writes slot sets that exercise every branch of the reply
// parser, and returns what each one's members must hash to.
func loadAwkward(t *testing.T, c *redis.Client) map[string][]slotMember {
	t.Helper()
	ctx := context.Background()
	want := map[string][]slotMember{}
	add := func(key string, ttl time.Duration, zs ...redis.Z) {
		if err := c.ZAdd(ctx, key, zs...).Err(); err != nil {
			t.Fatal(err)
		}
		if ttl > 0 {
			c.PExpire(ctx, key, ttl)
		}
		d := xxhash.New()
		var ms []slotMember
		got, err := c.ZRangeWithScores(ctx, key, 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, z := range got {
			ms = append(ms, slotMember{Hash: memberHash(d, key, z.Member.(string)), Score: z.Score})
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
	p := &readPlan{kind: "slotset", match: "s:*", scanCount: 3, maxMembers: 5}
	zc := &zcountPlan{now: "2", staleEdge: "3", futureEdge: "4"}
	ctx := context.Background()
	var raw, slow []keyRead
	var err error
	withRaw(t, true, func() { raw, err = readBatch(ctx, c, p, zc, keys) })
	if err != nil {
		t.Fatalf("raw: %v", err)
	}
	withRaw(t, false, func() { slow, err = readBatch(ctx, c, p, zc, keys) })
	if err != nil {
		t.Fatalf("go-redis: %v", err)
	}
	for i, k := range keys {
		// Time passes between the two reads.
		raw[i].pttl, slow[i].pttl = min(raw[i].pttl, 1), min(slow[i].pttl, 1)
		if fmt.Sprint(raw[i]) != fmt.Sprint(slow[i]) {
			t.Errorf("%s:\n raw      %+v\n go-redis %+v", k, raw[i], slow[i])
		}
		if w, ok := want[k]; ok && k != "s:{big}" && !slices.Equal(raw[i].members, w) {
			t.Errorf("%s: members %+v, want %+v", k, raw[i].members, w)
		}
	}
	byKey := map[string]keyRead{}
	for _, r := range raw {
		byKey[r.key] = r
	}
	if r := byKey["s:{string}"]; !r.skip || r.skipReason != SkipWrongType {
		t.Errorf("string key: %+v", r)
	}
	if r := byKey["s:{missing}"]; !r.gone {
		t.Errorf("missing key: %+v", r)
	}
	if r := byKey["s:{big}"]; !r.oversized || r.counts != [numStates]int64{StateExpired: 2, StateStale: 1, StateLive: 1, StateFuture: 2} {
		t.Errorf("oversized key: %+v", r)
	}
	if r := byKey["s:{frac}"]; r.pttl != -1 {
		t.Errorf("key without expiry: pttl %d", r.pttl)
	}

	// A whole scan, with several batches in flight on one connection,
	// sees the same as go-redis one batch at a time.
	scan := func() map[string]string {
		out := make(chan []keyRead, 100)
		if err := scanNode(ctx, c, p, zc, out); err != nil {
			t.Fatalf("scan: %v", err)
		}
		close(out)
		got := map[string]string{}
		for b := range out {
			for _, r := range b {
				r.pttl = min(r.pttl, 1)
				got[r.key] = fmt.Sprint(r)
			}
		}
		return got
	}
	var a, b map[string]string
	withRaw(t, true, func() { a = scan() })
	withRaw(t, false, func() { b = scan() })
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
	p := &readPlan{kind: "slotset", match: "s:*", scanCount: 100, maxMembers: 10}
	out := make(chan []keyRead, n)
	if err := scanNode(ctx, c, p, &zcountPlan{}, out); err != nil {
		t.Fatal(err)
	}
	close(out)
	seen, d := 0, xxhash.New()
	for b := range out {
		for _, r := range b {
			seen++
			var i int
			fmt.Sscanf(r.key, "s:{u%d}", &i)
			switch {
			case i%3 == 0:
				if !r.skip {
					t.Fatalf("%s: %+v", r.key, r)
				}
			case len(r.members) != i%3:
				t.Fatalf("%s: %d members, want %d", r.key, len(r.members), i%3)
			}
			for j, m := range r.members {
				if m.Score != float64(i*10+j) || m.Hash != memberHash(d, r.key, fmt.Sprintf("m%d", j)) {
					t.Fatalf("%s member %d: %+v", r.key, j, m)
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
	p := &readPlan{kind: "slotset", match: "s:*", scanCount: 10, maxMembers: 10}
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
		if rawClient(c) == nil {
			t.Fatalf("%s: the raw reader refused the client", tc.name)
		}
		reads, err := readBatch(ctx, c, p, &zcountPlan{}, []string{"s:{a}"})
		c.Close()
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: err %v, want one mentioning %s", tc.name, err, tc.wantErr)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case len(reads[0].members) != 1 || reads[0].members[0].Score != 7:
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
	reads, err := readBatch(ctx, c, &readPlan{kind: "slotset", maxMembers: 10}, &zcountPlan{}, []string{"s:{tls}"})
	if err != nil || len(reads[0].members) != 1 || reads[0].members[0].Score != 5 {
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
	_, err := readBatch(cctx, c, &readPlan{kind: "slotset", maxMembers: 10}, &zcountPlan{}, []string{"s:{a}"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want the context's deadline", err)
	}
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Fatalf("returned after %v, not at the deadline", d)
	}
	respPool.Lock()
	idle := len(respPool.idle[c])
	respPool.Unlock()
	if idle != 0 {
		t.Fatalf("a connection with a reply in flight went back to the pool")
	}
}

func TestParseScore(t *testing.T) {
	for in, want := range map[string]float64{
		"0": 0, "-5": -5, "1764532123456": 1764532123456, "123456789012345": 123456789012345,
		"1234567890123456789": 1234567890123456789, "1.5": 1.5, "1e-3": 1e-3, "inf": math.Inf(1),
		"-inf": math.Inf(-1), "1.7645321234560001e+18": 1.7645321234560001e+18,
	} {
		got, err := parseScore([]byte(in))
		if err != nil || got != want {
			t.Errorf("parseScore(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "x", "1..2", "--1"} {
		if _, err := parseScore([]byte(bad)); err == nil {
			t.Errorf("parseScore(%q): no error", bad)
		}
	}
}
