package snapshot

import "slices"

// Lookup finds a catalog metric with the given labels among the family's
// gauges and counters: what a scrape would show, read before freshness is
// judged. It lives here rather than in a test package so that tools can
// read a snapshot without linking package testing.
func (f *Family) Lookup(m *Metric, labels ...string) (float64, bool) {
	for _, vs := range [][]Value{f.Gauges, f.Counters} {
		for _, v := range vs {
			if v.Metric == m && slices.Equal(v.Labels, labels) {
				return v.V, true
			}
		}
	}
	return 0, false
}
