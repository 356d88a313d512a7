package simulator

import (
	"strconv"
	"time"

	"github.com/slotexporter/slot_exporter/recipe/streamqueue"
)

// The streams' producers and consumers.

// consumer is how one consumer of a stream behaves.
type consumer struct {
	name  string
	claim bool          // runs the claim loop before each read
	work  time.Duration // fixed time per entry; 0: jitter(Process)
	doom  bool          // killed right after its first read that returned an entry
}

func (w *streamWorkload) consumers(sq *streamQueue) []consumer {
	switch sq.mode {
	case StreamDeadConsumer:
		return []consumer{{name: "c0", doom: true}, {name: "c1"}}
	case StreamLagging:
		return []consumer{{name: "c0", claim: true, work: 2 * w.o.AddInterval}}
	default:
		return []consumer{{name: "c0", claim: true}}
	}
}

func (w *streamWorkload) start() {
	for _, sq := range w.streams {
		w.s.wg.Add(1)
		go w.produce(sq)
		for _, c := range w.consumers(sq) {
			w.s.wg.Add(1)
			go w.consume(sq, c)
		}
	}
}

func (w *streamWorkload) produce(sq *streamQueue) {
	defer w.s.wg.Done()
	s := w.s
	// The workload owns its keys: what a previous run left is not its truth.
	if !s.step(func() {
		if w.check(s.c.Del(s.rctx, sq.st.Key()).Err()) {
			w.check(sq.st.CreateGroup(s.rctx, "$"))
		}
	}) {
		return
	}
	close(sq.ready)
	if !s.sleep(time.Duration(sq.rng.Float64() * float64(w.o.AddInterval))) {
		return
	}
	next := time.Now()
	for n := 1; ; n++ {
		fields := []string{"job", strconv.Itoa(n)}
		if sq.mode == StreamPoison && n == poisonEntry {
			fields = append(fields, "poison", "1")
		}
		if !s.step(func() {
			_, err := sq.st.Add(s.rctx, fields...)
			if w.check(err) {
				w.mu.Lock()
				w.added++
				sq.added++
				w.mu.Unlock()
			}
		}) {
			return
		}
		next = next.Add(w.o.AddInterval)
		if time.Until(next) < -w.o.AddInterval {
			next = time.Now() // far behind (a pause, a slow Redis): no burst to catch up
		}
		if !s.sleep(time.Until(next)) {
			return
		}
	}
}

func (w *streamWorkload) consume(sq *streamQueue, c consumer) {
	defer w.s.wg.Done()
	s := w.s
	select {
	case <-sq.ready:
	case <-s.stop:
		return
	}
	for {
		var got []streamqueue.Entry
		if !s.step(func() { got = w.next(sq, c) }) {
			return
		}
		if len(got) == 0 {
			if s.stopping() {
				return
			}
			continue
		}
		e := got[0]
		switch {
		case c.doom:
			return // killed: its entry stays pending, and it stays in the group
		case e.Fields["poison"] == "1":
			// The entry killed this consumer; a new process takes its name.
			if !s.sleep(w.o.RestartDelay) {
				return
			}
			continue
		}
		d := c.work
		if d == 0 {
			d = jitter(sq.rng, w.o.Process)
		}
		if !s.sleep(d) {
			return
		}
		if !s.step(func() {
			n, err := sq.st.Ack(s.rctx, e.ID)
			if w.check(err) && n == 1 {
				w.mu.Lock()
				w.acked++
				delete(sq.pending, e.ID)
				w.mu.Unlock()
			}
		}) {
			return
		}
	}
}

// next claims an idle entry if c runs the claim loop, else (or if there
// was none) reads a new one.
func (w *streamWorkload) next(sq *streamQueue, c consumer) []streamqueue.Entry {
	ctx := w.s.rctx
	if c.claim {
		sent := time.Now()
		got, err := sq.st.Claim(ctx, c.name, w.o.MinIdle, 1)
		if !w.check(err) {
			return nil
		}
		at := span{sent: sent, replied: time.Now()}
		w.mu.Lock()
		sq.seen[c.name] = at
		for _, e := range got {
			w.claimed++
			p := sq.pending[e.ID]
			if p == nil { // not from this run: count it from here
				p = &pendingEntry{}
				sq.pending[e.ID] = p
			}
			p.consumer, p.delivered = c.name, at
			p.deliveries++
		}
		w.mu.Unlock()
		if len(got) > 0 {
			return got
		}
	}
	sent := time.Now()
	got, err := sq.st.Read(ctx, c.name, 1, recipeBlock)
	if !w.check(err) {
		return nil
	}
	at := span{sent: sent, replied: time.Now()}
	w.mu.Lock()
	defer w.mu.Unlock()
	sq.seen[c.name] = at
	for _, e := range got {
		w.delivered++
		sq.delivered++
		sq.pending[e.ID] = &pendingEntry{consumer: c.name, delivered: at, deliveries: 1}
	}
	return got
}

func (w *streamWorkload) check(err error) bool {
	if err == nil {
		return true
	}
	w.mu.Lock()
	w.errors++
	w.mu.Unlock()
	return false
}
