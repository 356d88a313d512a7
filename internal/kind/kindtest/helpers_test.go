package kindtest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
)

// header is the config every scenario shares: short timings, so that a
// scenario takes seconds of real time (Redis TIME is the clock).
const header = `
redis:
  addr: %q
sampling:
  interval: 500ms
  timeout: 5s
  window: 1s
leaks:
  floor_window: %s
  per_user_series: %d
families:
`

func config(addr, floorWindow string, perUser int, families string) string {
	return fmt.Sprintf(header, addr, floorWindow, perUser) + families
}

// steps drives sweeps at fixed offsets from its start and remembers,
// for each sweep, Redis TIME read just before and just after it: the
// sweep's own TIME lies between the two, which bounds every age the
// exporter computes from it.
type steps struct {
	t      *testing.T
	rc     redis.Cmdable
	hs     []*exportertest.Harness
	start  time.Time
	before []int64 // ms
	after  []int64
}

func newSteps(t *testing.T, rc redis.Cmdable, hs ...*exportertest.Harness) *steps {
	return &steps{t: t, rc: rc, hs: hs, start: time.Now()}
}

// at waits until d after the start.
func (s *steps) at(d time.Duration) { time.Sleep(time.Until(s.start.Add(d))) }

// sweep sweeps every harness once and returns the sweep's index.
func (s *steps) sweep() int {
	s.t.Helper()
	s.before = append(s.before, exportertest.RedisTime(s.t, s.rc))
	for _, h := range s.hs {
		h.Sweep()
	}
	s.after = append(s.after, exportertest.RedisTime(s.t, s.rc))
	return len(s.before) - 1
}

// age checks that got[name] is the time from sweep `from` to sweep `to`
// in seconds, as exactly as the brackets allow (to the millisecond).
func (s *steps) age(got map[string]float64, name string, from, to int) {
	s.t.Helper()
	s.within(got, name, float64(s.before[to]-s.after[from])/1000, float64(s.after[to]-s.before[from])/1000)
}

// since checks that got[name] is the time from Redis time ms to sweep to.
func (s *steps) since(got map[string]float64, name string, ms int64, to int) {
	s.t.Helper()
	s.within(got, name, float64(s.before[to]-ms)/1000, float64(s.after[to]-ms)/1000)
}

func (s *steps) within(got map[string]float64, name string, lo, hi float64) {
	s.t.Helper()
	v, ok := got[name]
	switch {
	case !ok:
		s.t.Errorf("%s: missing, want within [%.3f, %.3f]", name, lo, hi)
	case v < lo || v > hi:
		s.t.Errorf("%s = %v, want within [%.3f, %.3f]", name, v, lo, hi)
	}
}

// users lists the users with a series of metric in family.
func users(got map[string]float64, metric, family string) map[string]bool {
	out := map[string]bool{}
	prefix := fmt.Sprintf(`%s{family=%q,`, metric, family)
	for k := range exportertest.Series(got, metric) {
		rest, ok := strings.CutPrefix(k, prefix)
		var u string
		if _, err := fmt.Sscanf(rest, "user=%q", &u); ok && err == nil {
			out[u] = true
		}
	}
	return out
}

// sameSet fails unless got holds exactly want.
func sameSet(t testing.TB, what string, got map[string]bool, want ...string) {
	t.Helper()
	ok := len(got) == len(want)
	for _, w := range want {
		ok = ok && got[w]
	}
	if !ok {
		t.Errorf("%s: got %v, want exactly %v", what, got, want)
	}
}

// absent fails if any of names is in got.
func absent(t testing.TB, got map[string]float64, names ...string) {
	t.Helper()
	for _, n := range names {
		if v, ok := got[n]; ok {
			t.Errorf("%s = %v, want no such series", n, v)
		}
	}
}

// excerpt is the /metrics text of family's series, as a scrape shows
// them (HELP and TYPE lines left out), for the test log.
func excerpt(t testing.TB, h *exportertest.Harness, family string) string {
	t.Helper()
	mfs, err := h.Registry.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	var b strings.Builder
	for _, mf := range mfs {
		var keep []*dto.Metric
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "family" && l.GetValue() == family {
					keep = append(keep, m)
				}
			}
		}
		if len(keep) == 0 {
			continue
		}
		one := &dto.MetricFamily{Name: mf.Name, Help: mf.Help, Type: mf.Type, Metric: keep}
		var text strings.Builder
		if _, err := expfmt.MetricFamilyToText(&text, one); err != nil {
			t.Fatalf("text format: %v", err)
		}
		for _, line := range strings.Split(text.String(), "\n") {
			if line != "" && !strings.HasPrefix(line, "#") {
				b.WriteString(line + "\n")
			}
		}
	}
	return b.String()
}
