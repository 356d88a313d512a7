package sweep

import "math"

// How the pacer's samples become the application's baseline and the
// reads' cost per key: the measures that set the pace (cpuPacer.apply).

// smoothing is the weight of a new reading in the pacer's running
// averages (the baseline, the cost, the invalidations' share): a change
// shows within a few readings, one reading does not swing the pace.
const smoothing = 0.3

// observe folds one sample into the baseline or the cost, and says
// whether the cost was updated. Called with mu.
func (p *cpuPacer) observe(s cpuSample) bool {
	prev, ok := p.last, p.haveLast
	p.last, p.haveLast = s, true
	if !ok {
		return false
	}
	dt := s.at.Sub(prev.at).Seconds()
	dcpu := s.cpu - prev.cpu
	dkeys := float64(s.keys - prev.keys)
	if dt <= 0 || dcpu < 0 {
		return false // a restarted server
	}
	if s.inv.Messages >= prev.inv.Messages && s.inv.Names >= prev.inv.Names {
		p.invShare += smoothing * (invalidationCost(prev.inv, s.inv)/dt - p.invShare)
		p.apply()
	}
	calls, haveCalls := float64(s.appCalls-prev.appCalls)/dt, prev.haveCmd && s.haveCmd && s.appCalls >= prev.appCalls
	if p.quiet || dkeys == 0 && !prev.readers && !s.readers {
		// The reads were held (or there were none): what Redis used is
		// the application's, less the few keys that slipped through.
		if haveCalls {
			p.appHeld = smoothed(p.appHeld, calls)
		}
		b := max(dcpu-p.cost*dkeys, 0) / dt
		if p.haveBaseline {
			b = p.baseline + smoothing*(b-p.baseline)
		}
		p.baseline, p.haveBaseline = b, true
		p.lastQuiet = prev.at
		if !p.quiet {
			// Nobody read for a second: the reads stopped of
			// themselves, no hold needs making up for, and the
			// second gave back a share's worth of what they
			// took beyond it.
			p.holding = false
			p.over = max(p.over-p.entitled*dt, 0)
			p.apply()
		}
		// The first baseline prices the reads before it: a first read
		// is held in its second second, and a second of reads that
		// stand out of the application's load is enough to end the
		// prior's pace (below).
		return p.updates == 0 && p.accDt >= 1 && p.update(true)
	}
	if dkeys == 0 {
		return false
	}
	if haveCalls {
		p.appRead = smoothed(p.appRead, calls)
	}
	p.accCPU += dcpu
	p.accDt += dt
	p.accKeys += dkeys
	keyCmds, scan := readCommandsTime(prev, s)
	p.accFloor += keyCmds
	p.accScan += scan
	// Five seconds at least: an application's load that swings by a
	// tenth of a core from one second to the next would swamp the cost
	// of a second's keys. The first update comes after two, so that the
	// prior paces no longer than it must (below).
	if p.accDt < 5 && (p.updates > 0 || p.accDt < 2) {
		return false
	}
	return p.update(false)
}

// smoothed is avg with a new reading x folded in; the first reading (avg
// 0) is taken whole.
func smoothed(avg, x float64) float64 {
	if avg == 0 {
		return x
	}
	return avg + smoothing*(x-avg)
}

// standOutOver is how many times the application's load the reads must
// use for their cost to be told from it (INFO cpu, less the held
// second's baseline): 4 times, or twice where the application is steady
// (steadyApplication). An application that puts its work off while the
// reads go on and catches up in the held second makes the held second
// look busier than it is, and the reads cheaper by the difference; at a
// quarter of the reads' load, a catching up of three quarters more than
// its load (TestPacerCostNotBelowItsCommands's application) blurs their
// cost by a fifth. A steady one does not blur it so, and a light one,
// such as a GET every ms (2.5-3% of a core on this two-core machine,
// mostly Redis waking for it), then lets the reads' cost be learned at
// their share: at four times, the pace stayed at the floor's prior ratio
// of 2, 5 µs a key where the reads cost about 4, and the first picture
// of 1M slot sets took 48.7-54.0 s against 35.1-39.9 without the GETs
// (BenchmarkFirstPicture, 1M sets, 4 and 3 runs).
func (p *cpuPacer) standOutOver() float64 {
	if p.steadyApplication() {
		return 2
	}
	return 4
}

// steadyApplication: the application sent as many commands a second
// while the reads went on as in the seconds without them, within a
// tenth, and at least minAppCalls (fewer, and the exporter's own odd
// commands, TIME or CLIENT, weigh in the count).
func (p *cpuPacer) steadyApplication() bool {
	return p.appRead >= minAppCalls && p.appHeld > 0 && math.Abs(p.appHeld-p.appRead) <= p.appRead/10
}

// minAppCalls is the fewest application commands a second from which its
// rate says whether it is steady.
const minAppCalls = 100

// update sets the cost from what has accrued since the last update, and
// says whether it did; onlyIfStandOut keeps what accrued when the reads
// do not stand out of the application's load. Called with mu.
func (p *cpuPacer) update(onlyIfStandOut bool) bool {
	reads := max(p.accCPU-p.baseline*p.accDt, 0)
	standOut := reads >= p.standOutOver()*p.baseline*p.accDt
	updated := p.accKeys >= 100
	if onlyIfStandOut && (!updated || !standOut) {
		return false
	}
	if updated {
		// What the reads took beyond what they were entitled to, where
		// their cost can be told from the application's load.
		switch {
		case !standOut:
			p.over = 0
		case p.updates == 0:
			// The prior paced these reads (a first read's first
			// second, before any hold): entitled to the share without
			// the holds' make-up. The prior is twice a key's cost, on
			// the safe side, and the second took about half its share:
			// made up in the next window (see apply).
			base := p.baseShare()
			p.over = min(max(reads-base*p.accDt, -base), p.entitled*overGiveBack.Seconds())
		default:
			p.over = min(max(p.over+reads-p.entitled*p.accDt, -p.baseShare()), p.entitled*overGiveBack.Seconds())
		}
		c := reads / p.accKeys
		// Bounds keep one absurd reading (a snapshot fork, a stalled
		// clock, an application burst) from stopping or unleashing the
		// reads: the cost at most doubles per update, and stays between
		// 0.2 µs and 1 ms a key.
		c = min(max(c, 0.2e-6), 1e-3, 2*p.cost)
		// Redis's time inside the reads' own commands is a part of
		// their cost that the application's swings do not blur: the
		// cost is never below it, times what the whole cost was of it
		// when it could be told (the reads stood out of the
		// application's load): socket work, and caches the reads find
		// cold. `make bench`, 1M slot sets: a paced first read cost
		// 6.5-7 µs a key in all against 3.1 µs in ZRANGE and PTTL, and
		// the change-driven reads under load 6.6 µs against 3.6.
		// Where the reads do stand out, INFO cpu is the better measure
		// (the commands' time comes in lumps, a SCAN page at a time, and
		// a floor from it pinned the first read's cost above its mean).
		// The ratio is of the commands sent a key: a SCAN is one call a
		// page of hundreds of keys, whose socket work is a few µs, so its
		// time counts once. Doubled with the rest, it held a first read
		// under `make bench`'s outside application (20k sets written a
		// second) to 5.4% of a core, invalidations included, where the
		// share is 10, and the first picture of 1M sets took 84 s.
		floor := 0.0
		if p.accFloor > 0 {
			floor = (p.floorRatio*p.accFloor + p.accScan) / p.accKeys
			p.lastFloor = floor
		}
		switch {
		case p.updates < 2 && standOut:
			// The first cost measured where the reads stand out of
			// the application's load replaces the prior, which is a
			// guess on the safe side, rather than being averaged in:
			// averaged, the prior of 8 µs still paced a first read of
			// 1M slot sets (4.7 µs a key) half a minute later, and
			// Redis gave it 8.5% of a core where the share is 10%
			// (`make bench`, 55 s). It goes no lower than a quarter of
			// the prior in one step. The second replaces the first:
			// the first is of reads at the prior's pace, and read at
			// half the speed a key costs Redis more (each batch wakes
			// a Redis idle for longer). `make bench`, 1M slot sets:
			// the first measure was 4.37 µs a key and the next 5 s at
			// its pace cost 3.84; averaged in, the cost took 25 s to
			// come down, and the first read took 9.1% of a core.
			p.cost = max(c, priorCost/4)
		case p.updates < 2 && floor > 0:
			// Where they do not stand out, the floor is a bound on the
			// safe side that the application does not blur, and the
			// measure no lower than it replaces the prior too.
			// Averaged in, the prior paced a first read under a GET
			// every ms (2.5-3% of a core) for its first 20 s: 6.7,
			// 5.8 and 5.2 µs a key at its first three updates, 6 s
			// apart, where the floor was 4.5-4.7
			// (BenchmarkFirstPicture -first-picture-probe, 1M sets).
			p.cost = max(c, floor)
		default:
			p.cost += smoothing * (c - p.cost)
		}
		p.updates++
		p.unmeasured = !standOut
		if floor > 0 {
			if standOut {
				p.floorRatio += smoothing * (min(max((reads-p.accScan)/p.accFloor, 1), 4) - p.floorRatio)
			} else {
				p.cost = min(max(p.cost, floor), 1e-3)
			}
		}
		p.apply()
	}
	p.accCPU, p.accDt, p.accKeys, p.accFloor, p.accScan = 0, 0, 0, 0, 0
	return updated
}
