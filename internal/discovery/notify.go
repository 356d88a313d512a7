// Package discovery finds a family's keys from keyspace notifications
// (discovery: notify), with a full SCAN through redisread's Reader when
// the subscription is new or was interrupted and every full_scan_interval.
// Plain SCAN discovery (discovery: scan) is the Reader's ScanNode itself:
// its SCAN pages feed the pipelined reads as they arrive.
package discovery

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
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

// Watcher keeps the keys of every notify-mode family, per node, in step
// with keyspace notifications.
type Watcher struct {
	logger *slog.Logger
	db     int
	need   string // notifyClasses of the families
	fams   []*watchedFamily
	// patterns is how many distinct patterns a subscription holds: the
	// count a resubscription's last confirmation carries.
	patterns int
	// marks[family][node] is when the family last fully scanned the node.
	marks map[string]map[string]scanMark

	mu      sync.Mutex
	nodes   map[string]*watchedNode // by node address
	closing chan struct{}
	closed  sync.Once
	wg      sync.WaitGroup
}

// watchedNode is what the watcher knows of one node's notifications.
type watchedNode struct {
	ps *redis.PubSub
	// epoch changes whenever events may have been missed: the subscription
	// is new or was interrupted, or the node stopped publishing.
	// A family's full scan counts only under the epoch it began in.
	epoch int
	// down: the subscription failed and has not been confirmed since.
	down bool
	// events is what the latest check of notify-keyspace-events found.
	events eventsState
}

type eventsState int8

const (
	eventsUnknown eventsState = iota
	eventsOn
	eventsOff
)

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

// NewWatcher returns a watcher for fams on database db. CheckNotify is
// the refusal at start; the watcher checks the setting again on every read
// (ReadNode) and, while it is not what the families need, reads by full
// SCAN.
func NewWatcher(fams []Family, db int, logger *slog.Logger) *Watcher {
	w := &Watcher{logger: logger, db: db, need: notifyClasses(fams), nodes: map[string]*watchedNode{},
		marks: map[string]map[string]scanMark{}, closing: make(chan struct{})}
	distinct := map[string]bool{}
	for _, f := range fams {
		w.fams = append(w.fams, &watchedFamily{
			name: f.Name, match: f.Match, re: f.Re,
			keys: map[string]map[string]struct{}{}, added: map[string]map[string]struct{}{},
		})
		w.marks[f.Name] = map[string]scanMark{}
		distinct[f.Match] = true
	}
	w.patterns = len(distinct)
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

// node returns addr's state, made on first use. Call with w.mu held.
func (w *Watcher) node(addr string) *watchedNode {
	st := w.nodes[addr]
	if st == nil {
		st = &watchedNode{}
		w.nodes[addr] = st
	}
	return st
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
	w.closed.Do(func() { close(w.closing) })
	w.mu.Lock()
	for _, st := range w.nodes {
		if st.ps != nil {
			_ = st.ps.Close()
		}
	}
	w.nodes = map[string]*watchedNode{}
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
// new or was interrupted, every fullScanEvery, and on every sweep while the
// node's notifications cannot be trusted (the subscription is down, or
// notify-keyspace-events lacks what the families need): the figures stay
// those of a full read, at a full read's cost, until they are back.
func (w *Watcher) ReadNode(ctx context.Context, rd *redisread.Reader, family string, n topology.Node, p *redisread.Plan, fullScanEvery time.Duration, out chan<- []redisread.KeyRead) error {
	wf := w.family(family)
	if wf == nil {
		return fmt.Errorf("family %s is not watched", family)
	}
	if err := w.watch(ctx, n); err != nil {
		return err
	}
	if err := w.checkEvents(ctx, n); err != nil {
		return err
	}
	w.mu.Lock()
	st := w.node(n.Addr)
	epoch, trusted := st.epoch, st.events == eventsOn && !st.down
	mark := w.marks[family][n.Addr]
	w.mu.Unlock()
	full := !trusted || mark.epoch != epoch || time.Since(mark.at) >= fullScanEvery

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
	var err error
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
		// An untrusted node's scan is no mark: the first sweep that
		// trusts it again scans it once more, from after the check.
		if err == nil && trusted {
			w.mu.Lock()
			w.marks[family][n.Addr] = scanMark{epoch: epoch, at: time.Now()}
			w.mu.Unlock()
		}
	}
	wf.forget(n.Addr, gone)
	return err
}
