package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/redisproc"
	"github.com/slotexporter/slot_exporter/internal/redistest"
)

func sentinelConfig(addr string) string {
	return redisproc.Config{
		Redis:    []string{"mode: sentinel", fmt.Sprintf("addrs: [%q]", addr), "master_name: m"},
		Sampling: []string{"interval: 200ms", "timeout: 1s", "window: 1s"},
	}.YAML()
}

// TestSentinelFailover: the exporter finds the master through Sentinel,
// keeps answering while the master is down, and samples the promoted
// replica after the failover without a restart, with the same numbers.
func TestSentinelFailover(t *testing.T) {
	master := redistest.Start(t)
	seed(t, master.Client())
	replica := redistest.StartReplica(t, master)
	redistest.WaitReplicated(t, master, 1)
	sent := redistest.StartSentinel(t, "m", master, redistest.SentinelOptions{})
	sent.WaitReplicas(1, 10*time.Second)

	cfg := filepath.Join(t.TempDir(), "slot_exporter.yml")
	exportertest.WriteFile(t, cfg, sentinelConfig(sent.Addr))
	p := startExporter(t, "--config.file="+cfg)
	want := map[string]string{
		`slot_exporter_up`:                                            "1",
		`slot_sets{family="streams"}`:                                 "6",
		`slot_members{family="streams",state="live"}`:                 "5",
		`slot_members{family="streams",state="future"}`:               "1",
		`slot_acquires_total{family="streams"}`:                       "6",
		`slot_holds_ended_total{family="streams",outcome="released"}`: "0",
		`slot_holds_ended_total{family="streams",outcome="lost"}`:     "0",
		`slot_sets{family="legacy"}`:                                  "2",
		`slot_counters_negative{family="legacy"}`:                     "1",
	}
	check := func(page string) []string {
		var bad []string
		for s, v := range want {
			if got := metric(page, s); got != v {
				bad = append(bad, fmt.Sprintf("%s = %q, want %s", s, got, v))
			}
		}
		return bad
	}
	var page string
	exportertest.WaitFor(t, 10*time.Second, "first sweep through sentinel", func() bool {
		_, page = p.get(t, "/metrics")
		return len(check(page)) == 0
	})
	errsBefore := metric(page, `slot_exporter_sweep_errors_total{family="streams"}`)

	master.Kill()
	killed := time.Now()
	newMaster := sent.WaitMasterNot(master.Addr, 20*time.Second)
	if newMaster != replica.Addr {
		t.Fatalf("sentinel promoted %s, want the replica %s", newMaster, replica.Addr)
	}
	t.Logf("failover took %s", time.Since(killed).Round(10*time.Millisecond))

	// Sampling resumes on the promoted replica, which had every key.
	var errsAfter string
	exportertest.WaitFor(t, 20*time.Second, "sampling on the new master", func() bool {
		_, page = p.get(t, "/metrics")
		errsAfter = metric(page, `slot_exporter_sweep_errors_total{family="streams"}`)
		return len(check(page)) == 0
	})
	if errsAfter == errsBefore {
		t.Errorf("sweep errors stayed at %s across a dead master: the outage went unreported", errsBefore)
	}
	// Several intervals later nothing fails any more.
	time.Sleep(time.Second)
	_, page = p.get(t, "/metrics")
	if e := metric(page, `slot_exporter_sweep_errors_total{family="streams"}`); e != errsAfter {
		t.Errorf("sweep errors still rising after the failover: %s -> %s", errsAfter, e)
	}
	for _, bad := range check(page) {
		t.Error(bad)
	}
	if c, _ := p.get(t, "/-/ready"); c != 200 {
		t.Errorf("/-/ready after failover: %d", c)
	}
	if strings.Count(p.logs.String(), "sweep failed") == 0 {
		t.Errorf("no sweep failure logged while the master was down")
	}
}
