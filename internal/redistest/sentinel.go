package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/redisproc"
)

// StartReplica runs a redis-server replicating master and waits until the
// initial sync is done, so that what the master held is on the replica.
func StartReplica(t testing.TB, master *Server, extra ...string) *Server {
	t.Helper()
	// A diskless full sync otherwise waits 5s for more replicas to join.
	mc := redis.NewClient(&redis.Options{Addr: master.Addr, DisableIdentity: true})
	err := mc.ConfigSet(context.Background(), "repl-diskless-sync-delay", "0").Err()
	mc.Close()
	if err != nil {
		t.Fatalf("CONFIG SET repl-diskless-sync-delay on %s: %v", master.Addr, err)
	}
	args := append([]string{"--replicaof", "127.0.0.1", strconv.Itoa(master.Port)}, extra...)
	r := Start(t, args...)
	c := redis.NewClient(&redis.Options{Addr: r.Addr, DisableIdentity: true})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := c.Info(context.Background(), "replication").Result()
		if err == nil && strings.Contains(info, "master_link_status:up") && !strings.Contains(info, "master_sync_in_progress:1") {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica %s of %s did not sync within 10s: %v\n%s", r.Addr, master.Addr, err, info)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// WaitReplicated blocks until every replica has acknowledged the master's
// writes so far (WAIT), so a failover cannot lose seeded data.
func WaitReplicated(t testing.TB, master *Server, replicas int) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: master.Addr, DisableIdentity: true})
	defer c.Close()
	n, err := c.Wait(context.Background(), replicas, 10*time.Second).Result()
	if err != nil || n < int64(replicas) {
		t.Fatalf("WAIT %d replicas on %s: %d acknowledged, %v", replicas, master.Addr, n, err)
	}
}

// Sentinel is one redis-sentinel process owned by a test.
type Sentinel struct {
	*redisproc.Server
	t    testing.TB
	Name string // the monitored master's name
}

// SentinelOptions tune the failover timings; zero values pick short ones
// suited to tests.
type SentinelOptions struct {
	DownAfter       time.Duration // default 500ms
	FailoverTimeout time.Duration // default 2s
}

// StartSentinel runs redis-sentinel on a free port, monitoring master under
// name with a quorum of 1. Sentinel rewrites its config file, so the file
// lives in the sentinel's own scratch directory.
func StartSentinel(t testing.TB, name string, master *Server, o SentinelOptions) *Sentinel {
	t.Helper()
	if o.DownAfter <= 0 {
		o.DownAfter = 500 * time.Millisecond
	}
	if o.FailoverTimeout <= 0 {
		o.FailoverTimeout = 2 * time.Second
	}
	s := &Sentinel{t: t, Name: name}
	srv, err := redisproc.Start(redisproc.Options{
		Binary: "redis-sentinel", Dir: t.TempDir(), LogName: "sentinel.log",
		Command: func(port int, dir string) ([]string, error) {
			conf := fmt.Sprintf(`port %d
bind 127.0.0.1
daemonize no
dir %s
logfile %s
sentinel monitor %s 127.0.0.1 %d 1
sentinel down-after-milliseconds %s %d
sentinel failover-timeout %s %d
`, port, dir, filepath.Join(dir, "sentinel.log"),
				name, master.Port, name, o.DownAfter.Milliseconds(), name, o.FailoverTimeout.Milliseconds())
			path := filepath.Join(dir, "sentinel.conf")
			return []string{path}, os.WriteFile(path, []byte(conf), 0o600)
		},
		// Up once it names a master.
		Ready: func(srv *redisproc.Server) error {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_, err := sentinelMaster(ctx, srv.Addr, name)
			return err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Server = srv
	t.Cleanup(srv.Stop)
	return s
}

// Master asks the sentinel where the master called name is now.
func (s *Sentinel) Master(ctx context.Context, name string) (string, error) {
	return sentinelMaster(ctx, s.Addr, name)
}

func sentinelMaster(ctx context.Context, addr, name string) (string, error) {
	c := redis.NewSentinelClient(&redis.Options{Addr: addr, DisableIdentity: true})
	defer c.Close()
	hp, err := c.GetMasterAddrByName(ctx, name).Result()
	if err != nil {
		return "", err
	}
	if len(hp) != 2 {
		return "", fmt.Errorf("get-master-addr-by-name: %v", hp)
	}
	return net.JoinHostPort(hp[0], hp[1]), nil
}

// WaitReplicas blocks until the sentinel knows of n replicas of its
// master: it can only fail over to a replica it has discovered.
func (s *Sentinel) WaitReplicas(n int, d time.Duration) {
	s.t.Helper()
	c := redis.NewSentinelClient(&redis.Options{Addr: s.Addr, DisableIdentity: true})
	defer c.Close()
	deadline := time.Now().Add(d)
	for {
		rs, err := c.Replicas(context.Background(), s.Name).Result()
		if err == nil && len(rs) >= n {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("sentinel knows %d replicas of %s after %s, want %d: %v\n%s", len(rs), s.Name, d, n, err, s.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// WaitMasterNot blocks until the sentinel names a master other than addr:
// the failover is done. It fails the test after d.
func (s *Sentinel) WaitMasterNot(addr string, d time.Duration) string {
	s.t.Helper()
	m, err := s.waitMaster(d, func(m string) bool { return m != addr })
	if err != nil {
		s.t.Fatalf("sentinel still names %s as master of %s after %s: %v\n%s", addr, s.Name, d, err, s.Log())
	}
	return m
}

func (s *Sentinel) waitMaster(d time.Duration, ok func(string) bool) (string, error) {
	deadline := time.Now().Add(d)
	var err error
	for time.Now().Before(deadline) {
		if !s.Running() {
			return "", fmt.Errorf("redis-sentinel exited")
		}
		var m string
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		m, err = s.Master(ctx, s.Name)
		cancel()
		if err == nil && ok(m) {
			return m, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return "", err
}
