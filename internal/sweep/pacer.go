package sweep

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/slotexporter/slot_exporter/internal/changefeed"
	"github.com/slotexporter/slot_exporter/internal/topology"
)

// cpuPacer paces every family's reads toward a share of Redis's CPU
// (sampling.redis_cpu_share of one core), from Redis's own measure of its
// busy time: INFO cpu (used_cpu_sys + used_cpu_user), read once a second.
// A second in which the exporter read nothing measures the baseline (the
// application's load); a second in which it read keys attributes what
// Redis used above the baseline to those keys. Their cost per key (an
// average that follows changes within seconds) sets the key rate: share /
// cost. An application burst during reads is taken for exporter cost and
// slows the reads down, the safe side; a lull makes them faster for a
// few seconds at most.
//
// While the exporter reads without pause (a large change backlog, a full
// read), no second is free of its reads, and the application's load could
// drift unseen and be taken for exporter cost. So every quietEvery the
// pacer holds the reads for one second, to measure the baseline again.
// The share is an average over time: while the holds go on, the reads
// between them go that much faster (a fifth of their time held, a
// quarter faster), so a long read such as the first gets its share and
// not four fifths of it. `make bench`'s first picture of 1M slot sets
// took 94 s with the holds uncounted.
//
// The share is of one core in all, as sampling.redis_cpu_share says: in a
// cluster the CPU of every node read is summed, so n masters share the
// tenth between them (`make bench`, 3 masters: 2.2% each, 6.6% in all).
// A share per node would read n times faster; it would also let one hot
// node take more than its tenth, which the sum does not see.
type cpuPacer struct {
	share   float64
	limiter *rate.Limiter
	keys    atomic.Uint64 // keys the budget let through, all families
	active  atomic.Int32  // sweeps reading now

	mu    sync.Mutex
	nodes []topology.Node
	// invalidations counts what client tracking has had Redis send (nil
	// without tracking); invShare is what sending it costs Redis, as a
	// share of a core.
	invalidations func() changefeed.Invalidations
	invShare      float64
	cost          float64 // CPU seconds per key read
	baseline      float64 // CPU seconds per second without exporter reads
	// haveBaseline is set once a second without reads has been
	// measured: the first one is the baseline, not a fraction of it
	// (an average from zero took the application's load for exporter
	// cost for the first half minute).
	haveBaseline bool
	last         cpuSample
	haveLast     bool
	// lastQuiet is when the baseline was last measured; quiet is set
	// while the reads are held for it.
	lastQuiet time.Time
	quiet     bool
	// holding is set by a hold and cleared by a second in which nobody
	// read: while it is set, the reads make up for the held seconds.
	holding bool
	// acc is what has accrued since the cost was last updated: an
	// update needs enough time and keys that their cost stands out of
	// the application's noise.
	accCPU, accDt, accKeys float64
	warned                 bool
	cancel                 context.CancelFunc
	done                   chan struct{}
}

type cpuSample struct {
	cpu     float64
	at      time.Time
	keys    uint64
	inv     changefeed.Invalidations
	readers bool
}

// What Redis spends on invalidations. In broadcasting mode it gathers the
// key names written in a turn of its event loop and sends them to the
// feed's connection as one message after the turn: a socket write per
// message, a little per name. Measured on this project's 2-core machine
// (redis-server 7.0, one tracking client, redis-benchmark's ZADDs of
// random slot sets from 4 clients, Redis's CPU per write with the client
// against without it, messages counted on the subscribed connection),
// busy (a write cost 14 µs unpipelined, 2.8 µs 10 to a round trip, about
// three times a quiet machine's): unpipelined, 0.22 to 0.65 messages a
// write cost 1.5 to 4.3 µs more a write; pipelined, 0.04 messages a write
// (26 names each) 0.6 to 1.1 µs more. That fits about 6 µs a message and
// 0.5 µs a name there; scaled to a quiet machine, 2 µs and 0.3 µs (on the
// safe side). The 0.5 µs a name charged before, whatever the messages,
// undercharged an application whose writes come one to a turn, and the
// pace took 12.5% and 19.3% of a core at 10% and 25% of 1M sets written
// per 5 s (`make bench`). The cost cannot be measured while the exporter
// runs (a held second stops the reads, not the writes), so these are
// priors.
const (
	invalidationMessageCost = 2e-6
	invalidationNameCost    = 0.3e-6
)

// invalidationCost is what Redis spent on the invalidations between two
// counts.
func invalidationCost(from, to changefeed.Invalidations) float64 {
	return float64(to.Messages-from.Messages)*invalidationMessageCost + float64(to.Names-from.Names)*invalidationNameCost
}

// priorCost is the cost per key assumed until one is measured: a slot
// set's ZRANGE WITHSCORES and PTTL and its share of SCAN, socket work
// included, read paced. Unpaced, `make bench` measured 3.6 µs at 1M keys;
// paced in batches of 100 between idle time, Redis spent 7.4 µs a key at
// 300k sets and 7 to 11 µs at 1M (BenchmarkFirstPicture). A prior of 4 µs
// let the first read of 1M sets take 14.5% of a core for a minute while
// the average caught up; the paced figure errs on the safe side.
const priorCost = 8e-6

func newCPUPacer(share float64) *cpuPacer {
	p := &cpuPacer{share: share, cost: priorCost}
	p.limiter = rate.NewLimiter(rate.Limit(share/priorCost), burstOf(share/priorCost))
	return p
}

// burstOf is 10 ms of reads at rate r: after a pause (the held second,
// the gap between sweeps) a larger bucket lets that many keys through at
// once, and the application's commands queue behind them.
func burstOf(r float64) int { return max(int(r/100), 1) }

// setShare takes a reloaded share, keeping what was measured.
func (p *cpuPacer) setShare(share float64) {
	p.mu.Lock()
	p.share = share
	p.apply()
	p.mu.Unlock()
}

// quietEvery is how often the reads are held for a second to measure the
// baseline while they would otherwise never stop.
const quietEvery = 5 * time.Second

// quietKeys is how many keys a second may hold and still measure the
// baseline: their cost is lost in the noise.
const quietKeys = 50

// apply sets the limiter from the share and the cost. Called with mu.
// What Redis spends on invalidations comes out of the share: the reads
// get the rest, and never less than a tenth of it, so that a storm of
// writes slows the reads rather than stopping them.
func (p *cpuPacer) apply() {
	share := max(p.share-p.invShare, p.share/10)
	r := share / p.cost
	if p.holding {
		r *= holdMakeUp
	}
	p.limiter.SetLimit(rate.Limit(r))
	p.limiter.SetBurst(burstOf(r))
}

// setInvalidations takes the count of a (reloaded) change feed; nil: none.
func (p *cpuPacer) setInvalidations(count func() changefeed.Invalidations) {
	p.mu.Lock()
	p.invalidations, p.invShare = count, 0
	p.haveLast = false
	p.mu.Unlock()
}

// hold stops the reads for a second from now by putting the limiter a
// second's worth of keys in debt: reads wait for the debt to be paid and
// then go on at the full rate. Lowering the rate instead (to 1 key/s, as
// it once did) left every wait reserved during the hold sleeping at that
// rate long after it: with a few readers queued, sweeps overran by
// seconds or missed their deadline. Called with mu.
func (p *cpuPacer) hold(now time.Time) {
	if !p.holding {
		p.holding = true
		p.apply()
	}
	n := max(int(float64(p.limiter.Limit())*time.Second.Seconds()), 1)
	b := p.limiter.Burst()
	p.limiter.SetBurstAt(now, n)
	p.limiter.ReserveN(now, n)
	p.limiter.SetBurstAt(now, b)
}

// holdMakeUp is how much faster the reads go while holds take one second
// in every quietEvery: over the quietEvery, they read what the share
// allows.
const holdMakeUp = float64(quietEvery) / float64(quietEvery-time.Second)

// KeysPerSecond is the key rate the pacer allows now.
func (p *cpuPacer) KeysPerSecond() float64 { return float64(p.limiter.Limit()) }

func (p *cpuPacer) setNodes(nodes []topology.Node) {
	p.mu.Lock()
	p.nodes = nodes
	p.mu.Unlock()
}

// start measures once a second until stop.
func (p *cpuPacer) start(logger *slog.Logger) {
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel, p.done = cancel, make(chan struct{})
	go func() {
		defer close(p.done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			p.tick(ctx, logger)
		}
	}()
}

func (p *cpuPacer) stop() {
	if p.cancel != nil {
		p.cancel()
		<-p.done
		p.cancel = nil
	}
}

func (p *cpuPacer) tick(ctx context.Context, logger *slog.Logger) {
	p.mu.Lock()
	nodes, inv := p.nodes, p.invalidations
	p.mu.Unlock()
	if len(nodes) == 0 {
		return
	}
	readers := p.active.Load() > 0
	var total float64
	for _, n := range nodes {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		info, err := n.C.Info(cctx, "cpu").Result()
		cancel()
		if err != nil {
			p.mu.Lock()
			if !p.warned && ctx.Err() == nil {
				p.warned = true
				logger.Warn("cannot read INFO cpu; reads are paced by the assumed cost per key", "node", n.Addr, "err", err,
					"keys_per_second", int(p.share/p.cost))
			}
			p.haveLast = false
			p.mu.Unlock()
			return
		}
		total += infoFloat(info, "used_cpu_sys") + infoFloat(info, "used_cpu_user")
	}
	s := cpuSample{cpu: total, at: time.Now(), keys: p.keys.Load(), readers: readers || p.active.Load() > 0}
	if inv != nil {
		s.inv = inv()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.observe(s)
	switch {
	case p.quiet:
		p.quiet = false
	case s.readers && s.at.Sub(p.lastQuiet) >= quietEvery:
		p.quiet = true
		p.hold(s.at)
	}
}

// observe folds one sample into the baseline or the cost. Called with mu.
func (p *cpuPacer) observe(s cpuSample) {
	prev, ok := p.last, p.haveLast
	p.last, p.haveLast = s, true
	if !ok {
		return
	}
	dt := s.at.Sub(prev.at).Seconds()
	dcpu := s.cpu - prev.cpu
	dkeys := float64(s.keys - prev.keys)
	if dt <= 0 || dcpu < 0 {
		return // a restarted server
	}
	const alpha = 0.3
	if s.inv.Messages >= prev.inv.Messages && s.inv.Names >= prev.inv.Names {
		p.invShare += alpha * (invalidationCost(prev.inv, s.inv)/dt - p.invShare)
		p.apply()
	}
	if p.quiet || dkeys == 0 && !prev.readers && !s.readers {
		// The reads were held (or there were none): what Redis used is
		// the application's, less the few keys that slipped through.
		b := max(dcpu-p.cost*dkeys, 0) / dt
		if p.haveBaseline {
			b = p.baseline + alpha*(b-p.baseline)
		}
		p.baseline, p.haveBaseline = b, true
		p.lastQuiet = s.at
		if !p.quiet && p.holding {
			// Nobody read for a second: the reads stopped of
			// themselves, and no hold needs making up for.
			p.holding = false
			p.apply()
		}
		return
	}
	if dkeys == 0 {
		return
	}
	p.accCPU += dcpu
	p.accDt += dt
	p.accKeys += dkeys
	// Five seconds at least: an application's load that swings by a
	// tenth of a core from one second to the next would swamp the cost
	// of a second's keys.
	if p.accDt < 5 {
		return
	}
	if p.accKeys >= 100 {
		c := max(p.accCPU-p.baseline*p.accDt, 0) / p.accKeys
		// Bounds keep one absurd reading (a snapshot fork, a stalled
		// clock, an application burst) from stopping or unleashing the
		// reads: the cost at most doubles per update, and stays between
		// 0.2 µs and 1 ms a key.
		c = min(max(c, 0.2e-6), 1e-3, 2*p.cost)
		p.cost += alpha * (c - p.cost)
		p.apply()
	}
	p.accCPU, p.accDt, p.accKeys = 0, 0, 0
}

func infoFloat(info, name string) float64 {
	v, _ := strconv.ParseFloat(infoField(info, name), 64)
	return v
}

// infoField returns the value of "name:value" in an INFO reply.
func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
