package sweep

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/slotexporter/slot_exporter/internal/changefeed"
	"github.com/slotexporter/slot_exporter/internal/redisread"
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
// few seconds at most. An application that catches up in the held second
// (below) is the other way round, so the cost is never below the time
// Redis spent inside the reads' own commands (INFO commandstats).
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
// tenth between them (`make bench`, 3 masters, 10% of sets written per
// interval: 2.2% each, 6.6% in all; with the credit for share left
// unused, 3.8% each, 11.5% in all: what Redis spends on the feed's
// invalidations on a cluster is charged short by the priors below, which
// the unused share had hidden).
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
	// slotReads counts the slot sets read over raw connections (nil:
	// none), priced by Redis's INFO commandstats as the floor of the
	// cost.
	slotReads func() redisread.SlotReads
	cost      float64 // CPU seconds per key read
	// updates counts the cost's updates: until the first the cost is
	// the prior.
	updates  int
	baseline float64 // CPU seconds per second without exporter reads
	// haveBaseline is set once a second without reads has been
	// measured: the first one is the baseline, not a fraction of it
	// (an average from zero took the application's load for exporter
	// cost for the first half minute).
	haveBaseline bool
	last         cpuSample
	haveLast     bool
	// lastQuiet is when the last second that measured the baseline
	// began; quiet is set while the reads are held for it.
	lastQuiet time.Time
	quiet     bool
	// holding is set by a hold and cleared by a second in which nobody
	// read: while it is set, the reads make up for the held seconds.
	holding bool
	// acc is what has accrued since the cost was last updated: an
	// update needs enough time and keys that their cost stands out of
	// the application's noise.
	accCPU, accDt, accKeys float64
	// accFloor is the Redis time inside the commands of the slot sets
	// read since the cost was last updated, as commandstats priced them
	// (their ZSCAN or ZRANGE and PTTL), and accScan inside the SCANs.
	accFloor, accScan float64
	// unmeasured is set when the last update of the cost could not tell
	// the reads' cost from the application's load: the pace keeps
	// unmeasuredMargin under the share (baseShare).
	unmeasured bool
	// floorRatio is the whole cost of the reads over their commands'
	// time, learned while the reads stand out of the application's
	// load (priorFloorRatio until then); lastFloor is the floor it gave
	// last.
	floorRatio, lastFloor float64
	// appHeld and appRead are the application's commands a second
	// (appCommands), smoothed: in seconds without reads and in seconds
	// of reads. 0 until measured.
	appHeld, appRead float64
	// entitled is what a second of reads may take of Redis's CPU (the
	// share less the invalidations, made up for holds), as apply last
	// set it; over is what the reads took beyond it, CPU seconds, still
	// to be given back, or below 0 what they left unused (see apply).
	entitled, over float64
	warned         bool
	// known takes the first nodes' arrival: their first sample is taken
	// at once.
	known  chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
}

// What Redis spends on invalidations. In broadcasting mode it gathers the
// key names written in a turn of its event loop and sends them to the
// feed's connection as one message after the turn: a socket write per
// message, a little per name. The cost cannot be measured while the
// exporter runs (a held second stops the reads, not the writes), so these
// are priors, measured on this project's 2-core machine, quiet (redis-server
// 7.0, 200k slot sets, ZADDs that change a score from 4 clients, Redis's
// CPU per write with a tracking client subscribed against without it, 4
// pairs of 10 s, medians; messages and names counted on the subscribed
// connection): pipelined 100 to a round trip, 0.0047 messages a write
// (210 names each) cost 0.75 µs more a write; unpipelined, 0.58 messages
// a write cost 3.5 µs more. That solves to 4.7 µs a message and 0.73 µs a
// name. The 2 µs and 0.3 µs charged before were the busy machine's
// figures scaled down, a guess: they undercharged the invalidations by
// more than half, and the pace took 12.6% and 13.7% of a core at 10% and
// 25% of 1M sets written per 5 s (`make bench`).
const (
	invalidationMessageCost = 5e-6
	invalidationNameCost    = 0.75e-6
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
// 300k sets and 7 to 11 µs at 1M (BenchmarkFirstPicture); a first read
// now goes in batches of 300, 6.5 µs at 300k sets. A prior of 4 µs
// let the first read of 1M sets take 14.5% of a core for a minute while
// the average caught up; the paced figure errs on the safe side.
const priorCost = 8e-6

// priorFloorRatio is what the whole cost of a key is taken to be of its
// commands' time until it is learned, which needs the reads to stand out
// of the application's load: under a busy application it never is. It
// was 1, and `make bench`'s outside measurement (1M slot sets, 20k
// written a second, an application at 9.8% of a core) saw the pace
// measure 5.5 µs a key from INFO cpu over a floor of 3.9, while Redis
// spent 13.2% of a core more with the exporter than without: 7.7 µs a
// key once the invalidations are charged, twice the commands' time. It
// measured 1.8 for the change-driven reads under load and 1.3-1.7 for a
// first read, whose SCAN is in the floor: a first read under a busy
// application is paced slower than its share, the safe side, until it
// stands out.
const priorFloorRatio = 2

func newCPUPacer(share float64) *cpuPacer {
	p := &cpuPacer{share: share, cost: priorCost, floorRatio: priorFloorRatio, entitled: share}
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

// overGiveBack is how long the reads take to give back what they took
// beyond their share: a window of the cost's updates.
const overGiveBack = quietEvery

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
//
// What the reads took beyond their share in the last window (over) comes
// off the next: a cost measured after the fact lags one that rises while
// the reads go on, and the smoothed average lags it further. Twelve
// stream families SCANning 200k keys that none of them matched saw their
// cost a key rise from 1.8 to 3.7 µs in half a minute (the walks drifting
// apart, each finding its part of the table cold), and took 10.6 to 12.4%
// of a core where the share was 10 (5 runs). What the reads left unused
// while they went on (a cost that wobbles, the prior's pace of a first
// read's first second) is a credit (over < 0) of at most a second's
// share: given back only, the wobbles of a key's cost cost a read 1.3%
// of its share (TestPacerKeepsItsShareAsTheCostRises), 0.5 s of a first
// read of 40 s. The credit lapses in a second without reads: a read that
// had nothing to do does not earn a burst.
func (p *cpuPacer) apply() {
	share := p.baseShare()
	if p.holding {
		share *= holdMakeUp
	}
	p.entitled = share
	giveBack := min(p.over/overGiveBack.Seconds(), share/2)
	r := (share - giveBack) / p.cost
	p.limiter.SetLimit(rate.Limit(r))
	p.limiter.SetBurst(burstOf(r))
}

// baseShare is what the reads may take of Redis's CPU before holds are
// made up for: the share less the invalidations, and less
// unmeasuredMargin of that while their cost cannot be measured. Called
// with mu.
func (p *cpuPacer) baseShare() float64 {
	reads := p.share - p.invShare
	if p.unmeasured {
		reads *= 1 - unmeasuredMargin
	}
	return max(reads, p.share/10)
}

// unmeasuredMargin is what the pace leaves of the reads' share while
// their cost cannot be told from the application's load (they do not
// stand out of it, standOutOver). The cost is then a bound from the
// commands' time (the floor) or a reading blurred by the application,
// and a pace aimed at the share itself comes out on either side of it.
// `make bench` and its outside measurement (1M slot sets, 20k to 50k
// written a second, an application at 11-22% of a core) put what the
// reads really cost at up to 1.14 times what the pace had priced them
// (the reads took 11.2% of a core with 1.6% of invalidations, where the
// pace aimed at 10), while a key's cost in Redis moved between about 4
// and 9 µs from one run to the next. A sixth under aims 1.2 times below
// the share: it covers the worst seen with some room, and costs a sixth
// of the read rate only where the application is busy enough to hide
// the reads. Where they stand out, INFO cpu measures them and the pace
// aims at the share.
const unmeasuredMargin = 1.0 / 6

// setSources takes the counts of a (reloaded) sweeper: its change feed's
// invalidations and its reader's slot sets; nil: none.
func (p *cpuPacer) setSources(invalidations func() changefeed.Invalidations, slotReads func() redisread.SlotReads) {
	p.mu.Lock()
	p.invalidations, p.invShare = invalidations, 0
	p.slotReads = slotReads
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

// setNodes takes the nodes a sweep reads. The first nodes known are
// sampled at once, before the sweep reads from them, so that the reads'
// first second is measured (below, in start).
func (p *cpuPacer) setNodes(nodes []topology.Node) {
	p.mu.Lock()
	first := len(p.nodes) == 0 && len(nodes) > 0
	p.nodes = nodes
	known := p.known
	p.mu.Unlock()
	if first && known != nil {
		select {
		case known <- struct{}{}:
		default:
		}
	}
}

// start measures once a second until stop, and once as soon as the nodes
// are known. The first sample used to come a second into the first
// sweep's reads: that second went unmeasured, the first cost came after
// two more seconds of reads, and the prior (twice the true cost) paced
// the first read of 1M slot sets for its first 4.5 s, which read 59k keys
// in its first 5 s. Sampled before the reads, the first second is priced
// as soon as the held second after it gives the baseline: the prior paces
// one second, and the first 5 s read 92-120k keys (BenchmarkFirstPicture,
// 1M sets, 4 runs; the first picture in 37.8-43.5 s, median 41.8, where
// Redis's CPU a key drifted between 3.7 and 4.1 µs from run to run).
func (p *cpuPacer) start(logger *slog.Logger) {
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel, p.done = cancel, make(chan struct{})
	known := make(chan struct{}, 1)
	p.mu.Lock()
	p.known = known
	if len(p.nodes) > 0 {
		p.known <- struct{}{}
	}
	p.mu.Unlock()
	go func() {
		defer close(p.done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			first := false
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			case <-known:
				// A sample to measure the first second from, which
				// holds nothing: the reads have not begun.
				first = true
				t.Reset(time.Second)
			}
			p.tick(ctx, logger, first)
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
