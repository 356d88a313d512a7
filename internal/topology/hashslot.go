package topology

import "strings"

// HashSlot is the Redis Cluster hash slot of a key: CRC16 (XMODEM) of the
// key, or of its hash tag (the bytes between the first "{" and the next
// "}", when there are any), modulo 16384. A user's keys share a hash tag in
// a cluster, so they share a slot, and a shard of the slots keeps every
// user's figures whole.
func HashSlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for k := 0; k < len(key); k++ {
		crc = crc<<8 ^ crc16Table[byte(crc>>8)^key[k]]
	}
	return int(crc) & (clusterSlots - 1)
}

var crc16Table = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()

// Shard is the share of the keyspace one exporter reads (sampling.shard):
// the keys whose hash slot s has s % Count == Index. Slots are dealt out
// round robin rather than in contiguous ranges so that each shard gets
// keys from every cluster node, and the shards stay even however the
// cluster's slots are spread. The zero Shard owns every key.
type Shard struct {
	Index, Count int
}

// Owns reports whether key belongs to the shard.
func (s Shard) Owns(key string) bool {
	return s.Count <= 1 || HashSlot(key)%s.Count == s.Index
}

// Filter keeps the keys of the shard, in place.
func (s Shard) Filter(keys []string) []string {
	if s.Count <= 1 {
		return keys
	}
	out := keys[:0]
	for _, k := range keys {
		if s.Owns(k) {
			out = append(out, k)
		}
	}
	return out
}
