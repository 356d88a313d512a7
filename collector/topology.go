package collector

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"
	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/config"
)

// node is one Redis server a sweep reads from.
type node struct {
	addr string
	c    redis.Cmdable
}

// Topology lists the servers that together hold the keyspace.
type Topology interface {
	Nodes(ctx context.Context) ([]node, error)
}

// NewTopology picks how to find the servers behind a client: a cluster is
// swept master by master (or one replica per shard with readReplica); a
// single server or a sentinel-managed master is one node.
func NewTopology(c redis.UniversalClient, readReplica bool) Topology {
	if cc, ok := c.(*redis.ClusterClient); ok {
		return &clusterTopology{c: cc, replica: readReplica}
	}
	return singleTopology{c: c}
}

type singleTopology struct{ c redis.UniversalClient }

func (s singleTopology) Nodes(context.Context) ([]node, error) {
	addr := ""
	if c, ok := s.c.(*redis.Client); ok {
		addr = c.Options().Addr
	}
	return []node{{addr: addr, c: s.c}}, nil
}

type clusterTopology struct {
	c          *redis.ClusterClient
	replica    bool
	viewWarned atomic.Bool
}

// Nodes lists the masters, or with readReplica one replica per shard.
// ForEachMaster and ForEachShard reload the slot map first, so a sweep
// after a reshard or a failover reads the nodes that hold the keys now.
func (t *clusterTopology) Nodes(ctx context.Context) ([]node, error) {
	if t.replica {
		// Should the shard map be unreadable or not match the slot map,
		// the masters are read: a complete sweep beats a replica-only one.
		if nodes, err := t.replicaNodes(ctx); err == nil {
			return sortNodes(nodes), nil
		}
	}
	var (
		mu    sync.Mutex
		nodes []node
	)
	err := t.c.ForEachMaster(ctx, func(_ context.Context, c *redis.Client) error {
		mu.Lock()
		nodes = append(nodes, node{addr: c.Options().Addr, c: c})
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return sortNodes(nodes), nil
}

// shardNode is one server of a shard as CLUSTER SHARDS (or CLUSTER SLOTS)
// describes it.
type shardNode struct {
	id, role string
	addrs    []string // the addresses it may be known by
	healthy  bool     // CLUSTER SHARDS health "online"
	failed   bool
	offset   int64
}

// replicaNodes picks one replica per shard: the most up to date of the
// synced ones. A shard with no usable replica is read from its master, so
// no part of the keyspace goes unswept; a shard whose nodes match none of
// the client's fails the listing.
func (t *clusterTopology) replicaNodes(ctx context.Context) ([]node, error) {
	type known struct {
		c *redis.Client
		// synced is ROLE's word that the replica has finished its sync
		// and is connected; unknown when ROLE is refused.
		synced, roleKnown bool
	}
	var mu sync.Mutex
	byID := map[string]known{}
	byAddr := map[string]known{}
	err := t.c.ForEachShard(ctx, func(ctx context.Context, c *redis.Client) error {
		var id *redis.StringCmd
		var role *redis.Cmd
		_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
			// The client's address may not be the one the node announces
			// (go-redis rewrites a loopback address seen through a remote
			// seed; a TLS-only node announces port 0): match by node id.
			id = p.ClusterMyID(ctx)
			role = p.Do(ctx, "ROLE")
			return nil
		})
		k := known{c: c}
		if r, err := role.Slice(); err == nil && len(r) >= 4 {
			k.roleKnown = true
			k.synced = r[0] == "slave" && r[3] == "connected"
		}
		mu.Lock()
		defer mu.Unlock()
		if v, err := id.Result(); err == nil && v != "" {
			byID[v] = k
		}
		byAddr[c.Options().Addr] = k
		return nil
	})
	if err != nil {
		return nil, err
	}
	shards, err := t.shards(ctx)
	if err != nil {
		return nil, err
	}
	var nodes []node
	for _, sh := range shards {
		var master, replica *redis.Client
		var best int64
		for _, n := range sh {
			k, ok := byID[n.id]
			for _, a := range n.addrs {
				if !ok {
					k, ok = byAddr[a]
				}
			}
			if !ok {
				continue
			}
			// Redis 7.0 reports a replica as "loading" until the gossip
			// carries a replication offset, which can take a while on an
			// idle cluster: ROLE, asked of the replica itself, is the
			// better witness.
			usable := !n.failed && (k.synced || !k.roleKnown && n.healthy)
			switch {
			case n.role == "master":
				master = k.c
			case usable && (replica == nil || n.offset > best):
				replica, best = k.c, n.offset
			}
		}
		switch {
		case replica != nil:
			nodes = append(nodes, node{addr: replica.Options().Addr, c: replica})
		case master != nil:
			nodes = append(nodes, node{addr: master.Options().Addr, c: master})
		default:
			return nil, errors.New("a shard matches none of the cluster client's nodes")
		}
	}
	if len(nodes) == 0 {
		return nil, errors.New("no shard owns slots")
	}
	return nodes, nil
}

// shards groups the nodes that own slots by shard, master first. CLUSTER
// SHARDS (Redis 7.0+) says which nodes are healthy; older servers answer
// CLUSTER SLOTS instead. Shards without slots are left out, as go-redis
// leaves them out of its node list: in 7.0 a failed-over master lingers
// as one.
func (t *clusterTopology) shards(ctx context.Context) ([][]shardNode, error) {
	res, err := t.c.ClusterShards(ctx).Result()
	if err == nil {
		var out [][]shardNode
		for _, sh := range res {
			if len(sh.Slots) == 0 {
				continue
			}
			var ns []shardNode
			for _, n := range sh.Nodes {
				sn := shardNode{id: n.ID, role: n.Role, offset: n.ReplicationOffset,
					healthy: n.Health == "" || n.Health == "online", failed: strings.HasPrefix(n.Health, "fail")}
				for _, host := range []string{n.Endpoint, n.IP, n.Hostname} {
					if host == "" || host == "?" {
						continue
					}
					for _, port := range []int64{n.Port, n.TLSPort} {
						if port > 0 {
							sn.addrs = append(sn.addrs, net.JoinHostPort(host, strconv.FormatInt(port, 10)))
						}
					}
				}
				ns = append(ns, sn)
			}
			out = append(out, ns)
		}
		return out, nil
	}
	slots, serr := t.c.ClusterSlots(ctx).Result()
	if serr != nil {
		return nil, fmt.Errorf("CLUSTER SHARDS: %w; CLUSTER SLOTS: %w", err, serr)
	}
	// CLUSTER SLOTS lists a master once per slot range and leaves out
	// failed replicas.
	idx := map[string]int{}
	var out [][]shardNode
	for _, sl := range slots {
		if len(sl.Nodes) == 0 {
			continue
		}
		key := sl.Nodes[0].ID + "@" + sl.Nodes[0].Addr
		if _, ok := idx[key]; ok {
			continue
		}
		idx[key] = len(out)
		var ns []shardNode
		for i, n := range sl.Nodes {
			role := "replica"
			if i == 0 {
				role = "master"
			}
			ns = append(ns, shardNode{id: n.ID, role: role, addrs: []string{n.Addr}, healthy: true})
		}
		out = append(out, ns)
	}
	return out, nil
}

// router returns a client that sends each key to the node that holds it
// now, following MOVED and ASK, or nil when the keyspace is on one server.
func router(t Topology) redis.Cmdable {
	if ct, ok := t.(*clusterTopology); ok {
		return ct.c
	}
	return nil
}

// clusterSlots is the number of hash slots of a Redis Cluster.
const clusterSlots = 16384

// slotView is what the masters said, at one moment, about who owns each
// slot and which slots are being migrated. Two views, one taken before a
// sweep lists its nodes and one after it has read them, bound the slots
// whose keys may have moved between nodes while they were being scanned:
// SCAN is not a snapshot, and a key that leaves a node not yet scanned for
// a node already scanned is seen on neither, with no redirection to tell.
type slotView struct {
	owner    []string                 // slot -> node id of the master that owns it
	masterOf map[string]string        // replica id -> master id
	moving   map[int][]string         // slot -> ids of the nodes migrating or importing it
	clients  map[string]*redis.Client // master id -> client
}

// view reads CLUSTER NODES from every master.
func (t *clusterTopology) view(ctx context.Context) (*slotView, error) {
	type reply struct {
		c    *redis.Client
		text string
	}
	var mu sync.Mutex
	var replies []reply
	err := t.c.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
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
	v := &slotView{owner: make([]string, clusterSlots), masterOf: map[string]string{},
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
func (v *slotView) noteMigration(self, m string) {
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
func sameShard(a, b string, views ...*slotView) bool {
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

// unsettled lists the slots that were being migrated at either end of a
// sweep or changed shards in between.
func unsettled(start, end *slotView) []int {
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

// keysIn lists the keys matching re of the given slots on the nodes that
// can hold them now: the owner and, mid-migration, the other side.
// complete is false when one of those nodes could not be asked.
func (v *slotView) keysIn(ctx context.Context, slots []int, re *regexp.Regexp) (keys []string, complete bool) {
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

// slotView returns the view of slot ownership a sweep starts from; nil
// for a single server, or when it cannot be read (then settle cannot bound
// what moved).
func (r *familyRunner) slotView(ctx context.Context) *slotView {
	ct, ok := r.s.topo.(*clusterTopology)
	if !ok {
		return nil
	}
	v, err := ct.view(ctx)
	if err != nil {
		if ct.viewWarned.CompareAndSwap(false, true) {
			r.log().Warn("cannot read CLUSTER NODES from the masters: a sweep that overlaps a reshard may miss keys that move while it runs and count their holds as ended", "err", err)
		}
		return nil
	}
	return v
}

// settle runs once a sweep has read every node. In a cluster it finds the
// slots that were migrating or changed shards while the nodes were read,
// lists their keys where they are now, and reads again, through the
// cluster client, those not read yet together with the keys a node
// redirected. Should that not account for every key that may have moved
// (a node that could not be asked, an unreadable view), it returns true:
// no hold ends in this sweep, the next one ends what is really gone, with
// hold durations still taken from when each was last seen.
func (r *familyRunner) settle(ctx context.Context, st *sweepState, p *readPlan, zc *zcountPlan, start *slotView) (deferEnds bool) {
	ct, ok := r.s.topo.(*clusterTopology)
	if !ok {
		if len(st.moved) > 0 {
			r.rereadMoved(ctx, st, p, zc)
		}
		return false
	}
	bounded := false
	var slots []int
	if start != nil {
		if end, err := ct.view(ctx); err == nil {
			bounded = true
			if slots = unsettled(start, end); len(slots) > 0 {
				keys, complete := end.keysIn(ctx, slots, r.matchRE())
				bounded = complete
				for _, k := range keys {
					if _, seen := st.seenKeys[xxhash.Sum64String(k)]; !seen {
						st.moved = append(st.moved, k)
					}
				}
			}
		}
	}
	if len(st.moved) > 0 {
		r.rereadMoved(ctx, st, p, zc)
	}
	if bounded || start == nil && len(st.moved) == 0 {
		return false
	}
	r.floor.keepUnseen()
	r.log().Warn("the cluster changed during the sweep in ways it cannot account for key by key: no hold ends in this sweep, the next one ends what is gone",
		"unsettled_slots", len(slots))
	return true
}

// matchRE is the family's SCAN pattern as a regexp, to pick its keys out
// of CLUSTER GETKEYSINSLOT.
func (r *familyRunner) matchRE() *regexp.Regexp {
	expr, _, err := config.GlobToRegexp(r.fam.Match)
	if err != nil {
		return regexp.MustCompile(`^$.`)
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return regexp.MustCompile(`^$.`)
	}
	return re
}

// rereadMoved reads again the keys a node redirected (MOVED, ASK) or told
// to retry (TRYAGAIN): they changed nodes while the sweep ran, by a reshard
// or a failover. The cluster client routes each key to its current node
// and follows redirections, ASKING included, so a key of a slot being
// migrated is read wherever it is by now. A key already read on another
// node is not read again. What still cannot be read is carried: its
// members are not ended and its user keeps its last used value, and the
// sweep says how many keys it missed.
func (r *familyRunner) rereadMoved(ctx context.Context, st *sweepState, p *readPlan, zc *zcountPlan) {
	uniq := map[string]struct{}{}
	var keys []string
	for _, k := range st.moved {
		if _, dup := uniq[k]; dup {
			continue
		}
		uniq[k] = struct{}{}
		if st.seenKeys != nil {
			if _, ok := st.seenKeys[xxhash.Sum64String(k)]; ok {
				continue
			}
		}
		keys = append(keys, k)
	}
	step := int(p.scanCount)
	if step < 1 {
		step = 1000
	}
	rc := router(r.s.topo)
	var err error
	if rc == nil {
		err = errors.New("no cluster client to follow redirections")
	}
	st.rereading = true
	for i := 0; i < len(keys); i += step {
		batch := keys[i:min(i+step, len(keys))]
		var reads []keyRead
		if err == nil {
			if err = p.wait(ctx, len(batch)); err == nil {
				reads, err = readBatch(ctx, rc, p, zc, batch)
			}
		}
		if err != nil {
			reads = make([]keyRead, len(batch))
			for j, k := range batch {
				reads[j] = keyRead{key: k, missed: true}
			}
		}
		for j := range reads {
			// A replica does not know that a slot is being migrated and
			// answers "no such key" for one that has left its master: a
			// moved key that reads as gone is carried, not ended.
			if reads[j].gone {
				reads[j].missed = true
			}
			r.apply(st, &reads[j])
		}
	}
	st.rereading = false
	args := []any{"keys", len(uniq), "read_elsewhere", len(uniq) - len(keys), "reread", len(keys) - st.missed, "missed", st.missed}
	if st.missed == 0 {
		r.log().Info("keys changed cluster nodes during the sweep (reshard or failover); all were read", args...)
		return
	}
	if err != nil {
		args = append(args, "err", err)
	}
	r.log().Warn("keys changed cluster nodes during the sweep (reshard or failover) and could not be read: their members are carried to the next sweep, not ended, and this sweep's gauges leave them out", args...)
}

// keepUnseen carries into this sweep the last used value of every user
// not seen in it.
func (f *FloorTracker) keepUnseen() {
	for h, u := range f.users {
		if u.pendingGen != f.gen {
			f.Add(h, u.name, u.used, u.flags&^anomalyOverLimit)
		}
	}
}

// keep carries a user's used value and anomalies from the last sweep into
// this one when its key could not be read: reading it as 0 would restart
// the user's floor age.
func (f *FloorTracker) keep(h uint64, name string) {
	u := f.users[h]
	if u == nil || u.pendingGen == f.gen {
		return
	}
	f.Add(h, name, u.used, u.flags&^anomalyOverLimit)
}

func sortNodes(n []node) []node {
	for i := 1; i < len(n); i++ {
		for j := i; j > 0 && n[j].addr < n[j-1].addr; j-- {
			n[j], n[j-1] = n[j-1], n[j]
		}
	}
	return n
}

// runID reads INFO server's run_id: it changes when the server restarts,
// which is how an emptied keyspace is told apart from mass releases. An
// error (INFO not allowed by ACL, say) yields "".
func runID(ctx context.Context, c redis.Cmdable) string {
	s, err := c.Info(ctx, "server").Result()
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(s, "\n") {
		if v, ok := strings.CutPrefix(line, "run_id:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
