// Package redisproc starts and stops real redis-server (and
// redis-sentinel) processes on free loopback ports, each with its own
// scratch directory, and Redis Clusters of them, for tests (through
// internal/redistest) and for the tools under tools/ that measure the
// exporter against a real Redis. It
// also holds what those share besides servers: free ports, the median of a
// series of measurements and the family config fixture. It does not import
// testing, so that the tools can use it.
package redisproc

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Options say how to start a server.
type Options struct {
	// Binary is the program to run; "" is redis-server, found on PATH.
	Binary string
	// Port is the port to listen on; 0 picks a free one.
	Port int
	// Dir is the server's scratch directory; "" makes a temporary one,
	// which Stop removes.
	Dir string
	// TLS makes Port the TLS port (--tls-port) and turns the plain port
	// off; Args must then name the certificates, and the readiness probe
	// speaks TLS with TLSConfig.
	TLS       bool
	TLSConfig *tls.Config
	// Args are appended to the command line: loopback only, Port, no
	// persistence, logging to Dir/LogName.
	Args []string
	// Command, when set, replaces the whole command line; it gets the
	// port and the scratch directory (redis-sentinel takes a config
	// file, not flags).
	Command func(port int, dir string) ([]string, error)
	// LogName is the log file's name in Dir; "" is redis.log.
	LogName string
	// Ready reports whether the server is up; nil sends PING and takes
	// any reply (a server with a password answers NOAUTH: it is up).
	Ready func(s *Server) error
	// ReadyTimeout bounds the wait for Ready; 0 is 10s.
	ReadyTimeout time.Duration
}

// Server is one process started by Start.
type Server struct {
	Port int
	Addr string // 127.0.0.1:Port
	Dir  string

	opts   Options
	ownDir bool
	cmd    *exec.Cmd
	done   chan struct{}
}

// ErrNotFound is returned when none of the binaries asked for is on PATH.
var ErrNotFound = errors.New("not found on PATH; `make test` installs it (apt-get install -y redis-server)")

// Binary returns the path of the first of names found on PATH.
func Binary(names ...string) (string, error) {
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%v: %w", names, ErrNotFound)
}

// FreePort asks the kernel for a free loopback TCP port.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ErrPortTaken is a server that could not listen on its port (or its
// cluster bus port): another process took it between FreePort and the
// server's bind, an outgoing connection's local port as likely as not
// while many tests run at once. A caller that picked the port picks
// again.
var ErrPortTaken = errors.New("port taken before the server could listen on it")

// portTries is how many ports Start (and Cluster.StartNode) pick before
// giving up on ErrPortTaken.
const portTries = 5

// Start runs a server and waits until it answers. A port Start picked
// (Options.Port 0) that was taken before the server could listen on it
// is picked again. On an error nothing is left running, and the error
// carries the server's log.
func Start(o Options) (*Server, error) {
	if o.Port != 0 {
		return startOnce(o)
	}
	return pickingPorts(func() (*Server, error) { return startOnce(o) })
}

// pickingPorts runs start, which picks its own ports, until it starts a
// server, fails otherwise than on ErrPortTaken, or has tried portTries
// times.
func pickingPorts(start func() (*Server, error)) (*Server, error) {
	for try := 1; ; try++ {
		s, err := start()
		if err == nil || try == portTries || !errors.Is(err, ErrPortTaken) {
			return s, err
		}
	}
}

func startOnce(o Options) (*Server, error) {
	if o.Binary == "" {
		o.Binary = "redis-server"
	}
	if o.LogName == "" {
		o.LogName = "redis.log"
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = 10 * time.Second
	}
	s := &Server{Port: o.Port, Dir: o.Dir, opts: o}
	if s.Port == 0 {
		p, err := FreePort()
		if err != nil {
			return nil, err
		}
		s.Port = p
	}
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port))
	if s.Dir == "" {
		d, err := os.MkdirTemp("", "redisproc-")
		if err != nil {
			return nil, err
		}
		s.Dir, s.ownDir = d, true
	}
	if err := s.start(); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *Server) args() ([]string, error) {
	if s.opts.Command != nil {
		return s.opts.Command(s.Port, s.Dir)
	}
	port := []string{"--port", strconv.Itoa(s.Port)}
	if s.opts.TLS {
		port = []string{"--port", "0", "--tls-port", strconv.Itoa(s.Port)}
	}
	return append(append(port,
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.Dir,
		"--daemonize", "no",
		"--logfile", s.LogPath(),
	), s.opts.Args...), nil
}

func (s *Server) start() error {
	bin, err := Binary(s.opts.Binary)
	if err != nil {
		return err
	}
	args, err := s.args()
	if err != nil {
		return err
	}
	s.cmd = exec.Command(bin, args...)
	if err := s.cmd.Start(); err != nil {
		s.cmd = nil
		return fmt.Errorf("start %s: %w", s.opts.Binary, err)
	}
	s.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(s.cmd, s.done)
	if err := s.waitReady(); err != nil {
		log := s.Log()
		if strings.Contains(log, "Address already in use") {
			err = fmt.Errorf("%w: %w", ErrPortTaken, err)
		}
		return fmt.Errorf("%s on %s not ready: %w\n%s", s.opts.Binary, s.Addr, err, log)
	}
	return nil
}

func (s *Server) waitReady() error {
	ready := s.opts.Ready
	if ready == nil {
		ready = ping
	}
	deadline := time.Now().Add(s.opts.ReadyTimeout)
	for {
		if !s.Running() {
			return errors.New("exited")
		}
		err := ready(s)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ping sends an inline PING and takes any reply, an error included.
func ping(s *Server) error {
	d := &net.Dialer{Timeout: 200 * time.Millisecond}
	var c net.Conn
	var err error
	if s.opts.TLS {
		c, err = tls.DialWithDialer(d, "tcp", s.Addr, s.opts.TLSConfig)
	} else {
		c, err = d.Dial("tcp", s.Addr)
	}
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line[0] != '+' && line[0] != '-' {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

// LogPath is where the server writes its log.
func (s *Server) LogPath() string { return filepath.Join(s.Dir, s.opts.LogName) }

// Log returns what the server wrote to its log, for failure reports.
func (s *Server) Log() string {
	b, _ := os.ReadFile(s.LogPath())
	return string(b)
}

// PID is the process id, 0 when it is not running.
func (s *Server) PID() int {
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

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

// Kill sends SIGKILL, as a crash or an OOM kill would, and waits for the
// process to go.
func (s *Server) Kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// Restart kills the server and starts it again on the same port, empty
// (there is no persistence), unless it is a replica: a full sync leaves
// an RDB file in Dir, which the start loads.
func (s *Server) Restart() error {
	s.Kill()
	return s.start()
}

// Stop kills the server and removes the scratch directory Start made. It
// is safe to call twice.
func (s *Server) Stop() {
	s.Kill()
	if s.ownDir {
		_ = os.RemoveAll(s.Dir)
		s.ownDir = false
	}
}
