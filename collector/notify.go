package collector

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

	"github.com/slotexporter/slot_exporter/config"
)

// With discovery: notify, the set of keys to read follows keyspace
// notifications instead of a SCAN of the whole keyspace, which costs in
// proportion to every key in Redis, related or not. A full SCAN still runs
// every full_scan_interval to repair whatever the notifications missed
// (a dropped subscription, keys written before the exporter started).

// notifyClasses are the notify-keyspace-events flags discovery: notify needs:
// K (keyspace channel), g (del, rename, expire), x (expired), e (evicted),
// z (zadd and friends) and $ (set, incr, decr) for counter families.
func notifyClasses(cfg *config.Config) string {
	need := "Kgxez"
	for _, f := range cfg.Families {
		if f.Kind == config.KindCounter {
			need += "$"
			break
		}
	}
	return need
}

// CheckNotify refuses discovery: notify when Redis is not configured to
// publish the events it relies on, and says exactly what to set. It needs
// CONFIG GET; every node of a cluster is checked.
func CheckNotify(ctx context.Context, client redis.UniversalClient, cfg *config.Config) error {
	if cfg.Sampling.Discovery != config.DiscoveryNotify {
		return nil
	}
	need := notifyClasses(cfg)
	nodes, err := NewTopology(client, false).Nodes(ctx)
	if err != nil {
		return fmt.Errorf("sampling.discovery: notify: cannot reach Redis to check notify-keyspace-events: %w", err)
	}
	for _, n := range nodes {
		v, err := n.c.ConfigGet(ctx, "notify-keyspace-events").Result()
		if err != nil {
			return fmt.Errorf("sampling.discovery: notify: CONFIG GET notify-keyspace-events on %s: %w", n.addr, err)
		}
		have := v["notify-keyspace-events"]
		if missing := missingClasses(have, need); missing != "" {
			return fmt.Errorf("sampling.discovery: notify needs keyspace notifications, but %s has notify-keyspace-events=%q (missing %q); set it with: CONFIG SET notify-keyspace-events %s (or notify-keyspace-events %s in redis.conf), or use discovery: scan",
				n.addr, have, missing, mergeClasses(have, need), mergeClasses(have, need))
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

// keyWatcher keeps the keys of every notify-mode family, per node, in step
// with keyspace notifications.
type keyWatcher struct {
	logger *slog.Logger
	db     int
	fams   []*watchedFamily

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

func newKeyWatcher(cfg *config.Config, logger *slog.Logger) (*keyWatcher, error) {
	w := &keyWatcher{logger: logger, db: cfg.Redis.DB, pubsubs: map[string]*redis.PubSub{}, epoch: map[string]int{}}
	for _, f := range cfg.Families {
		expr, _, err := config.GlobToRegexp(f.Match)
		if err != nil {
			return nil, err
		}
		re, err := regexp.Compile(expr)
		if err != nil {
			return nil, err
		}
		w.fams = append(w.fams, &watchedFamily{
			name: f.Name, match: f.Match, re: re,
			keys: map[string]map[string]struct{}{}, added: map[string]map[string]struct{}{},
		})
	}
	return w, nil
}

func (w *keyWatcher) family(name string) *watchedFamily {
	for _, f := range w.fams {
		if f.name == name {
			return f
		}
	}
	return nil
}

// watch makes sure node n has a confirmed subscription and returns the
// node's epoch.
func (w *keyWatcher) watch(ctx context.Context, n node) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.pubsubs[n.addr]; ok {
		return w.epoch[n.addr], nil
	}
	sub, ok := n.c.(interface {
		PSubscribe(ctx context.Context, channels ...string) *redis.PubSub
	})
	if !ok {
		return 0, fmt.Errorf("node %s: client cannot subscribe", n.addr)
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
			return 0, fmt.Errorf("node %s: PSUBSCRIBE: %w", n.addr, err)
		}
	}
	w.pubsubs[n.addr] = ps
	w.epoch[n.addr]++
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		w.receive(n.addr, ps, prefix)
	}()
	return w.epoch[n.addr], nil
}

func (w *keyWatcher) receive(addr string, ps *redis.PubSub, prefix string) {
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
			w.logger.Warn("keyspace notification subscription interrupted; the node will be rescanned", "node", addr, "err", err)
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

func (w *keyWatcher) event(addr, key, ev string) {
	var add bool
	switch ev {
	case "del", "expired", "evicted", "rename_from", "move_from":
	case "zadd", "zincr", "zincrby", "zunionstore", "zinterstore", "zdiffstore", "zrangestore",
		"set", "incrby", "incrbyfloat", "decrby", "append", "setrange", "rename_to", "move_to", "restore", "copy_to":
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

func (w *keyWatcher) close() {
	w.mu.Lock()
	for _, ps := range w.pubsubs {
		_ = ps.Close()
	}
	w.pubsubs = map[string]*redis.PubSub{}
	w.mu.Unlock()
	w.wg.Wait()
}

// readKnown reads a list of keys in pipelined batches of scan_count, the way
// scanNode reads SCAN pages.
func readKnown(ctx context.Context, c redis.Cmdable, p *readPlan, zc *zcountPlan, keys []string, out chan<- []keyRead) error {
	step := int(p.scanCount)
	if step < 1 {
		step = 1000
	}
	for i := 0; i < len(keys); i += step {
		batch := keys[i:min(i+step, len(keys))]
		if err := p.wait(ctx, len(batch)); err != nil {
			return err
		}
		reads, err := readBatch(ctx, c, p, zc, batch)
		if err != nil {
			return err
		}
		select {
		case out <- reads:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// scanMark is when a family last fully scanned a node, and at which
// subscription epoch.
type scanMark struct {
	epoch int
	at    time.Time
}

// readNode reads one node's keys for a sweep: by SCAN, or, with discovery:
// notify, from the keys that notifications announced, with a full SCAN
// when the subscription is new or was interrupted, and every
// full_scan_interval.
func (r *familyRunner) readNode(ctx context.Context, n node, p *readPlan, zc *zcountPlan, out chan<- []keyRead) error {
	w := r.s.watcher
	if w == nil {
		return scanNode(ctx, n.c, p, zc, out)
	}
	wf := w.family(r.fam.Name)
	epoch, err := w.watch(ctx, n)
	if err != nil {
		return err
	}
	r.scanMu.Lock()
	mark := r.scanned[n.addr]
	r.scanMu.Unlock()
	full := mark.epoch != epoch || time.Since(mark.at) >= r.sampling.FullScanInterval

	var found map[string]struct{}
	var gone []string
	if full {
		found = map[string]struct{}{}
		wf.beginFullScan(n.addr)
	}
	mid := make(chan []keyRead)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for b := range mid {
			for i := range b {
				switch {
				case b[i].gone:
					gone = append(gone, b[i].key)
				case full:
					found[b[i].key] = struct{}{}
				}
			}
			select {
			case out <- b:
			case <-ctx.Done():
			}
		}
	}()
	if full {
		err = scanNode(ctx, n.c, p, zc, mid)
	} else {
		err = readKnown(ctx, n.c, p, zc, wf.known(n.addr), mid)
	}
	close(mid)
	<-done
	if full {
		if err != nil {
			found = nil
		}
		wf.endFullScan(n.addr, found)
		if err == nil {
			r.scanMu.Lock()
			r.scanned[n.addr] = scanMark{epoch: epoch, at: time.Now()}
			r.scanMu.Unlock()
		}
	}
	wf.forget(n.addr, gone)
	return err
}
