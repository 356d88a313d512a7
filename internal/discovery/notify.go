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

// ErrNoAnswer marks a CheckNotify error that says nothing of the setting:
// Redis did not answer (down, not yet listening, loading its data). Such a
// Redis is not a config error: the exporter starts as scan mode does, its
// sweeps fail until Redis answers, and the watcher checks the setting then
// (Watcher.ReadNode), before it trusts any notification.
var ErrNoAnswer = errors.New("Redis did not answer")

// CheckNotify refuses discovery: notify when Redis is not configured to
// publish the events it relies on, and says exactly what to set. It needs
// CONFIG GET; every node of a cluster is checked. An error that wraps
// ErrNoAnswer is no refusal: the setting could not be read.
func CheckNotify(ctx context.Context, topo *topology.Topology, fams []Family) error {
	need := notifyClasses(fams)
	nodes, err := topo.Nodes(ctx)
	if err != nil {
		return noAnswer(fmt.Errorf("sampling.discovery: notify: cannot reach Redis to check notify-keyspace-events: %w", err))
	}
	for _, n := range nodes {
		have, err := configGet(ctx, n)
		if err != nil {
			return noAnswer(fmt.Errorf("sampling.discovery: notify: CONFIG GET notify-keyspace-events on %s: %w", n.Addr, err))
		}
		if err := notifyProblem(n.Addr, have, need); err != nil {
			return err
		}
	}
	return nil
}

func configGet(ctx context.Context, n topology.Node) (string, error) {
	v, err := n.C.ConfigGet(ctx, "notify-keyspace-events").Result()
	return v["notify-keyspace-events"], err
}

// notifyProblem says what node addr lacks of need, and how to set it.
func notifyProblem(addr, have, need string) error {
	missing := missingClasses(have, need)
	if missing == "" {
		return nil
	}
	return fmt.Errorf("sampling.discovery: notify needs keyspace notifications, but %s has notify-keyspace-events=%q (missing %q); set it with: CONFIG SET notify-keyspace-events %s (or notify-keyspace-events %s in redis.conf), or use discovery: scan",
		addr, have, missing, mergeClasses(have, need), mergeClasses(have, need))
}

// noAnswer wraps err in ErrNoAnswer unless Redis answered it: a refusal
// (NOPERM, CONFIG renamed away) is an answer and stays a config error.
func noAnswer(err error) error {
	if answered(err) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrNoAnswer, err)
}

// answered reports whether err is Redis's own reply to the command, as
// opposed to no reply at all (a dial, a timeout, a closed connection) or
// the reply of a server that is not ready to say anything yet.
func answered(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	return !redis.IsLoadingError(err) && !redis.IsMasterDownError(err) && !redis.IsTryAgainError(err) &&
		!redis.IsClusterDownError(err) && !redis.IsMaxClientsError(err) && !strings.HasPrefix(err.Error(), "BUSY ")
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

// watch makes sure node n has a confirmed subscription.
func (w *Watcher) watch(ctx context.Context, n topology.Node) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.node(n.Addr)
	if st.ps != nil {
		return nil
	}
	sub, ok := n.C.(interface {
		PSubscribe(ctx context.Context, channels ...string) *redis.PubSub
	})
	if !ok {
		return fmt.Errorf("node %s: client cannot subscribe", n.Addr)
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
			return fmt.Errorf("node %s: PSUBSCRIBE: %w", n.Addr, err)
		}
	}
	st.ps, st.down = ps, false
	st.epoch++
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		w.receive(n.Addr, ps, prefix)
	}()
	return nil
}

// Reconnecting a subscription backs off as sweeps do, doubling from
// firstRetry, but only up to maxRetry: until the subscription is back every
// sweep reads the node by full SCAN, which is what notify mode is there to
// spare Redis, so a Redis that is back should be subscribed to soon.
const (
	firstRetry = 100 * time.Millisecond
	maxRetry   = 10 * time.Second
)

func retryAfter(failures int) time.Duration {
	if failures > 8 {
		return maxRetry
	}
	return min(firstRetry<<(failures-1), maxRetry)
}

func (w *Watcher) receive(addr string, ps *redis.PubSub, prefix string) {
	failures := 0
	var since time.Time
	for {
		msg, err := ps.Receive(context.Background())
		if err != nil {
			if errors.Is(err, redis.ErrClosed) {
				return
			}
			// go-redis reconnects and resubscribes when Receive is
			// called again, and nothing paces it but this loop: the
			// wait below is the back-off of the reconnection itself.
			// Events in the gap are gone: the epoch moves on, and until
			// the subscription is confirmed again the node is read by
			// full SCAN.
			w.mu.Lock()
			st := w.nodes[addr]
			if st == nil || st.ps != ps {
				w.mu.Unlock()
				return
			}
			st.epoch++
			st.down = true
			var reply redis.Error
			refused := errors.As(err, &reply)
			if refused {
				// Redis refused the resubscription (NOPERM: the ACL lost
				// &__keyspace@*) over a connection that works, so go-redis
				// would wait on it for events that never come. The next
				// sweep subscribes afresh, and fails with the refusal
				// until Redis takes it.
				st.ps = nil
			}
			w.mu.Unlock()
			if refused {
				_ = ps.Close()
				w.logger.Warn("keyspace subscription refused", "node", addr, "action", "subscribe again at the next sweep", "err", err)
				return
			}
			failures++
			if failures == 1 {
				since = time.Now()
			}
			wait := retryAfter(failures)
			// One line for the first failure, then one each time the run
			// doubles, as for failed sweeps: a Redis down for an hour
			// logs a dozen lines, not one per attempt.
			if failures&(failures-1) == 0 {
				w.logger.Warn("keyspace subscription interrupted", "node", addr, "action", "full SCAN of the node every sweep until it is back",
					"failures_in_a_row", failures, "next_try_in", wait, "err", err)
			}
			select {
			case <-w.closing:
				return
			case <-time.After(wait):
			}
			continue
		}
		switch m := msg.(type) {
		case *redis.Subscription:
			// The last confirmation of a resubscription: events are
			// promised again from here. What was written in the gap is
			// found by a full scan: the epoch moved on at the failure,
			// and a scan while down set no mark.
			if failures > 0 && m.Kind == "psubscribe" && m.Count >= w.patterns {
				w.mu.Lock()
				if st := w.nodes[addr]; st != nil && st.ps == ps {
					st.down = false
				}
				w.mu.Unlock()
				w.logger.Info("keyspace subscription restored", "node", addr, "failures_in_a_row", failures, "down_for", time.Since(since).Round(time.Millisecond))
				failures = 0
			}
		case *redis.Message:
			if key, ok := strings.CutPrefix(m.Channel, prefix); ok {
				w.event(addr, key, m.Payload)
			}
		}
	}
}

// checkEvents reads node n's notify-keyspace-events and records whether it
// publishes what the families need. It is read on every read of the node,
// one CONFIG GET per family, node and sweep: a setting turned off at run time
// (CONFIG SET, a restart without it in redis.conf) drops no connection and
// says nothing to a subscriber, so only reading it again shows it, and
// checked at every sweep no sweep trusts notifications that stopped before
// it began. Whatever was missed while it was off is found by the full scan
// that the epoch's change calls for once it is back. The one gap no check
// can see is the setting turned off and on again between two checks: the
// full_scan_interval repairs that, as it repairs any missed event.
// An error is returned only when Redis did not answer, as the reads that
// follow would fail too; a refusal (NOPERM) leaves the setting unknown,
// and the node is read by full SCAN.
func (w *Watcher) checkEvents(ctx context.Context, n topology.Node) error {
	have, err := configGet(ctx, n)
	if err != nil && !answered(err) {
		return fmt.Errorf("CONFIG GET notify-keyspace-events on %s: %w", n.Addr, err)
	}
	problem := notifyProblem(n.Addr, have, w.need)
	if err != nil {
		problem = fmt.Errorf("sampling.discovery: notify: cannot read notify-keyspace-events on %s: %w", n.Addr, err)
	}
	w.mu.Lock()
	st := w.node(n.Addr)
	was := st.events
	if problem == nil {
		st.events = eventsOn
	} else {
		st.events = eventsOff
		if was != eventsOff {
			st.epoch++
		}
	}
	w.mu.Unlock()
	// Once each way, however many families and sweeps see the same.
	switch {
	case problem != nil && was != eventsOff:
		w.logger.Warn("keyspace notifications are off: every sweep reads the node by full SCAN until they are back",
			"node", n.Addr, "err", problem)
	case problem == nil && was == eventsOff:
		w.logger.Info("keyspace notifications are back: sweeps read the keys they announce again, after one full SCAN",
			"node", n.Addr, "notify_keyspace_events", have)
	}
	return nil
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
