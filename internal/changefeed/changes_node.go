package changefeed

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/cespare/xxhash/v2"
)

// One node's side of the change feed: reading its invalidations, keeping
// its tracking alive, the barrier before a sweep takes its keys, and
// letting it go.

// receive reads invalidations until the connection ends.
func (f *Feed) receive(fn *feedNode) {
	// The names of one message, gathered while it is read and added to
	// the families' sets under one lock.
	var batch struct {
		buf  []byte
		ends []int
	}
	gather := func(b []byte) {
		batch.buf = append(batch.buf, b...)
		batch.ends = append(batch.ends, len(batch.buf))
	}
	for {
		batch.buf, batch.ends = batch.buf[:0], batch.ends[:0]
		msg, err := fn.sub.ReadPush(gather)
		if err != nil {
			f.drop(fn, "subscription: "+err.Error())
			return
		}
		switch msg.Kind {
		case "pong":
			if msg.Len < 2 {
				continue
			}
			// Answers come in order: the invalidations of every write
			// before this PING have been read.
			fn.pingMu.Lock()
			if ch, ok := fn.pings[msg.Arg]; ok {
				close(ch)
				delete(fn.pings, msg.Arg)
			}
			fn.pingMu.Unlock()
		case "message":
			if msg.Len < 3 {
				continue
			}
			if !msg.List {
				// No key: a FLUSHALL, or a FLUSHDB of some database.
				// Nothing is lost: a prefix asked for with BCAST
				// outlives a flush, and every key written after it is
				// named. Whether it emptied the family's database
				// is the sweep's to find out (sweep/probe.go).
				fn.mu.Lock()
				for _, d := range fn.dirty {
					d.flushes++
				}
				fn.mu.Unlock()
				continue
			}
			f.messages.Add(1)
			f.names.Add(uint64(len(batch.ends)))
			fams := f.families()
			fn.mu.Lock()
			start := 0
			for _, end := range batch.ends {
				key := batch.buf[start:end]
				start = end
				if !f.shard.Owns(unsafe.String(unsafe.SliceData(key), len(key))) {
					continue
				}
				var h uint64
				for _, fam := range fams {
					if d := fn.dirty[fam.name]; d != nil && !d.over && fam.matches(key) {
						if h == 0 {
							h = xxhash.Sum64(key)
						}
						d.add(key, h)
					}
				}
			}
			fn.mu.Unlock()
		}
		if cap(batch.buf) > maxBatch {
			// One huge key name must not stay allocated.
			batch.buf = nil
		}
	}
}

// maxBatch bounds the buffer receive keeps for the names of a message.
const maxBatch = 1 << 20

// keepAlive pings the tracking connection: tracking ends with it, and
// without the push messages of RESP3 nothing else would tell.
// A node no sweep has asked about for idle is let go.
func (f *Feed) keepAlive(fn *feedNode, idle time.Duration) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-fn.done:
			return
		case <-t.C:
		}
		if time.Since(time.Unix(0, fn.used.Load())) > idle {
			f.drop(fn, errIdle)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := fn.track.Call(ctx, "PING")
		cancel()
		if err != nil {
			f.drop(fn, "tracking connection: "+err.Error())
			return
		}
	}
}

// barrier waits until Redis has answered a PING on the subscribed
// connection: the invalidations of every write before it are in. The
// PING carries a token of its own: another caller's answer, received
// while this one waits, is not this one's.
func (fn *feedNode) barrier(ctx context.Context) error {
	fn.pingMu.Lock()
	fn.pingN++
	tok := "b" + strconv.FormatUint(fn.pingN, 10)
	answered := make(chan struct{})
	fn.pings[tok] = answered
	fn.pingMu.Unlock()
	defer func() {
		fn.pingMu.Lock()
		delete(fn.pings, tok)
		fn.pingMu.Unlock()
	}()
	fn.wmu.Lock()
	err := fn.sub.Send("PING", tok)
	fn.wmu.Unlock()
	if err != nil {
		return err
	}
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case <-answered:
		return nil
	case <-fn.done:
		return errors.New("connection lost")
	case <-t.C:
		return errors.New("no answer to PING within 5s")
	case <-ctx.Done():
		return ctx.Err()
	}
}

// errIdle is why a node no sweep asks about is dropped.
const errIdle = "no sweep asked for this node's changes"

// drop marks a node's tracking broken and closes it; the next Changes
// reconnects under a new epoch.
func (f *Feed) drop(fn *feedNode, why string) {
	fn.mu.Lock()
	if fn.broken {
		fn.mu.Unlock()
		return
	}
	fn.broken = true
	close(fn.done)
	fn.mu.Unlock()
	_ = fn.sub.Close()
	_ = fn.track.Close()
	f.mu.Lock()
	closing := f.nodes == nil
	if !closing && f.nodes[fn.addr] == fn {
		// What it collected goes with it.
		delete(f.nodes, fn.addr)
	}
	refused := !closing && strings.Contains(why, "NOPERM")
	if refused {
		// A command tracking needs is not allowed: reconnecting every
		// sweep would cost each sweep a connection and a wait for
		// nothing. Try again in a minute, as after a refused connect.
		f.refused[fn.addr] = time.Now()
		if !f.warned[fn.addr] {
			f.warned[fn.addr] = true
			f.logger.Warn("cannot track changes; reading every key every sweep", "node", fn.addr, "err", why)
		}
	}
	f.mu.Unlock()
	if !closing && !refused && why != errIdle && !strings.Contains(why, "use of closed network connection") {
		// Info: nothing is wrong with the figures, the next sweep costs
		// a full read.
		f.logger.Info("change tracking lost; the next sweep reads every key", "node", fn.addr, "reason", why)
	}
}
