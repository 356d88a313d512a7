// Package redistest starts real redis-server processes for tests, each on a
// free loopback port with its own scratch directory, and stops them when the
// test ends. Tests never talk to a mock of Redis. It is the testing side of
// internal/redisproc, which the tools share.
package redistest

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/redisproc"
)

// Calls is how many times the server behind c ran cmd (lower case) since
// it started or since its last CONFIG RESETSTAT.
func Calls(t testing.TB, c redis.Cmdable, cmd string) int64 {
	t.Helper()
	st, err := redisproc.CommandStats(context.Background(), c)
	if err != nil {
		t.Fatalf("INFO commandstats: %v", err)
	}
	return st[cmd].Calls
}

// Server is one redis-server process owned by a test.
type Server struct {
	*redisproc.Server
	t testing.TB
}

// Binary returns the path of a server binary, failing the test with a hint
// when it is missing: `make test` installs it.
func Binary(t testing.TB, names ...string) string {
	t.Helper()
	p, err := redisproc.Binary(names...)
	if err != nil {
		t.Fatalf("%v (apt-get install -y redis-server prometheus prometheus-alertmanager)", err)
	}
	return p
}

// FreePort asks the kernel for a free loopback TCP port.
func FreePort(t testing.TB) int {
	t.Helper()
	p, err := redisproc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Start runs redis-server on a free port with persistence off. Extra args are
// appended to the command line (for example "--requirepass", "x").
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	return StartPort(t, 0, extra...)
}

// StartPort is Start on a given port, for a server that must appear where
// a client already expects one.
func StartPort(t testing.TB, port int, extra ...string) *Server {
	t.Helper()
	return StartWith(t, redisproc.Options{Port: port, Args: extra})
}

// StartWith starts a server with any options; its scratch directory is the
// test's.
func StartWith(t testing.TB, o redisproc.Options) *Server {
	t.Helper()
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	s, err := redisproc.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return &Server{Server: s, t: t}
}

// Client returns a go-redis client for the server, closed at test end.
func (s *Server) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr, DisableIdentity: true})
	s.t.Cleanup(func() { _ = c.Close() })
	return c
}

// ClientOf is a client of database db, closed when the test ends: the
// database beside the one a family reads (a cache a deploy flushes).
func (s *Server) ClientOf(db int) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr, DB: db, DisableIdentity: true})
	s.t.Cleanup(func() { _ = c.Close() })
	return c
}

// Restart kills the server and starts it again on the same port: empty,
// but for a replica, which loads the RDB file its last full sync wrote
// (a replica writes it with persistence off).
func (s *Server) Restart() {
	s.t.Helper()
	if err := s.Server.Restart(); err != nil {
		s.t.Fatal(err)
	}
}

// RestartEmpty is Restart without the files a start loads, as a replica
// comes back whose pod lost its disk: it holds nothing until it syncs.
func (s *Server) RestartEmpty() {
	s.t.Helper()
	s.Kill()
	for _, f := range []string{"dump.rdb", "appendonlydir"} {
		if err := os.RemoveAll(filepath.Join(s.Dir, f)); err != nil {
			s.t.Fatal(err)
		}
	}
	s.Restart()
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
