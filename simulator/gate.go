package simulator

import "sync"

// gate lets Pause stop every writer of the simulation at once. Each step
// that talks to Redis runs between enter and leave; pause refuses new steps
// and waits for the ones in flight, so that once it returns nothing writes
// to Redis until resume.
type gate struct {
	mu     sync.Mutex
	cond   *sync.Cond
	paused bool
	closed bool
	active int
}

func newGate() *gate {
	g := &gate{}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// enter waits while the simulation is paused. It returns false once the
// simulation stops; the caller must then not talk to Redis, nor call leave.
func (g *gate) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.paused && !g.closed {
		g.cond.Wait()
	}
	if g.closed {
		return false
	}
	g.active++
	return true
}

func (g *gate) leave() {
	g.mu.Lock()
	g.active--
	if g.active == 0 {
		g.cond.Broadcast()
	}
	g.mu.Unlock()
}

// wait blocks while paused without entering: for steps that only schedule.
func (g *gate) wait() bool {
	if !g.enter() {
		return false
	}
	g.leave()
	return true
}

func (g *gate) pause() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.paused = true
	for g.active > 0 {
		g.cond.Wait()
	}
}

func (g *gate) resume() {
	g.mu.Lock()
	g.paused = false
	g.cond.Broadcast()
	g.mu.Unlock()
}

func (g *gate) isPaused() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.paused
}

// close releases everyone waiting; enter fails from now on.
func (g *gate) close() {
	g.mu.Lock()
	g.closed = true
	g.cond.Broadcast()
	g.mu.Unlock()
}
