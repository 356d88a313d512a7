package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/redisproc"
)

// server is a redis-server process the bench owns: loopback only, no
// persistence, its own scratch directory.
type server struct{ *redisproc.Server }

func startServer() (*server, error) {
	// DEBUG POPULATE fills the big unrelated keyspace of the notify run.
	s, err := redisproc.Start(redisproc.Options{Args: []string{"--enable-debug-command", "local"}})
	if err != nil {
		return nil, err
	}
	return &server{s}, nil
}

func (s *server) client() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: s.Addr, ReadTimeout: time.Minute, WriteTimeout: time.Minute})
}

// cmdStat is one line of INFO commandstats.
type cmdStat = redisproc.CommandStat

var commandStats = redisproc.CommandStats

// procCPU is the user+system CPU time a process has used, from
// /proc/PID/stat (clock ticks of 10 ms on Linux).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	// The command name may hold spaces; fields start after its ')'.
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// procStatus reads a "kB" field of /proc/self/status (VmRSS, VmHWM) in bytes.
func procStatus(field string) uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != field {
			continue
		}
		n, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		return n << 10
	}
	return 0
}
