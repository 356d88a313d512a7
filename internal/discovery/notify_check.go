package discovery

// Whether Redis publishes the keyspace events a notify-mode family needs:
// checked once at start (CheckNotify, which refuses a Redis that answers
// without them) and again at every sweep (Watcher.checkEvents), since a
// CONFIG SET or a restart can turn them off without a word to a
// subscriber.

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/topology"
)

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
