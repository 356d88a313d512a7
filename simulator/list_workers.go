package simulator

import (
	"fmt"
	"slices"
	"time"

	"github.com/slotexporter/slot_exporter/recipe/listqueue"
)

// The list queues' producers and workers.

func (w *listWorkload) start() {
	for _, q := range w.queues {
		w.s.wg.Add(1)
		go w.produce(q)
		if q.mode != ListNoConsumer {
			w.s.wg.Add(1)
			go w.work(q)
		}
	}
}

func (w *listWorkload) produce(q *listQueue) {
	defer w.s.wg.Done()
	s := w.s
	// The workload owns its keys: what a previous run left is not its truth.
	if !s.step(func() { w.check(s.c.Del(s.rctx, q.q.Key(), q.q.ProcessingKey()).Err()) }) {
		return
	}
	close(q.ready)
	if !s.sleep(time.Duration(q.rng.Float64() * float64(w.o.PushInterval))) {
		return
	}
	next := time.Now()
	for n := 1; ; n++ {
		job := fmt.Sprintf("%s-%s-%d", s.runID, q.user, n)
		if !s.step(func() { w.push(q, job) }) {
			return
		}
		next = next.Add(w.o.PushInterval)
		if time.Until(next) < -w.o.PushInterval {
			next = time.Now() // far behind (a pause, a slow Redis): no burst to catch up
		}
		if !s.sleep(time.Until(next)) {
			return
		}
	}
}

// push adds job to the model before it is sent, so that a worker's take of
// it always finds it there.
func (w *listWorkload) push(q *listQueue, job string) {
	w.mu.Lock()
	if len(q.items) >= listMaxItems {
		w.mu.Unlock()
		return
	}
	if len(q.items) == 0 {
		q.headSince = time.Now()
	}
	q.items = append(q.items, job)
	w.mu.Unlock()
	_, err := q.q.Push(w.s.rctx, job)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.errors++
		if i := slices.Index(q.items, job); i >= 0 {
			q.items = slices.Delete(q.items, i, i+1)
		}
		return
	}
	w.pushed++
}

func (w *listWorkload) work(q *listQueue) {
	defer w.s.wg.Done()
	s := w.s
	select {
	case <-q.ready:
	case <-s.stop:
		return
	}
	killed := false
	for {
		var job listqueue.Taken
		var ok bool
		if !s.step(func() {
			var err error
			job, ok, err = q.q.Take(s.rctx, recipeBlock)
			if err != nil {
				w.check(err)
			}
			if ok {
				w.took(q, job.Job)
			}
		}) {
			return
		}
		if !ok {
			if s.stopping() {
				return
			}
			continue
		}
		if q.mode == ListKilledWorker && !killed {
			killed = true
			w.mu.Lock()
			q.orphan = job.Job
			w.mu.Unlock()
			if !s.sleep(w.o.RestartDelay) {
				return
			}
			continue
		}
		if !s.sleep(jitter(q.rng, w.o.Process)) {
			return
		}
		if !s.step(func() {
			done, err := q.q.Complete(s.rctx, job)
			if w.check(err) && done {
				w.completed1(q, job.Job)
			}
		}) {
			return
		}
	}
}

// took moves job from the queue's model into its processing list's.
func (w *listWorkload) took(q *listQueue, job string) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.taken++
	if i := slices.Index(q.items, job); i >= 0 {
		q.items = slices.Delete(q.items, i, i+1)
		if i == 0 {
			q.headSince = now
		}
	}
	if len(q.processing) == 0 {
		q.procHeadSince = now
	}
	q.processing = append(q.processing, job)
}

func (w *listWorkload) completed1(q *listQueue, job string) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.completed++
	if i := slices.Index(q.processing, job); i >= 0 {
		q.processing = slices.Delete(q.processing, i, i+1)
		if i == 0 {
			q.procHeadSince = now
		}
	}
}

func (w *listWorkload) check(err error) bool {
	if err == nil {
		return true
	}
	w.mu.Lock()
	w.errors++
	w.mu.Unlock()
	return false
}
