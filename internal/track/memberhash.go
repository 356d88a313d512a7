package track

import "github.com/cespare/xxhash/v2"

// MemberHash identifies a member of a key. The separator byte keeps
// ("ab","c") and ("a","bc") apart. The raw reader hashes members straight
// from reply bytes with the same layout (key, 0, member).
func MemberHash(d *xxhash.Digest, key, member string) uint64 {
	MemberHashStart(d, key)
	_, _ = d.WriteString(member)
	return d.Sum64()
}

// MemberHashStart readies d for a member of key that is then written to
// it as it streams, never held whole: d.Sum64 is its MemberHash.
func MemberHashStart(d *xxhash.Digest, key string) {
	d.Reset()
	_, _ = d.WriteString(key)
	_, _ = d.Write([]byte{0})
}
