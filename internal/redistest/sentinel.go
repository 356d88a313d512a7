package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
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
	t    testing.TB
	Name string // the monitored master's name
	Port int
	Addr string
	Dir  string
	cmd  *exec.Cmd
	done chan struct{}
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
	bin := Binary(t, "redis-sentinel")
	s := &Sentinel{t: t, Name: name, Port: FreePort(t), Dir: t.TempDir()}
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port))
	conf := fmt.Sprintf(`port %d
bind 127.0.0.1
daemonize no
dir %s
logfile %s
sentinel monitor %s 127.0.0.1 %d 1
sentinel down-after-milliseconds %s %d
sentinel failover-timeout %s %d
`, s.Port, s.Dir, filepath.Join(s.Dir, "sentinel.log"),
		name, master.Port, name, o.DownAfter.Milliseconds(), name, o.FailoverTimeout.Milliseconds())
	path := filepath.Join(s.Dir, "sentinel.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	s.cmd = exec.Command(bin, path)
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start redis-sentinel: %v", err)
	}
	s.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(s.cmd, s.done)
	t.Cleanup(s.Stop)
	if _, err := s.waitMaster(10*time.Second, func(string) bool { return true }); err != nil {
		t.Fatalf("redis-sentinel on %s not ready: %v\n%s", s.Addr, err, s.Log())
	}
	return s
}

// Log returns what the sentinel wrote to its log file, for failure reports.
func (s *Sentinel) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.Dir, "sentinel.log"))
	return string(b)
}

// Master asks the sentinel where the master called name is now.
func (s *Sentinel) Master(ctx context.Context, name string) (string, error) {
	c := redis.NewSentinelClient(&redis.Options{Addr: s.Addr, DisableIdentity: true})
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
		select {
		case <-s.done:
			return "", fmt.Errorf("redis-sentinel exited")
		default:
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

// Stop ends the sentinel; it is safe to call twice.
func (s *Sentinel) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}
