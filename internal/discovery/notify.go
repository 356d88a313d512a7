// Package discovery finds a family's keys from keyspace notifications
// (discovery: notify), with a full SCAN through redisread's Reader when
// the subscription is new or was interrupted and every full_scan_interval.
// Plain SCAN discovery (discovery: scan) is the Reader's ScanNode itself:
// its SCAN pages feed the pipelined reads as they arrive.
package discovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/redisread"
	"github.com/slotexporter/slot_exporter/internal/topology"
)

// With discovery: notify, the set of keys to read follows keyspace
// notifications instead of a SCAN of the whole keyspace, which costs in
// proportion to every key in Redis, related or not. A full SCAN still runs
// every full_scan_interval to repair whatever the notifications missed
// (a dropped subscription, keys written before the exporter started).

// Family is one family as the key watcher sees it.
type Family struct {
	Name  string
	Match string         // the SCAN pattern, subscribed to as a keyspace channel pattern
	Re    *regexp.Regexp // Match as a regexp
	// Classes are the notify-keyspace-events flags for the writes that
	// create its keys: z (sorted sets), $ (strings), l (lists), t (streams).
	Classes string
}

// notifyClasses are the flags discovery: notify needs: K (keyspace
// channel), g (del, rename, expire), x (expired), e (evicted), and each
// family's own write class.
func notifyClasses(fams []Family) string {
	need := "Kgxe"
	for _, f := range fams {
		need += missingClasses(need, f.Classes)
	}
	return need
}

// CheckNotify refuses discovery: notify when Redis is not configured to
// publish the events it relies on, and says exactly what to set. It needs
// CONFIG GET; every node of a cluster is checked.
func CheckNotify(ctx context.Context, topo *topology.Topology, fams []Family) error {
	need := notifyClasses(fams)
	nodes, err := topo.Nodes(ctx)
	if err != nil {
		return fmt.Errorf("sampling.discovery: notify: cannot reach Redis to check notify-keyspace-events: %w", err)
	}
	for _, n := range nodes {
		v, err := n.C.ConfigGet(ctx, "notify-keyspace-events").Result()
		if err != nil {
			return fmt.Errorf("sampling.discovery: notify: CONFIG GET notify-keyspace-events on %s: %w", n.Addr, err)
		}
		have := v["notify-keyspace-events"]
		if missing := missingClasses(have, need); missing != "" {
			return fmt.Errorf("sampling.discovery: notify needs keyspace notifications, but %s has notify-keyspace-events=%q (missing %q); set it with: CONFIG SET notify-keyspace-events %s (or notify-keyspace-events %s in redis.conf), or use discovery: scan",
				n.Addr, have, missing, mergeClasses(have, need), mergeClasses(have, need))
		}
	}
	return nil
}

// missingClasses returns the flags of need not enabled by have. "A" in
// have stands for g$lshzxet.
func missingClasses(have, need string) string {
	if strings.Contains(have, "A") {
		have += "g$lshzxet"
	}
	var miss []byte
	for i := 0; i < len(need); i++ {
		if !strings.ContainsRune(have, rune(need[i])) {
			miss = append(miss, need[i])
		}
	}
	return string(miss)
}

func mergeClasses(have, need string) string {
	return have + missingClasses(have, need)
}

// Watcher keeps the keys of every notify-mode family, per node, in step
// with keyspace notifications.
type Watcher struct {
	logger *slog.Logger
	db     int
	fams   []*watchedFamily
	// marks[family][node] is when the family last fully scanned the node.
	marks map[string]map[string]scanMark

	mu      sync.Mutex
	pubsubs map[string]*redis.PubSub // by node address
	// epoch[node] changes whenever the node's subscription is new or was
	// interrupted: events may have been missed, so families rescan it.
	epoch map[string]int
	wg    sync.WaitGroup
}

type watchedFamily struct {
	name  string
	match string
	re    *regexp.Regexp

	mu sync.Mutex
	// keys[node] is the known key set of that node; added[node] the keys
	// that appeared since the node's current full scan began.
	keys  map[string]map[string]struct{}
	added map[string]map[string]struct{}
}

// NewWatcher returns a watcher for fams on database db. Call CheckNotify
// first: without the events, the watcher would see nothing.
func NewWatcher(fams []Family, db int, logger *slog.Logger) *Watcher {
	w := &Watcher{logger: logger, db: db, pubsubs: map[string]*redis.PubSub{}, epoch: map[string]int{}, marks: map[string]map[string]scanMark{}}
	for _, f := range fams {
		w.fams = append(w.fams, &watchedFamily{
			name: f.Name, match: f.Match, re: f.Re,
			keys: map[string]map[string]struct{}{}, added: map[string]map[string]struct{}{},
		})
		w.marks[f.Name] = map[string]scanMark{}
	}
	return w
}

func (w *Watcher) family(name string) *watchedFamily {
	for _, f := range w.fams {
		if f.name == name {
			return f
		}
	}
	return nil
}

// watch makes sure node n has a confirmed subscription and returns the
// node's epoch.
func (w *Watcher) watch(ctx context.Context, n topology.Node) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.pubsubs[n.Addr]; ok {
		return w.epoch[n.Addr], nil
	}
	sub, ok := n.C.(interface {
		PSubscribe(ctx context.Context, channels ...string) *redis.PubSub
	})
	if !ok {
		return 0, fmt.Errorf("node %s: client cannot subscribe", n.Addr)
	}
	prefix := fmt.Sprintf("__keyspace@%d__:", w.db)
	var chans []string
	for _, f := range w.fams {
		chans = append(chans, prefix+f.match)
	}
	ps := sub.PSubscribe(ctx, chans...)
	// Wait for the confirmations: events are only promised from then on,
	// and the full scan that follows must not start before.
	for range chans {
		if _, err := ps.ReceiveTimeout(ctx, 5*time.Second); err != nil {
			_ = ps.Close()
			return 0, fmt.Errorf("node %s: PSUBSCRIBE: %w", n.Addr, err)
		}
	}
	w.pubsubs[n.Addr] = ps
	w.epoch[n.Addr]++
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		w.receive(n.Addr, ps, prefix)
	}()
	return w.epoch[n.Addr], nil
}

func (w *Watcher) receive(addr string, ps *redis.PubSub, prefix string) {
	for {
		msg, err := ps.Receive(context.Background())
		if err != nil {
			if errors.Is(err, redis.ErrClosed) {
				return
			}
			// go-redis reconnects and resubscribes on its own; events in
			// the gap are gone, so the next sweep rescans this node.
			w.mu.Lock()
			if w.pubsubs[addr] != ps {
				w.mu.Unlock()
				return
			}
			w.epoch[addr]++
			w.mu.Unlock()
			w.logger.Warn("keyspace subscription interrupted", "node", addr, "action", "rescan node", "err", err)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if m, ok := msg.(*redis.Message); ok {
			if key, ok := strings.CutPrefix(m.Channel, prefix); ok {
				w.event(addr, key, m.Payload)
			}
		}
	}
}

func (w *Watcher) event(addr, key, ev string) {
	var add bool
	switch ev {
	case "del", "expired", "evicted", "rename_from", "move_from":
	case "zadd", "zincr", "zincrby", "zunionstore", "zinterstore", "zdiffstore", "zrangestore",
		"set", "incrby", "incrbyfloat", "decrby", "append", "setrange",
		"lpush", "rpush", "linsert", "lset",
		"xadd", "xgroup-create", "xsetid", "xclaim", "xautoclaim",
		"rename_to", "move_to", "restore", "copy_to":
		add = true
	default:
		return
	}
	for _, f := range w.fams {
		if !f.re.MatchString(key) {
			continue
		}
		f.mu.Lock()
		ks := f.keys[addr]
		if ks == nil {
			ks = map[string]struct{}{}
			f.keys[addr] = ks
		}
		if add {
			ks[key] = struct{}{}
			if a := f.added[addr]; a != nil {
				a[key] = struct{}{}
			}
		} else {
			delete(ks, key)
		}
		f.mu.Unlock()
	}
}

// beginFullScan starts recording keys that appear while node addr is being
// scanned, so that they survive the rebuild.
func (f *watchedFamily) beginFullScan(addr string) {
	f.mu.Lock()
	f.added[addr] = map[string]struct{}{}
	f.mu.Unlock()
}

// endFullScan replaces the node's key set with what the scan found plus
// what appeared during it. found == nil abandons the scan.
func (f *watchedFamily) endFullScan(addr string, found map[string]struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if found != nil {
		for k := range f.added[addr] {
			found[k] = struct{}{}
		}
		f.keys[addr] = found
	}
	delete(f.added, addr)
}

func (f *watchedFamily) known(addr string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, 0, len(f.keys[addr]))
	for k := range f.keys[addr] {
		out = append(out, k)
	}
	return out
}

func (f *watchedFamily) forget(addr string, keys []string) {
	f.mu.Lock()
	for _, k := range keys {
		delete(f.keys[addr], k)
	}
	f.mu.Unlock()
}

// Close ends the subscriptions.
func (w *Watcher) Close() {
	w.mu.Lock()
	for _, ps := range w.pubsubs {
		_ = ps.Close()
	}
	w.pubsubs = map[string]*redis.PubSub{}
	w.mu.Unlock()
	w.wg.Wait()
}

// scanMark is when a family last fully scanned a node, and at which
// subscription epoch.
type scanMark struct {
	epoch int
	at    time.Time
}

// ReadNode reads one node's keys of a family for a sweep: from the keys
// that notifications announced, with a full SCAN when the subscription is
// new or was interrupted, and every fullScanEvery.
func (w *Watcher) ReadNode(ctx context.Context, rd *redisread.Reader, family string, n topology.Node, p *redisread.Plan, fullScanEvery time.Duration, out chan<- []redisread.KeyRead) error {
	wf := w.family(family)
	if wf == nil {
		return fmt.Errorf("family %s is not watched", family)
	}
	epoch, err := w.watch(ctx, n)
	if err != nil {
		return err
	}
	w.mu.Lock()
	mark := w.marks[family][n.Addr]
	w.mu.Unlock()
	full := mark.epoch != epoch || time.Since(mark.at) >= fullScanEvery

	var found map[string]struct{}
	var gone []string
	if full {
		found = map[string]struct{}{}
		wf.beginFullScan(n.Addr)
	}
	// Harvest what the reads say of each key (gone, or found by the full
	// scan) on the way to out.
	mid := make(chan []redisread.KeyRead)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for b := range mid {
			for i := range b {
				switch {
				case b[i].Status == redisread.Gone:
					gone = append(gone, b[i].Key)
				case full:
					found[b[i].Key] = struct{}{}
				}
			}
			select {
			case out <- b:
			case <-ctx.Done():
			}
		}
	}()
	if full {
		err = rd.ScanNode(ctx, n.C, p, mid)
	} else {
		err = rd.ReadKeys(ctx, n.C, p, wf.known(n.Addr), mid)
	}
	close(mid)
	<-done
	if full {
		if err != nil {
			found = nil
		}
		wf.endFullScan(n.Addr, found)
		if err == nil {
			w.mu.Lock()
			w.marks[family][n.Addr] = scanMark{epoch: epoch, at: time.Now()}
			w.mu.Unlock()
		}
	}
	wf.forget(n.Addr, gone)
	return err
}
