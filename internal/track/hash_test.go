package track

import "github.com/cespare/xxhash/v2"

func hashString(s string) uint64 { return xxhash.Sum64String(s) }

// bp returns the state edges of r at now, for tests that observe members
// one at a time.
func bp(r *Rules, now int64) *Bounds {
	b := r.Bounds(now)
	return &b
}
