package topology

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// clusterSlots is the number of hash slots of a Redis Cluster.
const clusterSlots = 16384

// SlotView is what the masters said, at one moment, about who owns each
// slot and which slots are being migrated. Two views, one taken before a
// sweep lists its nodes and one after it has read them, bound the slots
// whose keys may have moved between nodes while they were being scanned:
// SCAN is not a snapshot, and a key that leaves a node not yet scanned for
// a node already scanned is seen on neither, with no redirection to tell.
type SlotView struct {
	owner    []string                 // slot -> node id of the master that owns it
	masterOf map[string]string        // replica id -> master id
	moving   map[int][]string         // slot -> ids of the nodes migrating or importing it
	clients  map[string]*redis.Client // master id -> client
}

// View reads CLUSTER NODES from every master; nil, nil for a single
// server, where keys cannot move between nodes.
func (t *Topology) View(ctx context.Context) (*SlotView, error) {
	if t.cluster == nil {
		return nil, nil
	}
	type reply struct {
		c    *redis.Client
		text string
	}
	var mu sync.Mutex
	var replies []reply
	err := t.cluster.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		s, err := c.ClusterNodes(ctx).Result()
		if err != nil {
			return fmt.Errorf("CLUSTER NODES on %s: %w", c.Options().Addr, err)
		}
		mu.Lock()
		replies = append(replies, reply{c, s})
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, err
	}
	v := &SlotView{owner: make([]string, clusterSlots), masterOf: map[string]string{},
		moving: map[int][]string{}, clients: map[string]*redis.Client{}}
	// A master is the authority on its own slots and migrations; what
	// others say of a slot only fills in slots no master claims as its
	// own (the former master after a failover claims none).
	others := make([]string, clusterSlots)
	for _, r := range replies {
		for _, line := range strings.Split(r.text, "\n") {
			f := strings.Fields(line)
			if len(f) < 8 {
				continue
			}
			id, flags := f[0], ","+f[2]+","
			myself := strings.Contains(flags, ",myself,")
			if strings.Contains(flags, ",slave,") && f[3] != "-" {
				v.masterOf[id] = f[3]
			}
			if myself {
				v.clients[id] = r.c
			}
			if !strings.Contains(flags, ",master,") {
				continue
			}
			for _, tok := range f[8:] {
				if m, ok := strings.CutPrefix(tok, "["); ok {
					if myself {
						v.noteMigration(id, strings.TrimSuffix(m, "]"))
					}
					continue
				}
				lo, hi, found := strings.Cut(tok, "-")
				if !found {
					hi = lo
				}
				a, err1 := strconv.Atoi(lo)
				b, err2 := strconv.Atoi(hi)
				if err1 != nil || err2 != nil || a < 0 || b >= clusterSlots {
					continue
				}
				for sl := a; sl <= b; sl++ {
					if myself {
						v.owner[sl] = id
					} else {
						others[sl] = id
					}
				}
			}
		}
	}
	for sl, id := range others {
		if v.owner[sl] == "" {
			v.owner[sl] = id
		}
	}
	return v, nil
}

// noteMigration records "slot->-peer" (migrating) or "slot-<-peer"
// (importing) from a master's own line.
func (v *SlotView) noteMigration(self, m string) {
	sep := "->-"
	if !strings.Contains(m, sep) {
		sep = "-<-"
	}
	sl, peer, ok := strings.Cut(m, sep)
	n, err := strconv.Atoi(sl)
	if !ok || err != nil || n < 0 || n >= clusterSlots {
		return
	}
	v.moving[n] = append(v.moving[n], self, peer)
}

// sameShard reports whether two masters are one shard seen before and
// after a failover: a promoted replica holds its former master's keys.
func sameShard(a, b string, views ...*SlotView) bool {
	if a == b {
		return true
	}
	if a == "" || b == "" {
		return false
	}
	for _, v := range views {
		if v.masterOf[a] == b || v.masterOf[b] == a {
			return true
		}
	}
	return false
}

// Unsettled lists the slots that were being migrated at either end of a
// sweep or changed shards in between.
func Unsettled(start, end *SlotView) []int {
	var out []int
	for sl := range clusterSlots {
		_, m1 := start.moving[sl]
		_, m2 := end.moving[sl]
		if m1 || m2 || !sameShard(start.owner[sl], end.owner[sl], start, end) {
			out = append(out, sl)
		}
	}
	return out
}

// KeysIn lists the keys matching re of the given slots on the nodes that
// can hold them now: the owner and, mid-migration, the other side.
// complete is false when one of those nodes could not be asked.
func (v *SlotView) KeysIn(ctx context.Context, slots []int, re *regexp.Regexp) (keys []string, complete bool) {
	complete = true
	bySlots := map[string][]int{}
	for _, sl := range slots {
		ids := append([]string{v.owner[sl]}, v.moving[sl]...)
		for _, id := range ids {
			if v.clients[id] == nil {
				complete = false
				continue
			}
			if l := bySlots[id]; len(l) == 0 || l[len(l)-1] != sl {
				bySlots[id] = append(l, sl)
			}
		}
	}
	for id, sls := range bySlots {
		c := v.clients[id]
		counts := make([]*redis.IntCmd, len(sls))
		_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, sl := range sls {
				counts[i] = p.ClusterCountKeysInSlot(ctx, sl)
			}
			return nil
		})
		if err != nil {
			complete = false
			continue
		}
		var gets []*redis.StringSliceCmd
		_, err = c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, sl := range sls {
				if n := counts[i].Val(); n > 0 {
					// Room for keys written since the count.
					gets = append(gets, p.ClusterGetKeysInSlot(ctx, sl, int(n)*2+16))
				}
			}
			return nil
		})
		if err != nil {
			complete = false
			continue
		}
		for _, g := range gets {
			for _, k := range g.Val() {
				if re.MatchString(k) {
					keys = append(keys, k)
				}
			}
		}
	}
	return keys, complete
}
