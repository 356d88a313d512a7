package libraries_test

// The harness: the exporter binary run as a black box on an example config,
// the library drivers as child processes that print their ground truth, and
// /metrics parsed with expfmt.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/redisproc"
	"github.com/slotexporter/slot_exporter/internal/redistest"
)

// sweepInterval is the exporter's sampling interval in these tests: short,
// so that a few seconds of library time give several sweeps.
const sweepInterval = 500 * time.Millisecond

var built struct {
	once               sync.Once
	dir                string
	exporter, riaDrive string
	err                error
}

var nodeSetup struct {
	once sync.Once
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root %s: %v", root, err)
	}
	return root
}

// binaries builds slot_exporter (from the module root, as a user would)
// and ria-drive once per test run. SLOT_EXPORTER_BIN points at an already
// built exporter instead.
func binaries(t *testing.T) (exporter, riaDrive string) {
	t.Helper()
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "slot-exporter-libraries-")
		if built.err != nil {
			return
		}
		pkgs := []string{"./examples/libraries/ria-drive"}
		built.exporter = os.Getenv("SLOT_EXPORTER_BIN")
		if built.exporter == "" {
			pkgs = append(pkgs, ".")
		}
		bins, err := redisproc.BuildBinaries(context.Background(), built.dir, pkgs...)
		if err != nil {
			built.err = err
			return
		}
		built.riaDrive = bins[0]
		if len(bins) > 1 {
			built.exporter = bins[1]
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.exporter, built.riaDrive
}

// nodeDriver returns the command line that runs node/drive.js, after
// installing its locked dependencies. Missing node or npm is a failure,
// never a skip: CI installs them.
func nodeDriver(t *testing.T) []string {
	t.Helper()
	root := repoRoot(t)
	nodeSetup.once.Do(func() {
		for _, tool := range []string{"node", "npm"} {
			if _, err := exec.LookPath(tool); err != nil {
				nodeSetup.err = fmt.Errorf("%s not found on PATH: the library tests drive the real npm libraries and need Node.js 18+ with npm (Debian: apt-get install -y nodejs npm); scripts/install-node-deps.sh installs the packages", tool)
				return
			}
		}
		cmd := exec.Command("bash", filepath.Join(root, "scripts", "install-node-deps.sh"))
		if out, err := cmd.CombinedOutput(); err != nil {
			nodeSetup.err = fmt.Errorf("scripts/install-node-deps.sh: %v\n%s", err, out)
		}
	})
	if nodeSetup.err != nil {
		t.Fatal(nodeSetup.err)
	}
	return []string{"node", filepath.Join(root, "examples", "libraries", "node", "drive.js")}
}

// tail is the end of a child's output, for a failure message.
func tail(b *exportertest.Buffer) string {
	s := b.String()
	if len(s) > 6000 {
		s = "...\n" + s[len(s)-6000:]
	}
	return s
}

// ---- the exporter -------------------------------------------------------

type exporter struct {
	t       *testing.T
	example string
	url     string
	cmd     *exec.Cmd
	log     *exportertest.Buffer
	done    chan struct{}
	started time.Time

	mu         sync.Mutex
	invariants []invariant
}

type invariant struct {
	what  string
	check func(metrics) error
	seen  bool // reported once
}

// overrides replaces fields of named families of the example; each field
// must already be set in the example, so the test runs the example's own
// shape (match, user, kind, score mode, unit) with shorter durations.
type overrides map[string]map[string]any

// startExporter runs slot_exporter on the example config with redis.addr
// pointed at the test's server, sampling every sweepInterval.
func startExporter(t *testing.T, example, redisAddr string, ov overrides) *exporter {
	t.Helper()
	bin, _ := binaries(t)
	raw, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatalf("%s: %v", example, err)
	}
	cfg["redis"] = map[string]any{"addr": redisAddr}
	sampling, _ := cfg["sampling"].(map[string]any)
	if sampling == nil {
		sampling = map[string]any{}
	}
	sampling["interval"] = sweepInterval.String()
	sampling["window"] = "2s"
	sampling["timeout"] = "5s"
	cfg["sampling"] = sampling
	fams, _ := cfg["families"].([]any)
	done := map[string]bool{}
	for _, f := range fams {
		fam := f.(map[string]any)
		name, _ := fam["name"].(string)
		for k, v := range ov[name] {
			if _, ok := fam[k]; !ok {
				t.Fatalf("%s: family %s sets no %s; the test overrides only what the example sets", example, name, k)
			}
			fam[k] = v
		}
		done[name] = true
	}
	for name := range ov {
		if !done[name] {
			t.Fatalf("%s has no family %q", example, name)
		}
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, filepath.Base(example))
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", redistest.FreePort(t))
	e := &exporter{t: t, example: filepath.Base(example), url: "http://" + addr, log: &exportertest.Buffer{}, done: make(chan struct{}), started: time.Now()}
	e.cmd = exec.Command(bin, "--config.file="+path, "--web.listen-address="+addr, "--log.level=debug")
	e.cmd.Stdout, e.cmd.Stderr = e.log, e.log
	if err := e.cmd.Start(); err != nil {
		t.Fatalf("start slot_exporter: %v", err)
	}
	go func() { _ = e.cmd.Wait(); close(e.done) }()
	t.Cleanup(func() {
		_ = e.cmd.Process.Kill()
		<-e.done
		if t.Failed() {
			t.Logf("slot_exporter (%s) log:\n%s", e.example, tail(e.log))
		}
	})
	deadline := time.Now().Add(3 * time.Minute)
	for {
		select {
		case <-e.done:
			t.Fatalf("slot_exporter exited on %s (config as run:\n%s)\n%s", e.example, out, tail(e.log))
		default:
		}
		if resp, err := http.Get(e.url + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return e
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("slot_exporter on %s not ready in 15s:\n%s", e.example, tail(e.log))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// always registers a check that every later scrape must pass, until the
// returned stop is called.
func (e *exporter) always(what string, check func(metrics) error) (stop func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.invariants = append(e.invariants, invariant{what: what, check: check})
	i := len(e.invariants) - 1
	return func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.invariants[i].check = func(metrics) error { return nil }
	}
}

func (e *exporter) scrape() (metrics, error) {
	select {
	case <-e.done:
		return nil, errors.New("slot_exporter has exited")
	default:
	}
	resp, err := http.Get(e.url + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	m, err := parseMetrics(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parse /metrics: %w", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := range e.invariants {
		inv := &e.invariants[i]
		if err := inv.check(m); err != nil && !inv.seen {
			inv.seen = true
			e.t.Errorf("%s: broken at %s: %v", inv.what, time.Now().Format("15:04:05.000"), err)
		}
	}
	return m, nil
}

// current is one scrape, which must succeed.
func (e *exporter) current() metrics {
	e.t.Helper()
	m, err := e.scrape()
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

// waitFor scrapes until cond holds, and fails the test with the last
// reason otherwise. It returns the scrape that satisfied cond. Each scrape
// also goes to observe, if given, so a caller can collect what it saw on
// the way (a state that shows for only a few sweeps). timeout is what the
// state needs on a quiet machine; like exportertest.WaitFor, the wait lasts
// at least exportertest.HangAfter, since the deadline only ends a hung test.
func (e *exporter) waitFor(timeout time.Duration, what string, cond func(metrics) error, observe ...func(metrics)) metrics {
	e.t.Helper()
	m, _ := e.wait(timeout, nil, what, cond, observe...)
	return m
}

// waitUnless is waitFor for a state that lasts only until void holds: it
// returns the scrape that satisfied cond, or, once void holds first
// (checked after each scrape that did not satisfy cond), what cond said
// last.
func (e *exporter) waitUnless(void func() bool, what string, cond func(metrics) error) (metrics, error) {
	e.t.Helper()
	return e.wait(0, void, what, cond)
}

// wait is waitFor and waitUnless: void nil never holds.
func (e *exporter) wait(timeout time.Duration, void func() bool, what string, cond func(metrics) error, observe ...func(metrics)) (metrics, error) {
	e.t.Helper()
	timeout = max(timeout, exportertest.HangAfter)
	deadline := time.Now().Add(timeout)
	var last error
	for {
		m, err := e.scrape()
		if err == nil {
			for _, o := range observe {
				o(m)
			}
			if err = cond(m); err == nil {
				return m, nil
			}
		}
		last = err
		if void != nil && void() {
			return nil, fmt.Errorf("%s: %w", what, last)
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: not within %v: %v", what, timeout, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// holdsFor checks cond on every scrape for d: a steady state, not a
// passing one.
func (e *exporter) holdsFor(d time.Duration, what string, cond func(metrics) error) {
	e.t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		m, err := e.scrape()
		if err == nil {
			err = cond(m)
		}
		if err != nil {
			e.t.Fatalf("%s: broken after %v of %v: %v", what, d-time.Until(end), d, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// sweptAfter waits until the family's last sweep ended after two full
// sweep intervals from now, so the next scrape reflects what is in Redis now.
func (e *exporter) sweptAfter(family string) metrics {
	e.t.Helper()
	since := float64(time.Now().Add(2*sweepInterval).UnixNano()) / 1e9
	return e.waitFor(10*time.Second, "a fresh sweep of "+family, func(m metrics) error {
		v, ok := m.get("slot_exporter_last_sweep_timestamp_seconds", "family", family)
		if !ok || v < since {
			return fmt.Errorf("last sweep at %.3f, want after %.3f", v, since)
		}
		return nil
	})
}

// ---- /metrics ----------------------------------------------------------

// metrics is one scrape: the samples of each metric name, histograms
// expanded into their _bucket, _sum and _count series.
type metrics map[string][]*model.Sample

func parseMetrics(r io.Reader) (metrics, error) {
	dec := &expfmt.SampleDecoder{
		Dec:  expfmt.NewDecoder(r, expfmt.NewFormat(expfmt.TypeTextPlain)),
		Opts: &expfmt.DecodeOptions{Timestamp: model.Now()},
	}
	m := metrics{}
	for {
		var v model.Vector
		if err := dec.Decode(&v); err != nil {
			if errors.Is(err, io.EOF) {
				return m, nil
			}
			return nil, err
		}
		for _, s := range v {
			name := string(s.Metric[model.MetricNameLabel])
			m[name] = append(m[name], s)
		}
	}
}

// get sums the samples of name whose labels include all the given pairs;
// ok is false when none has them.
func (ms metrics) get(name string, labels ...string) (float64, bool) {
	var sum float64
	found := false
outer:
	for _, s := range ms[name] {
		for i := 0; i+1 < len(labels); i += 2 {
			if string(s.Metric[model.LabelName(labels[i])]) != labels[i+1] {
				continue outer
			}
		}
		sum += float64(s.Value)
		found = true
	}
	return sum, found
}

// val is get with absent read as 0: a counter or gauge not yet emitted.
func (ms metrics) val(name string, labels ...string) float64 {
	v, _ := ms.get(name, labels...)
	return v
}

// states is slot_members by state for a family.
func (ms metrics) states(family string) map[string]float64 {
	out := map[string]float64{}
	for _, s := range []string{"live", "stale", "expired", "zombie", "future"} {
		out[s] = ms.val("slot_members", "family", family, "state", s)
	}
	return out
}

// want is one expected figure: a metric with labels and a value.
type want struct {
	name   string
	labels []string
	value  float64
}

func w(name string, value float64, labels ...string) want {
	return want{name: name, labels: labels, value: value}
}

// expect returns a condition that every figure is present and matches:
// a figure the exporter does not emit is a failure, not a 0.
func expect(family string, wants ...want) func(metrics) error {
	return func(m metrics) error {
		var bad []string
		for _, x := range wants {
			labels := append([]string{"family", family}, x.labels...)
			got, ok := m.get(x.name, labels...)
			switch {
			case !ok:
				bad = append(bad, fmt.Sprintf("%s%v absent, want %v", x.name, x.labels, x.value))
			case got != x.value:
				bad = append(bad, fmt.Sprintf("%s%v = %v, want %v", x.name, x.labels, got, x.value))
			}
		}
		if len(bad) > 0 {
			sort.Strings(bad)
			return fmt.Errorf("%s (members %v)", strings.Join(bad, "; "), m.states(family))
		}
		return nil
	}
}

// ---- the drivers ---------------------------------------------------------

type event map[string]any

func (e event) str(k string) string {
	s, _ := e[k].(string)
	return s
}

func (e event) num(k string) float64 {
	f, _ := e[k].(float64)
	return f
}

func (e event) strs(k string) []string {
	var out []string
	l, _ := e[k].([]any)
	for _, v := range l {
		if s, ok := v.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// holder is one driver process holding slots through a library.
type holder struct {
	t        *testing.T
	name     string
	cmd      *exec.Cmd
	stdin    io.WriteCloser
	events   chan event
	stderr   *exportertest.Buffer
	done     chan struct{}
	truth    event
	acquired time.Time
	ended    time.Time
	// When the library refreshed (any holder of the process), from its
	// "refresh" events.
	mu           sync.Mutex
	refreshTimes []time.Time
}

// refreshesSince counts the refreshes made after t.
func (h *holder) refreshesSince(t time.Time) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, r := range h.refreshTimes {
		if r.After(t) {
			n++
		}
	}
	return n
}

func startHolder(t *testing.T, name string, argv ...string) *holder {
	t.Helper()
	h := &holder{t: t, name: name, events: make(chan event, 16), stderr: &exportertest.Buffer{}, done: make(chan struct{})}
	h.cmd = exec.Command(argv[0], argv[1:]...)
	h.cmd.Stderr = h.stderr
	var err error
	if h.stdin, err = h.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := h.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.cmd.Start(); err != nil {
		t.Fatalf("%s: start %s: %v", name, argv[0], err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var ev event
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				fmt.Fprintf(h.stderr, "not JSON on stdout: %q\n", sc.Text())
				continue
			}
			if ev.str("event") == "refresh" {
				h.mu.Lock()
				h.refreshTimes = append(h.refreshTimes, time.Now())
				h.mu.Unlock()
				continue
			}
			h.events <- ev
		}
		_ = h.cmd.Wait()
		close(h.done)
	}()
	t.Cleanup(func() {
		_ = h.cmd.Process.Kill()
		<-h.done
	})
	h.truth = h.wait("acquired", 15*time.Second)
	h.acquired = time.Now()
	t.Logf("%s: %s holds %v on %s (%v)", name, h.truth.str("library"), h.truth.strs("holders"), h.truth.str("key"), h.truth.str("role"))
	return h
}

// wait returns the next event called name, failing on any other end.
func (h *holder) wait(name string, timeout time.Duration) event {
	h.t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case ev := <-h.events:
			if ev.str("event") == name {
				return ev
			}
			if ev.str("event") == "lost" {
				h.t.Fatalf("%s: the library lost its hold: %v", h.name, ev)
			}
		case <-h.done:
			// The reader closes done after it has queued every event,
			// and select picks among ready cases at random: what the
			// driver said before it exited is still queued.
			for {
				select {
				case ev := <-h.events:
					if ev.str("event") == name {
						return ev
					}
					continue
				default:
				}
				break
			}
			h.t.Fatalf("%s: driver exited (%v) before %q:\n%s", h.name, h.cmd.ProcessState, name, tail(h.stderr))
		case <-timer.C:
			h.t.Fatalf("%s: no %q in %v:\n%s", h.name, name, timeout, tail(h.stderr))
		}
	}
}

// release asks the library to release, and waits for the driver to exit.
func (h *holder) release() {
	h.t.Helper()
	if _, err := io.WriteString(h.stdin, "release\n"); err != nil {
		h.t.Fatalf("%s: %v", h.name, err)
	}
	h.wait("released", 10*time.Second)
	<-h.done
	h.ended = time.Now()
	if !h.cmd.ProcessState.Success() {
		h.t.Fatalf("%s: driver exited %v:\n%s", h.name, h.cmd.ProcessState, tail(h.stderr))
	}
}

// kill is the holder dying mid-hold: SIGKILL, no release, no finally.
func (h *holder) kill() {
	h.t.Helper()
	if err := h.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		h.t.Fatalf("%s: SIGKILL: %v", h.name, err)
	}
	<-h.done
	h.ended = time.Now()
}

// runOnce runs a one-shot driver command and returns its single event.
func runOnce(argv ...string) (event, error) {
	ctx, cancel := context.WithTimeout(context.Background(), exportertest.HangAfter)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s: %v\n%s", strings.Join(argv, " "), err, stderr.String())
	}
	var ev event
	if err := json.Unmarshal(bytes.TrimSpace(out), &ev); err != nil {
		return nil, fmt.Errorf("%s: %v in %q", strings.Join(argv, " "), err, out)
	}
	return ev, nil
}

func itoa(n int) string { return strconv.Itoa(n) }

// heartbeatBounds is the range of heartbeats the exporter can have
// inferred from the refreshes the holders made while it ran: each refresh
// it saw is one; a refresh before its first sweep of a member is not seen,
// nor a holder's last when the holder ended before the next sweep.
func heartbeatBounds(e *exporter, hs ...*holder) (lo, hi float64) {
	for _, h := range hs {
		holders := float64(len(h.truth.strs("holders")))
		hi += float64(h.refreshesSince(e.started))
		lo += max(0, float64(h.refreshesSince(e.started.Add(2*sweepInterval)))-holders)
	}
	return lo, hi
}

func refreshSummary(e *exporter, hs ...*holder) string {
	var parts []string
	for _, h := range hs {
		parts = append(parts, fmt.Sprintf("%s: %d refreshes while the exporter ran", h.name, h.refreshesSince(e.started)))
	}
	return strings.Join(parts, ", ")
}
