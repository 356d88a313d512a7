package web

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	toolkit "github.com/prometheus/exporter-toolkit/web"
	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"

	"github.com/slotexporter/slot_exporter/collector"
	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/redisread"
	"github.com/slotexporter/slot_exporter/internal/redistest"
	"github.com/slotexporter/slot_exporter/internal/release"
	"github.com/slotexporter/slot_exporter/internal/snapshot"
)

// The operators of the tests' web config: bcrypt hashes (cost 4) of
// their passwords.
const (
	alice, alicePass = "alice", "oncall-pass"
	bob, bobPass     = "bob", "other-pass"
	webUsers         = "basic_auth_users:\n" +
		"  alice: $2a$04$CBaxwWTwZ4wFkI1JfirfCO3X3UarfuxXi3tEImMWGJvargkDpQnHi\n" +
		"  bob: $2a$04$b5BaHsdbfa0JGsfP5hKhKexDVO/ntYUZDkOvIzlWxdeSuy0FTlHZm\n"
)

// source is the exporter as the pages see it, over a test sweeper.
type source struct {
	cfg *config.Config
	h   *exportertest.Harness
}

func (s *source) Snapshot() *snapshot.Snapshot  { return s.h.Sweeper.Snapshot() }
func (s *source) Config() *config.Config        { return s.cfg }
func (s *source) Topology() *redisread.Topology { return s.h.Sweeper.Topology() }

type envOptions struct {
	release   bool
	pprof     bool
	liveReads rate.Limit
	liveBurst int
	// noAuth serves without a web config (release off only).
	noAuth bool
}

// env is a real Redis, a sweeper over it, and the pages served through
// exporter-toolkit with basic auth, as main serves them.
type env struct {
	t      *testing.T
	redis  *redistest.Server
	admin  *redis.Client
	cfg    *config.Config
	h      *exportertest.Harness
	rel    *release.Releaser
	audit  string
	webCfg string
	base   string
}

func newEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	rs := exportertest.StartReleaseServer(t, release.ACLRule(exportertest.KindKeyPatterns...))
	cfg, err := config.Parse([]byte(rs.YAML))
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, redis: rs.Server, admin: rs.Admin, cfg: cfg, audit: filepath.Join(rs.Dir, "audit.jsonl")}
	e.h = exportertest.NewFromConfig(t, rs.Admin, cfg)
	if !o.noAuth {
		e.webCfg = filepath.Join(rs.Dir, "web.yml")
		exportertest.WriteFile(t, e.webCfg, webUsers)
	}
	if o.release {
		if err := CheckRelease(e.webCfg, e.audit); err != nil {
			t.Fatal(err)
		}
		e.rel, err = release.New(e.audit, exportertest.Quiet())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(e.rel.Close)
		if err := e.rel.Configure(cfg); err != nil {
			t.Fatal(err)
		}
	}
	// The registry as main builds it, with the releaser's counts.
	src := &source{cfg: cfg, h: e.h}
	copts := collector.Options{}
	if e.rel != nil {
		copts.Releases = e.rel.Counts
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collector.New(src.Snapshot, copts))
	h, err := New(Options{
		Name: "slot_exporter", Description: "test", Version: "test", Logger: exportertest.Quiet(),
		MetricsPath: "/metrics", Metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}),
		Source: src, Ready: e.h.Sweeper.Ready, Reload: func() error { return nil },
		EnablePprof: o.pprof, Releaser: e.rel, WebConfigFile: e.webCfg,
		LiveReads: o.liveReads, LiveBurst: o.liveBurst,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.base = serve(t, h, e.webCfg)
	return e
}

// serve runs handler behind exporter-toolkit, as main does, on a free
// loopback port.
func serve(t *testing.T, h http.Handler, webCfg string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	systemd := false
	addrs := []string{l.Addr().String()}
	done := make(chan error, 1)
	go func() {
		done <- toolkit.Serve(l, srv, &toolkit.FlagConfig{WebConfigFile: &webCfg, WebSystemdSocket: &systemd, WebListenAddresses: &addrs}, exportertest.Quiet())
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("web server: %v", err)
		}
	})
	return "http://" + l.Addr().String()
}

// now is Redis TIME in ms.
func (e *env) now() int64 { return exportertest.RedisTime(e.t, e.admin) }

// do sends a request as user (no credentials when user is "").
func (e *env) do(method, path, user, pass string, form url.Values) (int, http.Header, string) {
	e.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, e.base+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// get is a GET as alice.
func (e *env) get(path string) (int, string) {
	e.t.Helper()
	code, _, body := e.do(http.MethodGet, path, alice, alicePass, nil)
	return code, body
}

// records reads the audit file back.
func (e *env) records() []release.Record { return exportertest.JSONLines[release.Record](e.t, e.audit) }

// formValue pulls a hidden input's value out of a page.
func formValue(page, name string) string {
	marker := `name="` + name + `" value="`
	i := strings.Index(page, marker)
	if i < 0 {
		return ""
	}
	rest := page[i+len(marker):]
	return rest[:strings.IndexByte(rest, '"')]
}

func redisZ(score float64, member string) redis.Z { return redis.Z{Score: score, Member: member} }

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func maps2Equal(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
