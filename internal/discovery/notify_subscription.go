package discovery

// The subscription to a node's keyspace channels, and its reconnection.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/topology"
)

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
