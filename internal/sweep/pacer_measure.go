// What the read pace measures of Redis once a second: its CPU (INFO
// cpu), the time inside the reads' own commands (INFO commandstats), and
// the invalidations client tracking sent.

package sweep

import (
	"context"
	"log/slog"
	"math"
	"time"

	"github.com/slotexporter/slot_exporter/internal/changefeed"
	"github.com/slotexporter/slot_exporter/internal/commandstats"
	"github.com/slotexporter/slot_exporter/internal/redisinfo"
	"github.com/slotexporter/slot_exporter/internal/redisread"
)

// cpuSample is one second's reading of Redis and of the exporter's own
// counts; the pacer works on the difference between two.
type cpuSample struct {
	cpu     float64
	at      time.Time
	keys    uint64
	inv     changefeed.Invalidations
	readers bool
	// slotReads, zscan, zrange and pttl price the slot sets read, scan
	// the SCANs (haveCmd: commandstats was read on every node).
	slotReads                 redisread.SlotReads
	zscan, zrange, pttl, scan commandstats.Stat
	// appCalls counts the calls of every other command: the
	// application's (appCommands).
	appCalls int64
	haveCmd  bool
}

// tick reads INFO cpu (and commandstats, with raw slot-set reads) from
// every node, folds the sample in, and holds the reads for a second
// every quietEvery while they go on without pause; the first sample of
// the nodes holds nothing.
func (p *cpuPacer) tick(ctx context.Context, logger *slog.Logger, first bool) {
	p.mu.Lock()
	nodes, inv, slotReads := p.nodes, p.invalidations, p.slotReads
	p.mu.Unlock()
	if len(nodes) == 0 {
		return
	}
	readers := p.active.Load() > 0
	var total float64
	var zscan, zrange, pttl, scan commandstats.Stat
	var app int64
	haveCmd := slotReads != nil
	var reads redisread.SlotReads
	if haveCmd {
		reads = slotReads()
	}
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
		total += redisinfo.CPU(info)
		if haveCmd {
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			info, err := n.C.Info(cctx, "commandstats").Result()
			cancel()
			if err != nil {
				haveCmd = false // the floor is left out; the pace goes on
				continue
			}
			st := commandstats.Parse(info)
			zscan, zrange = zscan.Plus(st["zscan"]), zrange.Plus(st["zrange"])
			pttl, scan = pttl.Plus(st["pttl"]), scan.Plus(st["scan"])
			app += appCommands(st)
		}
	}
	s := cpuSample{cpu: total, at: time.Now(), keys: p.keys.Load(), readers: readers || p.active.Load() > 0,
		slotReads: reads, zscan: zscan, zrange: zrange, pttl: pttl, scan: scan, appCalls: app, haveCmd: haveCmd}
	if inv != nil {
		s.inv = inv()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.observe(s) {
		// What the pace stands on, for whoever wonders why the reads go
		// at the rate they do (--log.level=debug).
		logger.Debug("read pace: cost per key measured", "cost_us", round2(p.cost*1e6), "floor_us", round2(p.lastFloor*1e6), "floor_ratio", round2(p.floorRatio),
			"application_core_percent", round2(p.baseline*100), "application_calls_held", int(p.appHeld), "application_calls_reading", int(p.appRead),
			"application_steady", p.steadyApplication(), "cost_measured", !p.unmeasured, "invalidations_core_percent", round2(p.invShare*100),
			"keys_per_second", int(p.KeysPerSecond()))
	}
	p.holdIfDue(s.at, s.readers, first)
}

// holdIfDue ends a hold after its second, and starts one when the reads
// have gone on for quietEvery since the last second that measured the
// baseline began; a first sample holds nothing. The ticks are a second
// apart give or take the time INFO takes, hence the half second: when a
// hold waited for a full quietEvery from the end of the last, one came
// every 6 or 7 s, not every 5, and the reads that make up for it
// (holdMakeUp) took 4 to 7% more than the share (TestPacerKeepsItsShareAcrossHolds:
// 0.104 of a core for 0.1). Called with mu.
func (p *cpuPacer) holdIfDue(at time.Time, readers, first bool) {
	switch {
	case first:
		p.quiet = false // a hold that a stop cut short is over
	case p.quiet:
		p.quiet = false
	case readers && at.Sub(p.lastQuiet) >= quietEvery-time.Second/2:
		p.quiet = true
		p.hold(at)
	}
}

// readCommandsTime is Redis's time inside the reads' commands between
// two samples (seconds): keyCmds the slot sets read, each priced at the
// mean time of a call of the command that read its members (ZSCAN, or
// ZRANGE) and of a PTTL over the same span, and scan every SCAN's (an
// application seldom SCANs; the exporter's discovery does). The means are of every client's
// calls; an application's larger ZSCANs or ZRANGEs raise them, and so slow the
// reads, the safe side. The slot sets counted are at most the calls Redis
// counted: a batch sent but not yet run when INFO was answered is priced
// in the next span. 0 without the counts, or when they went back (a
// restart, CONFIG RESETSTAT).
func readCommandsTime(prev, s cpuSample) (keyCmds, scan float64) {
	if !prev.haveCmd || !s.haveCmd {
		return 0, 0
	}
	var usec float64
	var n int64
	for _, c := range []struct {
		reads, prevReads uint64
		stat, prevStat   commandstats.Stat
	}{
		{s.slotReads.ZScan, prev.slotReads.ZScan, s.zscan, prev.zscan},
		{s.slotReads.ZRange, prev.slotReads.ZRange, s.zrange, prev.zrange},
	} {
		if c.reads <= c.prevReads {
			continue
		}
		k := min(int64(c.reads-c.prevReads), c.stat.Calls-c.prevStat.Calls)
		if k <= 0 {
			continue
		}
		per, ok := commandstats.PerCall(c.prevStat, c.stat)
		if !ok {
			return 0, 0
		}
		usec += float64(k) * per
		n += k
	}
	n = min(n, s.pttl.Calls-prev.pttl.Calls)
	if n <= 0 {
		return 0, 0
	}
	t, ok := commandstats.PerCall(prev.pttl, s.pttl)
	if !ok {
		return 0, 0
	}
	return (usec + float64(n)*t) / 1e6, float64(max(s.scan.Usec-prev.scan.Usec, 0)) / 1e6
}

// readsOwn are the commands that a slot-set family's raw reads and the
// pace send. The application's calls are all the others: their rate tells
// an application that catches up in the held second (calls put off while
// the reads went on) from a steady one (steadyApplication). Another
// kind's reads go through go-redis with commands an application uses too,
// and are counted as its calls; they stop in the held second, and that
// application looks unsteady, the safe side.
var readsOwn = map[string]bool{"scan": true, "zscan": true, "zrange": true, "zcount": true, "pttl": true, "info": true}

// appCommands is the calls of the commands in st that the reads do not
// send.
func appCommands(st map[string]commandstats.Stat) int64 {
	var n int64
	for name, c := range st {
		if !readsOwn[name] {
			n += c.Calls
		}
	}
	return n
}

func round2(x float64) float64 { return math.Round(x*100) / 100 }
