package sweep

import (
	"testing"
	"time"
)

// TestPacerFollowsTheBaseline feeds the pacer Redis CPU readings: an
// application whose load grows while the exporter reads without pause must
// not be taken for exporter cost, since the pacer holds the reads now and
// then to measure the baseline again.
func TestPacerFollowsTheBaseline(t *testing.T) {
	p := newCPUPacer(0.1)
	const cost = 5e-6 // CPU seconds per key, the truth
	at := time.Unix(1000, 0)
	cpu, keys := 0.0, uint64(0)
	base := 0.05
	for sec := 0; sec < 120; sec++ {
		if sec == 30 {
			base = 0.40 // the application's load grows eightfold
		}
		read := uint64(p.KeysPerSecond())
		if p.quiet {
			read = 1
		}
		keys += read
		cpu += base + cost*float64(read)
		at = at.Add(time.Second)
		p.mu.Lock()
		p.observe(cpuSample{cpu: cpu, at: at, keys: keys, readers: true})
		switch {
		case p.quiet:
			p.quiet = false
			p.apply()
		case at.Sub(p.lastQuiet) >= quietEvery:
			p.quiet = true
			p.apply()
		}
		p.mu.Unlock()
	}
	want := 0.1 / cost
	if got := p.KeysPerSecond(); got < 0.7*want || got > 1.3*want {
		t.Errorf("after the application's load grew, the pacer allows %.0f keys/s; the share allows %.0f", got, want)
	}
}
