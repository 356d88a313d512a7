package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os/exec"
	"regexp"
	"strconv"
	"time"

	"github.com/slotexporter/slot_exporter/internal/redisproc"
)

// Key names are what redis-benchmark makes of "joishi:streams:{__rand_int__}"
// with -r N: a 12-digit zero-padded number below N. The Redis floor then
// reads the very keys the sweep reads.
const (
	keyPattern  = "joishi:streams:{__rand_int__}"
	keyMatch    = "joishi:streams:*"
	userPattern = `^joishi:streams:\{?([^}]+)\}?$`
)

func keyName(i int) string { return fmt.Sprintf("joishi:streams:{%012d}", i) }

// timing is the family's timing in milliseconds. The bench stretches the
// real 120s/20s to 4h/10m, with members stale after 2h, so that the state
// mix it loads does not drift while it runs: a live member stays live for
// at least 110 minutes and a stale one stale for at least 30; the
// per-member work is the same whatever the numbers. At 1h/10m/20m live
// members began to turn stale 10 minutes after the load, 2,400 a second,
// and a run whose change-driven phases took longer than that found the
// exporter and its reference full read, seconds apart, apart by thousands
// of members (both in the full-read row, which tracks nothing).
type timing struct {
	ttl, hb, stale, maxHold int64
	// sampling.interval and sampling.window.
	interval, window time.Duration
}

var benchTiming = timing{ttl: 4 * 3600e3, hb: 600e3, stale: 2 * 3600e3, maxHold: 24 * 3600e3, interval: time.Minute, window: time.Minute}

// churnTiming is short on purpose: the churn run heartbeats its live
// members between sweeps, sets that survive the churn for longer than
// max_hold turn zombie, and users whose sets are gone are forgotten once
// the 10s window has passed.
var churnTiming = timing{ttl: 10e3, hb: 2e3, stale: 4e3, maxHold: 20e3, interval: time.Second, window: 10 * time.Second}

// Member states, in the exporter's order.
const (
	stLive = iota
	stExpired
	stFuture
	stStale
	stZombie
	numStates
)

var stateNames = [numStates]string{"live", "expired", "future", "stale", "zombie"}

// loadStats is what the generator wrote, by the state each member was
// written to be in.
type loadStats struct {
	Sets    int            `json:"sets"`
	Members int            `json:"members"`
	States  [numStates]int `json:"states"`
	NoTTL   int            `json:"no_ttl"`
	Early   int            `json:"early"`
}

// gen writes slot sets as RESP commands. The mix, per set: 1 member (55%),
// 2 (30%) or 3 (15%), about 1.6 on average; per member: live 90%, stale 5%,
// expired 4% (not yet pruned), future 1% (half a microsecond-for-
// millisecond unit bug, half a day ahead); per key: PEXPIRE 2 x ttl, except
// 1% without any expiry and 1% whose expiry comes before its live members'.
type gen struct {
	r   *rand.Rand
	now int64
	t   timing
	buf []byte
	num []byte
}

func newGen(seed uint64, now int64, t timing) *gen {
	return &gen{r: rand.New(rand.NewPCG(seed, seed^0x5eed)), now: now, t: t}
}

func (g *gen) arg(b []byte) {
	g.buf = append(g.buf, '$')
	g.buf = strconv.AppendInt(g.buf, int64(len(b)), 10)
	g.buf = append(g.buf, '\r', '\n')
	g.buf = append(g.buf, b...)
	g.buf = append(g.buf, '\r', '\n')
}

func (g *gen) argInt(n int64) {
	g.num = strconv.AppendInt(g.num[:0], n, 10)
	g.arg(g.num)
}

func (g *gen) header(n int) {
	g.buf = append(g.buf, '*')
	g.buf = strconv.AppendInt(g.buf, int64(n), 10)
	g.buf = append(g.buf, '\r', '\n')
}

// memberID is a UUID-shaped holder id, 36 bytes like a real stream id.
func (g *gen) memberID() []byte {
	const hexd = "0123456789abcdef"
	var b [36]byte
	a, c := g.r.Uint64(), g.r.Uint64()
	for i, j := 0, 0; i < 36; i++ {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			b[i] = '-'
			continue
		}
		var v uint64
		if j < 16 {
			v = a >> (4 * j)
		} else {
			v = c >> (4 * (j - 16))
		}
		b[i] = hexd[v&15]
		j++
	}
	return b[:]
}

// set appends the commands that create one slot set to g.buf.
func (g *gen) set(key string, st *loadStats) {
	n := 1
	switch p := g.r.Float64(); {
	case p >= 0.85:
		n = 3
	case p >= 0.55:
		n = 2
	}
	g.header(2 + 2*n)
	g.arg([]byte("ZADD"))
	g.arg([]byte(key))
	hasLive := false
	for range n {
		var score int64
		switch p := g.r.Float64(); {
		case p < 0.90:
			score = g.now + g.t.ttl - g.r.Int64N(g.t.hb)
			st.States[stLive]++
			hasLive = true
		case p < 0.95:
			// In the middle half of the stale range (past the stale
			// edge, not yet expired): it stays stale for a while.
			room := g.t.ttl - g.t.stale
			score = g.now + room/4 + g.r.Int64N(max(room/2, 1))
			st.States[stStale]++
		case p < 0.99:
			score = g.now - 1000 - g.r.Int64N(600e3)
			st.States[stExpired]++
		default:
			if g.r.IntN(2) == 0 {
				score = g.now * 1000
			} else {
				score = g.now + 24*3600e3
			}
			st.States[stFuture]++
		}
		g.argInt(score)
		g.arg(g.memberID())
	}
	st.Members += n
	st.Sets++
	var pexpire int64
	switch p := g.r.Float64(); {
	case p < 0.01:
		st.NoTTL++
		return
	case p < 0.02 && hasLive:
		// Sooner than its live members' expiry (at least ttl -
		// heartbeat away), long enough to outlive the bench.
		pexpire = g.t.ttl - g.t.hb - g.t.hb/2
		st.Early++
	default:
		pexpire = 2 * g.t.ttl
	}
	g.header(3)
	g.arg([]byte("PEXPIRE"))
	g.arg([]byte(key))
	g.argInt(pexpire)
}

var pipeReplies = regexp.MustCompile(`errors: (\d+), replies: (\d+)`)

// load writes sets [from, to) with redis-cli --pipe, the fastest way in.
func load(addr string, g *gen, from, to int) (loadStats, time.Duration, error) {
	return loadTo([]string{addr}, func(string) int { return 0 }, g, from, to)
}

// loadTo writes sets [from, to) like load, each to the server owner names
// (an index of addrs): one redis-cli --pipe per server, all at once. A
// cluster's keys go to the node that owns their slot, since --pipe follows
// no redirection. The sets are the same whatever the servers: one
// generator makes them in order.
func loadTo(addrs []string, owner func(key string) int, g *gen, from, to int) (loadStats, time.Duration, error) {
	var st loadStats
	start := time.Now()
	feeds := make([]chan []byte, len(addrs))
	errs := make(chan error, len(addrs))
	for i, addr := range addrs {
		feed := make(chan []byte, 16)
		feeds[i] = feed
		go func() {
			err := pipeRESP(addr, func(w io.Writer) error {
				for b := range feed {
					if _, err := w.Write(b); err != nil {
						return err
					}
				}
				return nil
			})
			// Whatever is left, so that the generator never blocks on a
			// server that failed.
			for range feed {
			}
			errs <- err
		}()
	}
	// Commands go out in chunks of 64 KiB a server.
	const chunk = 64 << 10
	bufs := make([][]byte, len(addrs))
	for i := from; i < to; i++ {
		key := keyName(i)
		g.buf = g.buf[:0]
		g.set(key, &st)
		n := owner(key)
		bufs[n] = append(bufs[n], g.buf...)
		if len(bufs[n]) >= chunk {
			feeds[n] <- bufs[n]
			bufs[n] = make([]byte, 0, chunk+1024)
		}
	}
	for n, feed := range feeds {
		if len(bufs[n]) > 0 {
			feed <- bufs[n]
		}
		close(feed)
	}
	var err error
	for range addrs {
		if e := <-errs; e != nil && err == nil {
			err = e
		}
	}
	return st, time.Since(start), err
}

// pipeRESP feeds what write writes, RESP commands, to redis-cli --pipe and
// fails unless every command succeeded.
func pipeRESP(addr string, write func(io.Writer) error) error {
	host, port := splitAddr(addr)
	cmd := exec.Command("redis-cli", "-h", host, "-p", port, "--pipe")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("redis-cli --pipe: %w", err)
	}
	w := bufio.NewWriterSize(stdin, 1<<20)
	werr := write(w)
	if werr == nil {
		werr = w.Flush()
	}
	_ = stdin.Close()
	err = cmd.Wait()
	if werr != nil {
		return fmt.Errorf("feeding redis-cli: %w (%s)", werr, out.String())
	}
	if err != nil {
		return fmt.Errorf("redis-cli --pipe: %w (%s)", err, out.String())
	}
	if m := pipeReplies.FindStringSubmatch(out.String()); m == nil || m[1] != "0" {
		return fmt.Errorf("redis-cli --pipe reported errors: %s", out.String())
	}
	return nil
}

func splitAddr(addr string) (string, string) {
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == ':' {
			return addr[:i], addr[i+1:]
		}
	}
	return addr, "6379"
}

// benchFamily is the slot-set family over the bench's keys, at timings t:
// every exporter the bench runs reads it.
func benchFamily(t timing) redisproc.Family {
	ms := func(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
	return redisproc.Family{
		Name: "streams", Kind: "slotset", Match: keyMatch, User: userPattern, Limit: 3,
		TTL: ms(t.ttl), Heartbeat: ms(t.hb), MaxHold: ms(t.maxHold),
		Extra: []string{"stale_after: " + ms(t.stale).String()},
	}
}
