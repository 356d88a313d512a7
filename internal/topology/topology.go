// Package topology knows the servers that hold the keyspace (a single
// server, a cluster's masters or one replica per shard, a Sentinel's
// master or one of its replicas), who owns each cluster slot and which slots are moving, a key's
// hash slot and an exporter's shard of them, and what a server says of
// itself (Identity).
package topology

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Node is one Redis server a sweep reads from.
type Node struct {
	Addr string
	C    redis.Cmdable
	// Group names servers that hold the same data and of which a sweep
	// reads whichever is usable (a Sentinel master's replicas and the
	// master): the lost watch compares a server of the group with the
	// one read before it. Empty for any other server.
	Group string
}

// Topology lists the servers that together hold the keyspace: a
// cluster's masters (or one replica per shard with read_from: replica),
// or the one server of a standalone or Sentinel-managed setup.
type Topology struct {
	single  redis.UniversalClient
	cluster *redis.ClusterClient
	replica bool
	// sentinel picks the server to read through Sentinel with
	// read_from: replica; nil otherwise.
	sentinel *sentinelReplicas

	// masters routes to masters when cluster reads replicas; made on
	// first use (a reshard that ends a key mid-sweep), closed by Close.
	mastersOnce sync.Once
	masters     *redis.ClusterClient
}

// New picks how to find the servers behind a client.
func New(c redis.UniversalClient, readReplica bool) *Topology {
	if cc, ok := c.(*redis.ClusterClient); ok {
		return &Topology{cluster: cc, replica: readReplica}
	}
	if fc, ok := c.(FailoverClient); ok {
		base, opt := fc.Failover()
		t := &Topology{single: base}
		if readReplica {
			t.sentinel = newSentinelReplicas(base, opt)
		}
		return t
	}
	return &Topology{single: c}
}

// IsCluster reports whether the keyspace is spread over a cluster.
func (t *Topology) IsCluster() bool { return t.cluster != nil }

// ReadsReplicas reports whether keys are read from cluster replicas
// (read_from: replica), through Router too.
func (t *Topology) ReadsReplicas() bool { return t.cluster != nil && t.replica }

// Router returns a client that sends each key to the node that holds it
// now, following MOVED and ASK; for a single server, the client itself;
// through Sentinel with read_from: replica, the server Nodes picked last.
func (t *Topology) Router() redis.Cmdable {
	if t.cluster != nil {
		return t.cluster
	}
	if t.sentinel != nil {
		if c := t.sentinel.current(); c != nil {
			return c
		}
	}
	return t.single
}

// RouterFor is Router for a sweep that listed nodes: through Sentinel
// with read_from: replica, the server those nodes name. Router gives the
// server any sweep picked last, and each family's sweep asks the
// Sentinels for itself: where one family's sweep moved to another
// replica, another family's keys read every sweep went there, away from
// the replica its SCAN pages and its identity check read.
func (t *Topology) RouterFor(nodes []Node) redis.Cmdable {
	if t.sentinel != nil && len(nodes) == 1 && nodes[0].C != nil {
		return nodes[0].C
	}
	return t.Router()
}

// Masters returns a client that sends each key to the master that holds
// it now, following MOVED and ASK, for the answers a replica cannot give:
// a replica knows nothing of a migration, nor of writes it has yet to
// receive. It is Router unless keys are read from replicas.
func (t *Topology) Masters() redis.Cmdable {
	if !t.ReadsReplicas() {
		return t.Router()
	}
	t.mastersOnce.Do(func() {
		o := *t.cluster.Options()
		o.ReadOnly, o.RouteByLatency, o.RouteRandomly = false, false, false
		t.masters = redis.NewClusterClient(&o)
	})
	return t.masters
}

// Close closes what the topology opened itself (not the client it was
// given).
func (t *Topology) Close() {
	t.mastersOnce.Do(func() {}) // none is made after this
	if t.masters != nil {
		_ = t.masters.Close()
	}
	if t.sentinel != nil {
		t.sentinel.close()
	}
}

// Nodes lists the servers to read. In a cluster, the masters, or with
// read_from: replica one replica per shard. ForEachMaster and
// ForEachShard reload the slot map first, so a sweep after a reshard or a
// failover reads the nodes that hold the keys now. Through Sentinel with
// read_from: replica, one replica (or the master), asked of the Sentinels
// at every call.
func (t *Topology) Nodes(ctx context.Context) ([]Node, error) {
	if t.sentinel != nil {
		n, err := t.sentinel.node(ctx)
		if err != nil {
			return nil, err
		}
		return []Node{n}, nil
	}
	if t.cluster == nil {
		addr := ""
		if c, ok := t.single.(*redis.Client); ok {
			addr = c.Options().Addr
		}
		return []Node{{Addr: addr, C: t.single}}, nil
	}
	if t.replica {
		// Should the shard map be unreadable or not match the slot map,
		// the masters are read: a complete sweep beats a replica-only one.
		if nodes, err := t.replicaNodes(ctx); err == nil {
			return sortNodes(nodes), nil
		}
	}
	var (
		mu    sync.Mutex
		nodes []Node
	)
	// A node taken out of the cluster (CLUSTER RESET after del-node, and
	// still running) answers CLUSTER SLOTS with no slots, and go-redis
	// reloads its slot map from a node it picks at random among those it
	// knows, until it forgets the address: a listing from that node has
	// no master, and sweeps failed on and off for a minute. Another pick
	// is another node.
	for range slotMapTries {
		err := t.cluster.ForEachMaster(ctx, func(_ context.Context, c *redis.Client) error {
			mu.Lock()
			nodes = append(nodes, Node{Addr: c.Options().Addr, C: c})
			mu.Unlock()
			return nil
		})
		switch {
		case err != nil:
			return nil, err
		case len(nodes) > 0:
			return sortNodes(nodes), nil
		}
	}
	return nil, errors.New("every node asked for the slot map owns no slots")
}

// slotMapTries bounds the reloads of a slot map without masters: with one
// such node of four known, ten give no master once in a million listings.
const slotMapTries = 10

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
func (t *Topology) replicaNodes(ctx context.Context) ([]Node, error) {
	type known struct {
		c *redis.Client
		// synced is ROLE's word that the replica has finished its sync
		// and is connected; unknown when ROLE is refused.
		synced, roleKnown bool
	}
	var mu sync.Mutex
	byID := map[string]known{}
	byAddr := map[string]known{}
	err := t.cluster.ForEachShard(ctx, func(ctx context.Context, c *redis.Client) error {
		var id *redis.StringCmd
		var role *redis.Cmd
		_, perr := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			// The client's address may not be the one the node announces
			// (go-redis rewrites a loopback address seen through a remote
			// seed; a TLS-only node announces port 0): match by node id.
			id = p.ClusterMyID(ctx)
			role = p.Do(ctx, "ROLE")
			return nil
		})
		var reply redis.Error
		if perr != nil && !errors.As(perr, &reply) {
			// Not reached (killed, restarting): the cluster calls it
			// online until its node timeout, and every sweep that read
			// it failed meanwhile; its shard is read elsewhere. A
			// refusal (an ACL without ROLE) is Redis's answer: the node
			// is there.
			return nil
		}
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
	var nodes []Node
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
			nodes = append(nodes, Node{Addr: replica.Options().Addr, C: replica})
		case master != nil:
			nodes = append(nodes, Node{Addr: master.Options().Addr, C: master})
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
func (t *Topology) shards(ctx context.Context) ([][]shardNode, error) {
	res, err := t.cluster.ClusterShards(ctx).Result()
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
	slots, serr := t.cluster.ClusterSlots(ctx).Result()
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

func sortNodes(n []Node) []Node {
	for i := 1; i < len(n); i++ {
		for j := i; j > 0 && n[j].Addr < n[j-1].Addr; j-- {
			n[j], n[j-1] = n[j-1], n[j]
		}
	}
	return n
}
