package sweep

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
	if p.quiet || dkeys == 0 && !prev.readers && !s.readers {
		// The reads were held (or there were none): what Redis used is
		// the application's, less the few keys that slipped through.
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

// update sets the cost from what has accrued since the last update, and
// says whether it did; onlyIfStandOut keeps what accrued when the reads
// do not stand out of the application's load. Called with mu.
func (p *cpuPacer) update(onlyIfStandOut bool) bool {
	reads := max(p.accCPU-p.baseline*p.accDt, 0)
	standOut := reads >= 4*p.baseline*p.accDt
	updated := p.accKeys >= 100
	if onlyIfStandOut && (!updated || !standOut) {
		return false
	}
	if updated {
		// What the reads took beyond what they were entitled to, where
		// their cost can be told from the application's load.
		if standOut {
			p.over = min(max(p.over+reads-p.entitled*p.accDt, 0), p.entitled*overGiveBack.Seconds())
		} else {
			p.over = 0
		}
		c := reads / p.accKeys
		// Bounds keep one absurd reading (a snapshot fork, a stalled
		// clock, an application burst) from stopping or unleashing the
		// reads: the cost at most doubles per update, and stays between
		// 0.2 µs and 1 ms a key.
		c = min(max(c, 0.2e-6), 1e-3, 2*p.cost)
		if p.updates < 2 && standOut {
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
		} else {
			p.cost += smoothing * (c - p.cost)
		}
		p.updates++
		// Redis's time inside the reads' own commands is a part of
		// their cost that the application's swings do not blur: the
		// cost is never below it, times what the whole cost was of it
		// when it could be told (the reads used four times the
		// application's CPU or more): socket work, and caches the reads
		// find cold. `make bench`, 1M slot sets: a paced first read cost
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
		if p.accFloor > 0 {
			p.lastFloor = (p.floorRatio*p.accFloor + p.accScan) / p.accKeys
			if standOut {
				p.floorRatio += smoothing * (min(max((reads-p.accScan)/p.accFloor, 1), 4) - p.floorRatio)
			} else {
				p.cost = min(max(p.cost, p.lastFloor), 1e-3)
			}
		}
		p.apply()
	}
	p.accCPU, p.accDt, p.accKeys, p.accFloor, p.accScan = 0, 0, 0, 0, 0
	return updated
}
