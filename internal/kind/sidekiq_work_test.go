package kind

import (
	"strings"
	"testing"
)

// A work entry as Sidekiq 6.4.1's heartbeat wrote it in a real run
// (examples/frameworks/sidekiq), and the nested form of other releases.
func TestParseSidekiqWork(t *testing.T) {
	const real = `{"queue":"default","payload":"{\"retry\":false,\"queue\":\"default\",\"class\":\"GateJob\",\"args\":[\"g1\"],\"jid\":\"2fc67ca77cb7be988257c582\",\"created_at\":1796183252.003405,\"enqueued_at\":1796183252.0036457}","run_at":1796183256}`
	j, err := parseSidekiqWork(real)
	if err != nil {
		t.Fatal(err)
	}
	want := sidekiqJob{JID: "2fc67ca77cb7be988257c582", Class: "GateJob", Queue: "default", RunAt: 1796183256000, Attempts: 1}
	if j != want {
		t.Errorf("got %+v, want %+v", j, want)
	}
	j, err = parseSidekiqWork(`{"queue":"mail","payload":{"jid":"abc","class":"ActiveJob::QueueAdapters::SidekiqAdapter::JobWrapper","wrapped":"MailJob","retry_count":2},"run_at":1.5}`)
	if err != nil {
		t.Fatal(err)
	}
	if j.Class != "MailJob" || j.Attempts != 4 || j.RunAt != 1500 || j.Queue != "mail" {
		t.Errorf("nested payload: %+v", j)
	}
	for v, why := range map[string]string{
		`{"queue":`:                       "not JSON",
		`{"queue":"q","payload":"{oops"}`: "payload is not",
		`{"queue":"q"}`:                   "no payload",
		`{"queue":"q","payload":"{}"}`:    "no jid",
		`[1,2]`:                           "not JSON",
	} {
		if _, err := parseSidekiqWork(v); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("%s: err %v, want one saying %q", v, err, why)
		}
	}
}

func TestSidekiqLostJudgement(t *testing.T) {
	a := sidekiqJob{JID: "a", Queue: "q"}
	b := sidekiqJob{JID: "b", Queue: "q"}
	both := map[string]sidekiqJob{"a": a, "b": b}
	onlyB := map[string]sidekiqJob{"b": b}

	t.Run("finished while beating", func(t *testing.T) {
		s := newSidekiqProcesses()
		s.observe("p", sidekiqSighting{Listed: true, Heartbeat: true, Beat: 1000, Work: both})
		if lost := s.observe("p", sidekiqSighting{Listed: true, Heartbeat: true, Beat: 6000, Work: onlyB}); len(lost) != 0 {
			t.Errorf("lost %v", lost)
		}
	})
	t.Run("killed: both hashes expire", func(t *testing.T) {
		s := newSidekiqProcesses()
		s.observe("p", sidekiqSighting{Listed: true, Heartbeat: true, Beat: 1000, Work: both})
		// Still there, not beating: nothing is judged while the work is seen.
		if lost := s.observe("p", sidekiqSighting{Listed: true, Heartbeat: true, Beat: 1000, Work: both}); len(lost) != 0 {
			t.Fatalf("lost %v before expiry", lost)
		}
		lost := s.observe("p", sidekiqSighting{Listed: true})
		if len(lost) != 2 {
			t.Fatalf("lost %v, want a and b", lost)
		}
		// Counted once: the dead process stays listed until pruned.
		if lost := s.observe("p", sidekiqSighting{Listed: true}); len(lost) != 0 {
			t.Errorf("counted again: %v", lost)
		}
	})
	t.Run("work hash expired a moment before the heartbeat", func(t *testing.T) {
		s := newSidekiqProcesses()
		s.observe("p", sidekiqSighting{Listed: true, Heartbeat: true, Beat: 1000, Work: both})
		if lost := s.observe("p", sidekiqSighting{Listed: true, Heartbeat: true, Beat: 1000}); len(lost) != 0 {
			t.Fatalf("judged early: %v", lost)
		}
		if got := s.remembered(); len(got) != 1 {
			t.Fatalf("remembered %v", got)
		}
		// Pruned from `processes` by a live process meanwhile: still read.
		if lost := s.observe("p", sidekiqSighting{}); len(lost) != 2 {
			t.Errorf("lost %v, want a and b", lost)
		}
	})
	t.Run("between the two MULTI blocks", func(t *testing.T) {
		s := newSidekiqProcesses()
		s.observe("p", sidekiqSighting{Listed: true, Heartbeat: true, Beat: 1000, Work: both})
		s.observe("p", sidekiqSighting{Listed: true, Heartbeat: true, Beat: 1000, Work: onlyB})
		if lost := s.observe("p", sidekiqSighting{Listed: true, Heartbeat: true, Beat: 6000, Work: onlyB}); len(lost) != 0 {
			t.Errorf("lost %v", lost)
		}
	})
	t.Run("graceful stop", func(t *testing.T) {
		s := newSidekiqProcesses()
		s.observe("p", sidekiqSighting{Listed: true, Heartbeat: true, Beat: 1000, Work: both})
		if lost := s.observe("p", sidekiqSighting{Heartbeat: true, Beat: 1000}); len(lost) != 0 {
			t.Errorf("lost %v", lost)
		}
		s.begin()
		s.end()
		if len(s.procs) != 0 {
			t.Errorf("kept %v", s.procs)
		}
	})
}
