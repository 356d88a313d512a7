package main

import (
	"log/slog"
	"net/http"
	"regexp"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// newGoCollector is the Go runtime's metrics plus go_gc_heap_live_bytes:
// the heap the last collection kept. The memstats gauges swing with the
// garbage between collections (up to half the live heap at the GOGC of
// internal/gctarget); the live heap is what a memory limit and GOMEMLIMIT
// are sized from, and what BENCH.md's outside measurement reads.
func newGoCollector() prometheus.Collector {
	return collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(
		collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/gc/heap/live:bytes$`)}))
}

// metricsHandler serves the registry with at most maxInFlight scrapes at
// once (0: no limit). Refused scrapes get 503; they are counted in
// promhttp_metric_handler_requests_total{code="503"} and logged: the first
// at once, the rest at most once every refusalLogEvery with the number
// refused since, so that a scrape storm is seen without flooding the log.
func metricsHandler(reg *prometheus.Registry, maxInFlight int, logger *slog.Logger) http.Handler {
	h := promhttp.InstrumentMetricHandler(reg, promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:            slog.NewLogLogger(logger.Handler(), slog.LevelError),
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: maxInFlight,
		Timeout:             10 * time.Second,
	}))
	rl := &refusalLog{logger: logger, limit: maxInFlight, every: refusalLogEvery}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
		h.ServeHTTP(sw, r)
		if sw.status == http.StatusServiceUnavailable {
			rl.refused()
		}
	})
}

const refusalLogEvery = 10 * time.Second

type refusalLog struct {
	logger *slog.Logger
	limit  int
	every  time.Duration
	mu     sync.Mutex
	last   time.Time
	since  int
	// due: a line for the refusals since the last is due at the end of
	// its window. Logged only with the next refusal, a burst's count
	// came with the next burst, or never (120 parallel scrapes logged
	// refused=1 of 51).
	due bool
}

func (l *refusalLog) refused() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.since++
	if l.due {
		return
	}
	if wait := l.every - time.Since(l.last); wait > 0 {
		l.due = true
		time.AfterFunc(wait, l.flush)
		return
	}
	l.log()
}

// flush logs the refusals of the window that ended.
func (l *refusalLog) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.due = false
	if l.since > 0 {
		l.log()
	}
}

// log writes one line for the refusals since the last. Called with mu.
func (l *refusalLog) log() {
	l.logger.Warn("scrapes refused: too many in flight; raise --web.max-requests or scrape less often",
		"limit", l.limit, "refused", l.since)
	l.last, l.since = time.Now(), 0
}

// statusWriter remembers the status code written.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}
