// Package webtest serves the exporter's pages as main serves them (through
// exporter-toolkit, with basic auth) over a real Redis and a test sweeper,
// for the web package's tests and the browser tests, which live in a module
// of their own so that the product's module does not require chromedp.
package webtest

import (
	"context"
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
	"github.com/slotexporter/slot_exporter/internal/redistest"
	"github.com/slotexporter/slot_exporter/internal/release"
	"github.com/slotexporter/slot_exporter/internal/snapshot"
	"github.com/slotexporter/slot_exporter/internal/topology"
	"github.com/slotexporter/slot_exporter/internal/web"
)

// The operators of the tests' web config, Users: bcrypt hashes (cost 4)
// of their passwords.
const (
	Alice, AlicePass = "alice", "oncall-pass"
	Bob, BobPass     = "bob", "other-pass"
	Users            = "basic_auth_users:\n" +
		"  alice: $2a$04$CBaxwWTwZ4wFkI1JfirfCO3X3UarfuxXi3tEImMWGJvargkDpQnHi\n" +
		"  bob: $2a$04$b5BaHsdbfa0JGsfP5hKhKexDVO/ntYUZDkOvIzlWxdeSuy0FTlHZm\n"
)

// source is the exporter as the pages see it, over a test sweeper.
type source struct {
	cfg *config.Config
	h   *exportertest.Harness
}

func (s *source) Snapshot() *snapshot.Snapshot { return s.h.Sweeper.Snapshot() }
func (s *source) Config() *config.Config       { return s.cfg }
func (s *source) Topology() *topology.Topology { return s.h.Sweeper.Topology() }

// Options are what a test varies of the pages.
type Options struct {
	Release   bool
	Pprof     bool
	LiveReads rate.Limit
	LiveBurst int
	// NoAuth serves without a web config (release off only).
	NoAuth bool
}

// Env is a real Redis, a sweeper over it, and the pages served through
// exporter-toolkit with basic auth, as main serves them.
type Env struct {
	T      *testing.T
	Redis  *redistest.Server
	Admin  *redis.Client
	Cfg    *config.Config
	H      *exportertest.Harness
	Rel    *release.Releaser // nil unless Options.Release
	Audit  string            // the release audit file
	WebCfg string            // the web config ("" with Options.NoAuth)
	Base   string            // http://host:port of the pages
}

// New starts Redis and serves the pages over a sweeper of it until the test
// ends.
func New(t *testing.T, o Options) *Env {
	t.Helper()
	rs := exportertest.StartReleaseServer(t, release.ACLRule(exportertest.KindKeyPatterns...))
	cfg, err := config.Parse([]byte(rs.YAML))
	if err != nil {
		t.Fatal(err)
	}
	e := &Env{T: t, Redis: rs.Server, Admin: rs.Admin, Cfg: cfg, Audit: filepath.Join(rs.Dir, "audit.jsonl")}
	e.H = exportertest.NewFromConfig(t, rs.Admin, cfg)
	if !o.NoAuth {
		e.WebCfg = filepath.Join(rs.Dir, "web.yml")
		exportertest.WriteFile(t, e.WebCfg, Users)
	}
	if o.Release {
		if err := web.CheckRelease(e.WebCfg, e.Audit); err != nil {
			t.Fatal(err)
		}
		e.Rel, err = release.New(e.Audit, exportertest.Quiet())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(e.Rel.Close)
		if err := e.Rel.Configure(cfg); err != nil {
			t.Fatal(err)
		}
		e.Rel.SetFirstSeen(e.H.Sweeper.FirstSeen)
	}
	// The registry as main builds it, with the releaser's counts.
	src := &source{cfg: cfg, h: e.H}
	copts := collector.Options{}
	if e.Rel != nil {
		copts.Releases = e.Rel.Counts
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collector.New(src.Snapshot, copts))
	h, err := web.New(web.Options{
		Name: "slot_exporter", Description: "test", Version: "test", Logger: exportertest.Quiet(),
		MetricsPath: "/metrics", Metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}),
		Source: src, Ready: e.H.Sweeper.Ready, Reload: func() error { return nil },
		EnablePprof: o.Pprof, Releaser: e.Rel, WebConfigFile: e.WebCfg,
		LiveReads: o.LiveReads, LiveBurst: o.LiveBurst, FirstSeen: e.H.Sweeper.FirstSeen,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.Base = Serve(t, h, e.WebCfg)
	return e
}

// Serve runs h behind exporter-toolkit, as main does, on a free
// loopback port.
func Serve(t *testing.T, h http.Handler, webCfg string) string {
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

// Now is Redis TIME in ms.
func (e *Env) Now() int64 { return exportertest.RedisTime(e.T, e.Admin) }

// Do sends a request as user (no credentials when user is "").
func (e *Env) Do(method, path, user, pass string, form url.Values) (int, http.Header, string) {
	e.T.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, e.Base+path, body)
	if err != nil {
		e.T.Fatal(err)
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
		e.T.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// Get is a GET as Alice.
func (e *Env) Get(path string) (int, string) {
	e.T.Helper()
	code, _, body := e.Do(http.MethodGet, path, Alice, AlicePass, nil)
	return code, body
}

// Records reads the audit file back.
func (e *Env) Records() []release.Record { return exportertest.JSONLines[release.Record](e.T, e.Audit) }

// SeedLeaky writes a user whose slots leak: expired, stale and future
// members beside a live one, in the hash-tag key the simulator writes.
func (e *Env) SeedLeaky(user string) (key string) {
	e.T.Helper()
	now := e.Now()
	key = "joishi:streams:{" + user + "}"
	// ttl 120s, heartbeat 20s, stale_after 40s; scores are expiries,
	// every one well away from a state's edge.
	e.Admin.ZAdd(context.Background(), key,
		redis.Z{Score: float64(now - 60_000), Member: "crashed-1"},
		redis.Z{Score: float64(now + 50_000), Member: "stale-1"},
		redis.Z{Score: float64(now + 55_000), Member: "stale-2"},
		redis.Z{Score: float64(now + 110_000), Member: "live-1"},
		redis.Z{Score: float64(now) * 1000, Member: "future-1"},
	)
	return key
}

// FormValue pulls a hidden input's value out of a page.
func FormValue(page, name string) string {
	marker := `name="` + name + `" value="`
	i := strings.Index(page, marker)
	if i < 0 {
		return ""
	}
	rest := page[i+len(marker):]
	return rest[:strings.IndexByte(rest, '"')]
}
