package frameworks_test

// The exporter side: the example config, pointed at the test's server,
// swept in process when the test says so (exportertest), so that each
// figure is read right after the framework event it follows.

import (
	"fmt"
	"os"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/kind"
)

// exampleExporter runs the family of example (one family) against addr,
// with the given fields of the family replaced; each must already be set
// in the example, so that the test runs the example's own shape.
func exampleExporter(t *testing.T, example, addr string, rc *redis.Client, fields map[string]any) *swept {
	t.Helper()
	raw, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatalf("%s: %v", example, err)
	}
	cfg["redis"] = map[string]any{"addr": addr}
	fams, _ := cfg["families"].([]any)
	if len(fams) != 1 {
		t.Fatalf("%s: want one family, have %d", example, len(fams))
	}
	fam := fams[0].(map[string]any)
	for k, v := range fields {
		if _, ok := fam[k]; !ok {
			t.Fatalf("%s sets no %s; the test overrides only what the example sets", example, k)
		}
		fam[k] = v
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	logs := exportertest.NewLogs()
	h := exportertest.New(t, rc, string(out), logs.Logger())
	return &swept{t: t, h: h, rc: rc, family: fam["name"].(string), logs: logs}
}

// swept is one family's exporter and the figures of its last sweep.
type swept struct {
	t      *testing.T
	h      *exportertest.Harness
	rc     *redis.Client
	family string
	logs   *exportertest.Logs
	m      map[string]float64
	// before and after bracket the last sweep's Redis TIME (ms).
	before, after int64
}

// sweep sweeps once and keeps the figures.
func (s *swept) sweep() {
	s.t.Helper()
	s.before = exportertest.RedisTime(s.t, s.rc)
	s.h.Sweep()
	s.after = exportertest.RedisTime(s.t, s.rc)
	s.m = s.h.Metrics()
}

func (s *swept) get(name string, labels ...string) float64 {
	s.t.Helper()
	key := name + `{family="` + s.family + `"`
	for i := 0; i+1 < len(labels); i += 2 {
		key += fmt.Sprintf(",%s=%q", labels[i], labels[i+1])
	}
	key += "}"
	v, ok := s.m[key]
	if !ok {
		s.t.Fatalf("%s is not on /metrics; have %v", key, exportertest.Series(s.m, name))
	}
	return v
}

// figures is what a test expects of a sweep: slot_jobs by state, workers
// live and dead, jobs lost.
type figures struct {
	jobs       map[string]float64
	live, dead float64
	lost       float64
}

// expect compares the last sweep with want; every job state not named
// in want.jobs must be 0.
func (s *swept) expect(what string, want figures) {
	s.t.Helper()
	for _, state := range kind.JobStateNames() {
		if got := s.get("slot_jobs", "state", state); got != want.jobs[state] {
			s.t.Errorf("%s: slot_jobs{state=%q} = %v, want %v", what, state, got, want.jobs[state])
		}
	}
	if got := s.get("slot_workers", "state", "live"); got != want.live {
		s.t.Errorf("%s: slot_workers{state=\"live\"} = %v, want %v", what, got, want.live)
	}
	if got := s.get("slot_workers", "state", "dead"); got != want.dead {
		s.t.Errorf("%s: slot_workers{state=\"dead\"} = %v, want %v", what, got, want.dead)
	}
	if got := s.get("slot_jobs_lost_total"); got != want.lost {
		s.t.Errorf("%s: slot_jobs_lost_total = %v, want %v", what, got, want.lost)
	}
	if s.t.Failed() {
		s.t.FailNow()
	}
}

// age checks that slot_jobs_oldest_seconds{state} is the age of a job
// dated at (Unix ms) at the last sweep's Redis TIME, to the millisecond.
func (s *swept) age(state string, at int64) {
	s.t.Helper()
	got := s.get("slot_jobs_oldest_seconds", "state", state)
	lo, hi := float64(s.before-at)/1000-0.001, float64(s.after-at)/1000+0.001
	if got < lo || got > hi {
		s.t.Errorf("slot_jobs_oldest_seconds{state=%q} = %v, want within [%v, %v]", state, got, lo, hi)
	}
}

// queue is slot_queue_jobs of one queue by state.
func (s *swept) queue(queue, state string) float64 {
	s.t.Helper()
	return s.get("slot_queue_jobs", "queue", queue, "state", state)
}
