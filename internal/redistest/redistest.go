// Package redistest starts real redis-server processes for tests, each on a
// free loopback port with its own scratch directory, and stops them when the
// test ends. Tests never talk to a mock of Redis.
package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is one redis-server process owned by a test.
type Server struct {
	t    testing.TB
	Port int
	Addr string
	Dir  string
	args []string
	cmd  *exec.Cmd
	done chan struct{}
}

// Binary returns the path of a server binary, failing the test with a hint
// when it is missing: `make test` installs it.
func Binary(t testing.TB, names ...string) string {
	t.Helper()
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	t.Fatalf("%v not found on PATH; `make test` installs it (apt-get install -y redis-server prometheus prometheus-alertmanager)", names)
	return ""
}

// FreePort asks the kernel for a free loopback TCP port.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Start runs redis-server on a free port with persistence off. Extra args are
// appended to the command line (for example "--requirepass", "x").
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	return StartPort(t, FreePort(t), extra...)
}

// StartPort is Start on a given port, for a server that must appear where
// a client already expects one.
func StartPort(t testing.TB, port int, extra ...string) *Server {
	t.Helper()
	s := &Server{t: t, Port: port, Dir: t.TempDir()}
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port))
	s.args = append([]string{
		"--port", strconv.Itoa(s.Port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.Dir,
		"--daemonize", "no",
		"--logfile", filepath.Join(s.Dir, "redis.log"),
	}, extra...)
	s.start()
	t.Cleanup(s.Stop)
	return s
}

func (s *Server) start() {
	s.t.Helper()
	bin := Binary(s.t, "redis-server")
	s.cmd = exec.Command(bin, s.args...)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("start redis-server: %v", err)
	}
	s.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(s.cmd, s.done)
	if err := s.waitReady(10 * time.Second); err != nil {
		log, _ := os.ReadFile(filepath.Join(s.Dir, "redis.log"))
		s.t.Fatalf("redis-server on %s not ready: %v\n%s", s.Addr, err, log)
	}
}

func (s *Server) waitReady(d time.Duration) error {
	deadline := time.Now().Add(d)
	var err error
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			return fmt.Errorf("exited")
		default:
		}
		var c net.Conn
		c, err = net.DialTimeout("tcp", s.Addr, 200*time.Millisecond)
		if err == nil {
			_ = c.SetDeadline(time.Now().Add(time.Second))
			_, _ = c.Write([]byte("PING\r\n"))
			buf := make([]byte, 64)
			n, rerr := c.Read(buf)
			c.Close()
			// A password-protected server answers NOAUTH: it is up all the same.
			if rerr == nil && n > 0 && (buf[0] == '+' || buf[0] == '-') {
				return nil
			}
			err = rerr
		}
		time.Sleep(20 * time.Millisecond)
	}
	return err
}

// Client returns a go-redis client for the server, closed at test end.
func (s *Server) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr, DisableIdentity: true})
	s.t.Cleanup(func() { _ = c.Close() })
	return c
}

// Kill sends SIGKILL, as a crash or an OOM kill would.
func (s *Server) Kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// Restart kills the server and starts it again, empty, on the same port.
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	s.start()
}

// Stop ends the server; it is safe to call twice.
func (s *Server) Stop() { s.Kill() }

// Running reports whether the process is alive.
func (s *Server) Running() bool {
	if s.cmd == nil {
		return false
	}
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// Flush empties the server between sub-tests.
func (s *Server) Flush(ctx context.Context) {
	s.t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr, DisableIdentity: true})
	defer c.Close()
	if err := c.FlushAll(ctx).Err(); err != nil {
		s.t.Fatalf("flushall: %v", err)
	}
}
