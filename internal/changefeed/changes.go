// Package changefeed is the sweep's change feed: from Redis's client
// tracking, on every node that a sweep reads (a cluster's too), it names
// the keys written since a family last read them.
package changefeed

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slotexporter/slot_exporter/internal/resp"
	"github.com/slotexporter/slot_exporter/internal/topology"
)

// A Feed names the keys written since they were last read, so that a
// sweep reads those and advances the others with time from what it holds.
// It uses Redis server-assisted client tracking in broadcasting mode
// (Redis 6 and later, no server configuration): per node, one connection
// subscribes to __redis__:invalidate and another turns tracking on with
// CLIENT TRACKING ON REDIRECT <id> BCAST PREFIX <each family's literal
// prefix>. Redis then publishes the name of every key with those prefixes
// that any client writes, deletes, or that expires or is evicted.
//
// What tracking does not report, and what the feed does about it:
//   - a flush is one invalidation with no key, of any database: the
//     names say so (Names.Flushed), and the sweep finds out whether its
//     family's keys went with it;
//   - a lost connection (either one) loses messages: everything is read
//     again, once the feed has reconnected;
//   - stream consumer-group commands (XREADGROUP, XACK, XCLAIM,
//     XAUTOCLAIM, XGROUP CREATECONSUMER) invalidate nothing in Redis 7.0:
//     the stream kind never advances a stream from what it holds;
//   - a key whose expiry passes is reported only when Redis deletes it:
//     the kinds drop a held key themselves once its expiry has passed.
//
// Before the keys of a sweep are handed out, a PING on the subscribed
// connection is answered: every invalidation of a write that Redis
// executed before the sweep started has been received by then. Families
// sweep at once: each PING carries its own token, and each waits for the
// answer to its own.
type Feed struct {
	logger   *slog.Logger
	fams     []*feedFamily
	prefixes []string
	shard    topology.Shard

	mu    sync.Mutex
	nodes map[string]*feedNode
	// limits are SetLimit's, by family.
	limits map[string]int
	// refused[node] is when tracking was last refused there: it is not
	// asked again for a minute.
	refused map[string]time.Time
	warned  map[string]bool
	// messages and names count the invalidation messages Redis has sent
	// and the key names in them, every node and family: each costs Redis
	// time, which the CPU pacer charges to the exporter's share.
	messages, names atomic.Uint64
	// idle is how long a node's tracking is kept with no sweep asking
	// for its changes: a node that left the sweep (a master demoted by
	// a failover, a node removed) would otherwise keep two connections
	// and collect the names of every key written on it.
	idle time.Duration
}

// Family is one family as the feed sees it: its keys are routed to it by
// Re, and tracking is asked for the literal prefix of Match.
type Family struct {
	Name  string
	Match string         // the SCAN pattern
	Re    *regexp.Regexp // Match as a regexp
}

type feedFamily struct {
	name string
	re   *regexp.Regexp
	// prefix, when the pattern is only a literal prefix and "*" (most
	// are): the regexp was 5% of the exporter's CPU at 25% of 1M slot
	// sets written, matching names whose prefix tracking had matched.
	prefix     []byte
	prefixOnly bool
}

func newFeedFamily(fam Family) *feedFamily {
	p := literalPrefix(fam.Match)
	return &feedFamily{name: fam.Name, re: fam.Re, prefix: []byte(p), prefixOnly: fam.Match == p+"*"}
}

// matches reports whether a key named by an invalidation is the family's.
func (ff *feedFamily) matches(key []byte) bool {
	if ff.prefixOnly {
		return bytes.HasPrefix(key, ff.prefix)
	}
	return ff.re.Match(key)
}

// ErrNoTracking says that a node cannot track changes (Redis before 6.0,
// an ACL without CLIENT or SUBSCRIBE, a client whose connections the
// reader cannot reproduce): its keys are read every sweep.
var ErrNoTracking = errors.New("client tracking unavailable")

// New returns a feed for fams, keeping only the keys of shard.
func New(fams []Family, shard topology.Shard, logger *slog.Logger) *Feed {
	f := &Feed{logger: logger, shard: shard, nodes: map[string]*feedNode{}, limits: map[string]int{},
		refused: map[string]time.Time{}, warned: map[string]bool{}, idle: 30 * time.Minute}
	for _, fam := range fams {
		f.fams = append(f.fams, newFeedFamily(fam))
		f.prefixes = append(f.prefixes, literalPrefix(fam.Match))
	}
	f.prefixes = coverPrefixes(f.prefixes)
	return f
}

// Covers reports whether f tracks what other needs (the same prefixes and
// shard), so that a reload can keep f.
func (f *Feed) Covers(other *Feed) bool {
	return f.shard == other.shard && strings.Join(f.prefixes, "\x00") == strings.Join(other.prefixes, "\x00")
}

// SetFamilies routes invalidations to a reloaded config's families.
func (f *Feed) SetFamilies(fams []Family) {
	var fs []*feedFamily
	for _, fam := range fams {
		fs = append(fs, newFeedFamily(fam))
	}
	f.mu.Lock()
	f.fams = fs
	limits := maps.Clone(f.limits) // f.mu is not taken under a node's mu
	// A copy: a node's receiving goroutine may drop it from the map.
	nodes := make([]*feedNode, 0, len(f.nodes))
	for _, fn := range f.nodes {
		nodes = append(nodes, fn)
	}
	f.mu.Unlock()
	names := map[string]bool{}
	for _, fam := range fs {
		names[fam.name] = true
	}
	for _, fn := range nodes {
		fn.mu.Lock()
		for _, fam := range fs {
			if fn.dirty[fam.name] == nil {
				// A family new to this node has no complete read under
				// its epoch yet: it reads everything first anyway.
				fn.dirty[fam.name] = newNameSet(string(fam.prefix), limits[fam.name])
			}
		}
		for name := range fn.dirty {
			if !names[name] {
				// A family gone with the reload: what it collected
				// would be kept for nobody.
				delete(fn.dirty, name)
			}
		}
		fn.mu.Unlock()
	}
}

// SetLimit bounds how many names of family the feed lists per node
// between two sweeps; 0, the default, does not. Past the limit a node's
// names of the family are dropped and Changes hands over Names whose All
// is true: everything is read. When the reads fall behind the writes,
// a sweep takes nearly every key as changed while the next sweep's names
// gather beside it, twice the keyspace's names in all; reading every key
// costs hardly more than reading most of them.
func (f *Feed) SetLimit(family string, n int) {
	f.mu.Lock()
	if f.limits[family] == n {
		f.mu.Unlock()
		return
	}
	f.limits[family] = n
	nodes := make([]*feedNode, 0, len(f.nodes))
	for _, fn := range f.nodes {
		nodes = append(nodes, fn)
	}
	f.mu.Unlock()
	for _, fn := range nodes {
		fn.mu.Lock()
		if d := fn.dirty[family]; d != nil {
			d.setLimit(n)
		}
		fn.mu.Unlock()
	}
}

// families is the current routing.
func (f *Feed) families() []*feedFamily {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fams
}

// literalPrefix is the part of a SCAN pattern before its first glob
// character: every key the pattern matches starts with it.
func literalPrefix(match string) string {
	if i := strings.IndexAny(match, `*?[\`); i >= 0 {
		return match[:i]
	}
	return match
}

// coverPrefixes keeps the prefixes no other one starts: Redis refuses
// prefixes that overlap. An empty prefix covers every key.
func coverPrefixes(ps []string) []string {
	sort.Strings(ps)
	var out []string
	for _, p := range ps {
		if len(out) > 0 && strings.HasPrefix(p, out[len(out)-1]) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// feedNode is the tracking of one node.
type feedNode struct {
	addr       string
	track, sub *resp.Conn
	wmu        sync.Mutex // writes to sub
	done       chan struct{}
	// pings are the barriers waiting for their PING's answer, by token.
	pingMu sync.Mutex
	pingN  uint64
	pings  map[string]chan struct{}
	// used is when a sweep last asked for its changes (Unix ns).
	used atomic.Int64

	mu     sync.Mutex
	epoch  int
	broken bool
	dirty  map[string]*nameSet // by family
}

// epochs are per node and only grow; a node reconnected gets a new one.
var epochSeq struct {
	sync.Mutex
	n int
}

func nextEpoch() int {
	epochSeq.Lock()
	defer epochSeq.Unlock()
	epochSeq.n++
	return epochSeq.n
}

// Changes returns the keys of family written on node n since the last
// call, and the node's epoch. The epoch changes whenever invalidations
// may have been lost (a new or broken connection): a family
// whose last complete read was under another epoch must read everything.
// ErrNoTracking: this node's keys must be read every sweep.
func (f *Feed) Changes(ctx context.Context, n topology.Node, family string) (Names, int, error) {
	fn, err := f.node(ctx, n)
	if err != nil {
		return Names{}, 0, err
	}
	fn.used.Store(time.Now().UnixNano())
	if err := fn.barrier(ctx); err != nil {
		if ctx.Err() != nil {
			// The sweep ended (a reload, its timeout), not the
			// connection: a late answer to this PING is ignored.
			return Names{}, 0, ctx.Err()
		}
		f.drop(fn, "barrier: "+err.Error())
		return Names{}, 0, fmt.Errorf("%w: node %s: %v", ErrNoTracking, n.Addr, err)
	}
	fn.mu.Lock()
	defer fn.mu.Unlock()
	if fn.broken {
		return Names{}, 0, fmt.Errorf("%w: node %s: connection lost", ErrNoTracking, n.Addr)
	}
	d := fn.dirty[family]
	if d == nil {
		return Names{}, 0, fmt.Errorf("family %s is not tracked", family)
	}
	fn.dirty[family] = d.next()
	return Names{d}, fn.epoch, nil
}

// NamedSince reports whether any of keys may have been written on node n
// since the family's last Changes, which returned epoch: one of them is
// named since, or a flush beyond the first flushes since (Flushes), the
// limit or a new connection leave it unknown. A barrier first, as for
// Changes: every write Redis executed before the call is counted.
func (f *Feed) NamedSince(ctx context.Context, n topology.Node, family string, epoch, flushes int, keys []string) (bool, error) {
	named := true
	err := f.since(ctx, n, family, epoch, func(d *nameSet) {
		if d.flushes > flushes {
			return
		}
		named = slices.ContainsFunc(keys, func(k string) bool { return d.position(k) >= 0 })
	})
	return named, err
}

// Flushes returns how many FLUSHALLs and FLUSHDBs the feed has seen on
// node n since the family's last Changes, which returned epoch, with
// every flush Redis executed before the call counted (a barrier first).
// ok is false when the names since are not known (another epoch, the
// limit).
func (f *Feed) Flushes(ctx context.Context, n topology.Node, family string, epoch int) (flushes int, ok bool, err error) {
	err = f.since(ctx, n, family, epoch, func(d *nameSet) { flushes, ok = d.flushes, true })
	return flushes, ok, err
}

// since runs known on the names gathered since the family's last Changes
// on node n, after a barrier, if they are all known: under the same
// epoch, within the limit.
func (f *Feed) since(ctx context.Context, n topology.Node, family string, epoch int, known func(*nameSet)) error {
	f.mu.Lock()
	fn := f.nodes[n.Addr]
	f.mu.Unlock()
	if fn == nil {
		return nil
	}
	if err := fn.barrier(ctx); err != nil {
		return err
	}
	fn.mu.Lock()
	defer fn.mu.Unlock()
	if d := fn.dirty[family]; !fn.broken && fn.epoch == epoch && d != nil && !d.over {
		known(d)
	}
	return nil
}

// node returns n's tracking, connecting it if needed.
func (f *Feed) node(ctx context.Context, n topology.Node) (*feedNode, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if fn := f.nodes[n.Addr]; fn != nil {
		fn.mu.Lock()
		broken := fn.broken
		fn.mu.Unlock()
		if !broken {
			return fn, nil
		}
		delete(f.nodes, n.Addr)
	}
	if t, ok := f.refused[n.Addr]; ok && time.Since(t) < time.Minute {
		return nil, fmt.Errorf("%w: node %s", ErrNoTracking, n.Addr)
	}
	fn, err := f.connect(ctx, n)
	if err != nil {
		if ctx.Err() != nil {
			// The sweep ended while connecting (a reload, its
			// timeout): the node did not refuse, the next sweep tries.
			return nil, ctx.Err()
		}
		f.refused[n.Addr] = time.Now()
		if !f.warned[n.Addr] {
			f.warned[n.Addr] = true
			f.logger.Warn("cannot track changes; reading every key every sweep", "node", n.Addr, "err", err)
		}
		return nil, fmt.Errorf("%w: node %s: %v", ErrNoTracking, n.Addr, err)
	}
	delete(f.refused, n.Addr)
	f.nodes[n.Addr] = fn
	return fn, nil
}

func (f *Feed) connect(ctx context.Context, n topology.Node) (*feedNode, error) {
	cl := resp.Client(n.C)
	if cl == nil {
		return nil, errors.New("the client's connections cannot be reproduced")
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	sub, err := resp.Dial(ctx, cl, false)
	if err != nil {
		return nil, err
	}
	track, err := resp.Dial(ctx, cl, false)
	if err != nil {
		_ = sub.Close()
		return nil, err
	}
	fail := func(err error) (*feedNode, error) {
		_ = sub.Close()
		_ = track.Close()
		return nil, err
	}
	id, err := sub.Call(ctx, "CLIENT", "ID")
	if err != nil {
		return fail(fmt.Errorf("CLIENT ID: %w", err))
	}
	if _, err := sub.Call(ctx, "SUBSCRIBE", "__redis__:invalidate"); err != nil {
		return fail(fmt.Errorf("SUBSCRIBE __redis__:invalidate: %w", err))
	}
	args := []string{"CLIENT", "TRACKING", "ON", "REDIRECT", strconv.FormatInt(id.(int64), 10), "BCAST"}
	for _, p := range f.prefixes {
		if p != "" {
			args = append(args, "PREFIX", p)
		}
	}
	if _, err := track.Call(ctx, args...); err != nil {
		return fail(fmt.Errorf("CLIENT TRACKING: %w", err))
	}
	fn := &feedNode{addr: n.Addr, track: track, sub: sub, pings: map[string]chan struct{}{}, done: make(chan struct{}),
		epoch: nextEpoch(), dirty: map[string]*nameSet{}}
	for _, fam := range f.fams { // f.mu is held by node
		fn.dirty[fam.name] = newNameSet(string(fam.prefix), f.limits[fam.name])
	}
	fn.used.Store(time.Now().UnixNano())
	sub.NoDeadline()
	go f.receive(fn)
	go f.keepAlive(fn, f.idle)
	return fn, nil
}

// Invalidations counts what Redis has sent the feed since it started.
// In broadcasting mode Redis gathers the names written in one turn of its
// event loop into one message per client, so a message costs it a socket
// write and each name a little more: the pacer charges both.
type Invalidations struct{ Messages, Names uint64 }

// Received is what Redis has sent in invalidations since the feed
// started.
func (f *Feed) Received() Invalidations {
	return Invalidations{Messages: f.messages.Load(), Names: f.names.Load()}
}

// Close ends the tracking of every node.
func (f *Feed) Close() {
	f.mu.Lock()
	nodes := f.nodes
	f.nodes = nil
	f.mu.Unlock()
	for _, fn := range nodes {
		f.drop(fn, "closed")
	}
}
