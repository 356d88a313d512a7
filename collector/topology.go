package collector

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
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
	c       *redis.ClusterClient
	replica bool
}

func (t *clusterTopology) Nodes(ctx context.Context) ([]node, error) {
	var (
		mu    sync.Mutex
		nodes []node
	)
	collect := func(_ context.Context, c *redis.Client) error {
		mu.Lock()
		nodes = append(nodes, node{addr: c.Options().Addr, c: c})
		mu.Unlock()
		return nil
	}
	if t.replica {
		if err := t.replicaNodes(ctx, collect); err == nil {
			return sortNodes(nodes), nil
		}
		nodes = nil
	}
	if err := t.c.ForEachMaster(ctx, collect); err != nil {
		return nil, err
	}
	return sortNodes(nodes), nil
}

// replicaNodes picks one replica per shard. A shard with no replica is
// read from its master, so no part of the keyspace goes unswept.
func (t *clusterTopology) replicaNodes(ctx context.Context, collect func(context.Context, *redis.Client) error) error {
	var mu sync.Mutex
	clients := map[string]*redis.Client{}
	err := t.c.ForEachShard(ctx, func(_ context.Context, c *redis.Client) error {
		mu.Lock()
		clients[c.Options().Addr] = c
		mu.Unlock()
		return nil
	})
	if err != nil {
		return err
	}
	shards, err := t.c.ClusterShards(ctx).Result()
	if err != nil {
		return err
	}
	for _, sh := range shards {
		var master, replica *redis.Client
		for _, n := range sh.Nodes {
			if n.Health != "" && n.Health != "online" {
				continue
			}
			host := n.Endpoint
			if host == "" || host == "?" {
				host = n.IP
			}
			c := clients[net.JoinHostPort(host, strconv.FormatInt(n.Port, 10))]
			if c == nil {
				continue
			}
			switch n.Role {
			case "master":
				master = c
			default:
				if replica == nil {
					replica = c
				}
			}
		}
		switch {
		case replica != nil:
			_ = collect(ctx, replica)
		case master != nil:
			_ = collect(ctx, master)
		}
	}
	return nil
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
