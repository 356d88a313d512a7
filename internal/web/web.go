// Package web is the exporter's HTTP side besides /metrics: the landing
// page, the health, readiness and reload endpoints, pprof behind its flag,
// and the on-call pages: /leaks (from the latest snapshot),
// /leaks/{family}/{user} (one user read live, read-only, rate-limited),
// and, when release is on, the release preview and action.
//
// The pages are server-rendered html/template: no script, usable without
// JavaScript, with the landing page's look, readable on a phone.
package web

import (
	"fmt"
	"html"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"time"

	toolkit "github.com/prometheus/exporter-toolkit/web"
	"golang.org/x/time/rate"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/kind"
	"github.com/slotexporter/slot_exporter/internal/release"
	"github.com/slotexporter/slot_exporter/internal/snapshot"
	"github.com/slotexporter/slot_exporter/internal/topology"
)

// Source is the running exporter as the pages see it; each call returns
// the current value (a reload swaps them).
type Source interface {
	Snapshot() *snapshot.Snapshot
	Config() *config.Config
	// Topology reaches Redis with the sampling client: read-only.
	Topology() *topology.Topology
}

// Options configure the handler.
type Options struct {
	Name        string
	Description string
	Version     string
	Logger      *slog.Logger

	MetricsPath string
	Metrics     http.Handler

	Source Source
	// Ready reports readiness; Reload reloads the config.
	Ready  func() bool
	Reload func() error

	// EnablePprof serves /debug/pprof/ and links it from the landing page.
	EnablePprof bool
	// Releaser, when not nil, turns release on; WebConfigFile is then the
	// web config file with the operators (see CheckRelease).
	Releaser      *release.Releaser
	WebConfigFile string
	// LoginHint, when set, is said on the landing page: how to log in
	// where the exporter made the login itself (the demo).
	LoginHint string
	// FirstSeen supplies first-seen times to the user page; nil: not
	// tracked.
	FirstSeen release.FirstSeenFunc
	// Queue supplies a queue framework's queue, from the latest sweep, to
	// the user page of its families; nil: none.
	Queue func(family, queue string) (kind.QueueView, bool)

	// LiveReads bounds the live reads of the user and preview pages
	// (per second, with a burst); 0 takes the defaults.
	LiveReads rate.Limit
	LiveBurst int
}

// Live-read limits: enough for a person clicking around, far from enough
// to load Redis.
const (
	DefaultLiveReads = 5
	DefaultLiveBurst = 10
	liveReadTimeout  = 5 * time.Second
)

// Handler serves every page.
type Handler struct {
	o       Options
	mux     *http.ServeMux
	limiter *rate.Limiter
	plans   *planStore
}

// New builds the handler.
func New(o Options) (*Handler, error) {
	if o.Logger == nil {
		return nil, fmt.Errorf("web: no logger")
	}
	if o.LiveReads <= 0 {
		o.LiveReads = DefaultLiveReads
	}
	if o.LiveBurst <= 0 {
		o.LiveBurst = DefaultLiveBurst
	}
	h := &Handler{o: o, mux: http.NewServeMux(), limiter: rate.NewLimiter(o.LiveReads, o.LiveBurst)}
	if o.Releaser != nil {
		p, err := newPlanStore()
		if err != nil {
			return nil, err
		}
		h.plans = p
	}
	if o.Metrics != nil && o.MetricsPath != "" {
		h.mux.Handle(o.MetricsPath, o.Metrics)
	}
	h.mux.HandleFunc("/-/healthy", methods(h.healthy, http.MethodGet, http.MethodHead))
	h.mux.HandleFunc("/-/ready", methods(h.ready, http.MethodGet, http.MethodHead))
	h.mux.HandleFunc("/-/reload", methods(h.reload, http.MethodPost, http.MethodPut))
	h.mux.HandleFunc("/leaks", methods(h.leaks, http.MethodGet, http.MethodHead))
	h.mux.HandleFunc("/leaks/{family}/{$}", methods(h.lookup, http.MethodGet, http.MethodHead))
	h.mux.HandleFunc("/leaks/{family}/{user}", methods(h.user, http.MethodGet, http.MethodHead))
	if o.Releaser != nil {
		h.mux.HandleFunc("/leaks/{family}/{user}/preview", methods(h.preview, http.MethodGet))
		h.mux.HandleFunc("/leaks/{family}/{user}/release", methods(h.release, http.MethodPost))
	}
	if o.EnablePprof {
		h.mux.HandleFunc("/debug/pprof/", pprof.Index)
		h.mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		h.mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		h.mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		h.mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	if o.MetricsPath != "/" {
		landing, err := h.landing()
		if err != nil {
			return nil, err
		}
		h.mux.Handle("/", landing)
	}
	return h, nil
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

func (h *Handler) landing() (http.Handler, error) {
	links := []toolkit.LandingLinks{
		{Address: h.o.MetricsPath, Text: "Metrics"},
		{Address: "/leaks", Text: "Leaks", Description: "the on-call page: per family, the users with anomalies or a usage floor, and each user's slots read live"},
		{Address: "/-/healthy", Text: "Health"},
		{Address: "/-/ready", Text: "Readiness", Description: "ready once every family has been swept successfully"},
	}
	profiling := "false"
	if h.o.EnablePprof {
		profiling = "true"
		links = append(links, toolkit.LandingLinks{Address: "/debug/pprof/", Text: "Profiling", Description: "Go runtime profiles (--web.enable-pprof)"})
	}
	extra := ""
	if h.o.LoginHint != "" {
		extra = `<p class="login-hint">` + html.EscapeString(h.o.LoginHint) + `</p>`
	}
	return toolkit.NewLandingPage(toolkit.LandingConfig{
		Name:        h.o.Name,
		Description: h.o.Description,
		Version:     h.o.Version,
		Links:       links,
		Profiling:   profiling,
		ExtraHTML:   extra,
	})
}

// methods answers 405 with an Allow header to any other method. The mux
// cannot do it alone: the landing page's "/" matches every path and method.
func methods(f http.HandlerFunc, allowed ...string) http.HandlerFunc {
	allow := ""
	for i, m := range allowed {
		if i > 0 {
			allow += ", "
		}
		allow += m
	}
	return func(w http.ResponseWriter, r *http.Request) {
		for _, m := range allowed {
			if r.Method == m {
				f(w, r)
				return
			}
		}
		w.Header().Set("Allow", allow)
		http.Error(w, "method not allowed: use "+allow, http.StatusMethodNotAllowed)
	}
}

func (h *Handler) healthy(w http.ResponseWriter, _ *http.Request) {
	fmt.Fprintln(w, "Healthy")
}

func (h *Handler) ready(w http.ResponseWriter, _ *http.Request) {
	if h.o.Ready == nil || !h.o.Ready() {
		http.Error(w, "not ready: the first sweep has not finished", http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "Ready")
}

func (h *Handler) reload(w http.ResponseWriter, _ *http.Request) {
	if h.o.Reload == nil {
		http.Error(w, "reload is not available", http.StatusNotImplemented)
		return
	}
	if err := h.o.Reload(); err != nil {
		// The request was fine; the file is not. 4xx, not 5xx: the
		// exporter itself is healthy and still serving the old config.
		http.Error(w, "config reload refused: "+err.Error(), http.StatusBadRequest)
		return
	}
	fmt.Fprintln(w, "Reloaded")
}
