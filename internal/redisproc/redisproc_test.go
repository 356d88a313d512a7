package redisproc

import (
	"bufio"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slotexporter/slot_exporter/config"
)

func TestMedian(t *testing.T) {
	if got := Median([]float64{3, 1, 2}); got != 2 {
		t.Errorf("odd count: %v, want 2", got)
	}
	if got := Median([]float64{4, 1, 3, 2}); got != 2.5 {
		t.Errorf("even count: %v, want 2.5", got)
	}
	if got := Median([]time.Duration{3 * time.Second, time.Second}); got != 2*time.Second {
		t.Errorf("durations: %v, want 2s", got)
	}
	if got := Median[int](nil); got != 0 {
		t.Errorf("none: %v, want 0", got)
	}
	xs := []float64{3, 1, 2}
	Median(xs)
	if xs[0] != 3 || xs[1] != 1 {
		t.Errorf("Median reordered its input: %v", xs)
	}
}

// TestServerLifecycle: a server answers once Start returns, a kill stops
// it, a restart brings it back empty on the same port, and Stop removes
// the directory Start made.
func TestServerLifecycle(t *testing.T) {
	s, err := Start(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	send := func(cmd string) (string, error) {
		c, err := net.DialTimeout("tcp", s.Addr, time.Second)
		if err != nil {
			return "", err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Write([]byte(cmd + "\r\n")); err != nil {
			return "", err
		}
		return bufio.NewReader(c).ReadString('\n')
	}
	if r, err := send("SET k v"); err != nil || r != "+OK\r\n" {
		t.Fatalf("SET: %q %v", r, err)
	}
	pid := s.PID()
	s.Kill()
	if s.Running() {
		t.Fatal("running after Kill")
	}
	if _, err := send("PING"); err == nil {
		t.Fatal("a killed server still answers")
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if s.PID() == pid || !s.Running() {
		t.Fatalf("restart: pid %d (was %d), running %v", s.PID(), pid, s.Running())
	}
	if r, err := send("EXISTS k"); err != nil || r != ":0\r\n" {
		t.Fatalf("after a restart the server must be empty: EXISTS %q %v", r, err)
	}
	dir := s.Dir
	s.Stop()
	s.Stop()
	if _, err := net.DialTimeout("tcp", s.Addr, time.Second); err == nil {
		t.Error("a stopped server still listens")
	}
	if _, err := Binary("no-such-binary-here"); err == nil {
		t.Error("Binary found a binary that does not exist")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("Stop left the scratch directory %q: %v", dir, err)
	}
}

// TestStartFailsWithLog: a server that cannot start is reported with its
// log, and nothing is left running.
func TestStartFailsWithLog(t *testing.T) {
	_, err := Start(Options{Args: []string{"--no-such-option", "x"}})
	if err == nil || !strings.Contains(err.Error(), "not ready") {
		t.Fatalf("err %v, want a server that is not ready", err)
	}
}

// TestStartWhenThePortIsTaken: a port taken before the server could
// listen on it is ErrPortTaken; one that Start picked is picked again,
// and the server starts on a port nobody holds.
func TestStartWhenThePortIsTaken(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := Start(Options{Port: l.Addr().(*net.TCPAddr).Port}); !errors.Is(err, ErrPortTaken) {
		t.Fatalf("a given port that is taken: %v, want ErrPortTaken", err)
	}

	// The first two ports Start picks are taken as the server is about
	// to listen on them.
	var taken []int
	command := func(port int, dir string) ([]string, error) {
		if len(taken) < 2 {
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
			if err != nil {
				return nil, err
			}
			t.Cleanup(func() { _ = l.Close() })
			taken = append(taken, port)
		}
		return []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", dir, "--logfile", filepath.Join(dir, "redis.log")}, nil
	}
	s, err := Start(Options{Command: command})
	if err != nil {
		t.Fatalf("after %d taken ports: %v", len(taken), err)
	}
	defer s.Stop()
	if len(taken) != 2 || slices.Contains(taken, s.Port) {
		t.Errorf("started on %d after taken ports %v, want 2 of them and another", s.Port, taken)
	}
}

// TestConfigParses: the fixture renders configs that the exporter's own
// parser takes, with the values it was given.
func TestConfigParses(t *testing.T) {
	slots := Slots()
	slots.Skew = 500 * time.Millisecond
	slots.Extra = []string{"score_unit: s"}
	yaml := Config{
		Addr:     "127.0.0.1:6379",
		Sampling: []string{"interval: 200ms", "max_members_per_key: 7"},
		Leaks:    []string{"per_user_series: 9"},
		Families: []Family{slots, Counters()},
	}.YAML()
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatalf("%v\n%s", err, yaml)
	}
	f := cfg.Families[0]
	if cfg.Redis.Addr != "127.0.0.1:6379" || cfg.Sampling.Interval != 200*time.Millisecond ||
		cfg.Sampling.MaxMembersPerKey != 7 || cfg.Leaks.PerUserSeries != 9 {
		t.Errorf("blocks: %+v %+v %+v", cfg.Redis, cfg.Sampling, cfg.Leaks)
	}
	if f.Name != "streams" || f.TTL != 120*time.Second || f.HeartbeatInterval != 20*time.Second ||
		f.MaxHold != 15*time.Minute || f.ClockSkewTolerance != 500*time.Millisecond || f.ScoreUnit != config.ScoreUnitSeconds {
		t.Errorf("slot family: %+v", f)
	}
	if u, ok := f.UserOf(SlotKey("u1")); !ok || u != "u1" {
		t.Errorf("user of %s: %q %v", SlotKey("u1"), u, ok)
	}
	if u, ok := cfg.Families[1].UserOf(CounterKey("it's")); !ok || u != "it's" {
		t.Errorf("user of %s: %q %v", CounterKey("it's"), u, ok)
	}
	def, err := config.Parse([]byte(Config{Addr: "x:1"}.YAML()))
	if err != nil || len(def.Families) != 2 || def.Families[1].Kind != config.KindCounter {
		t.Errorf("default families: %v %+v", err, def)
	}
}
