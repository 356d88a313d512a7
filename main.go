// Command slot_exporter samples crash-safe per-user limits kept in Redis
// (slot sets) and legacy INCR/DECR counters in the background, and exports
// what it finds to Prometheus: usage, anomalies, and the one shape that
// means a leak, a usage floor that never returns to zero.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/alecthomas/kingpin/v2"
	kitlog "github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web"
	"github.com/prometheus/exporter-toolkit/web/kingpinflag"
	"github.com/redis/go-redis/v9"
	sloggokit "github.com/tjhop/slog-gokit"

	"github.com/slotexporter/slot_exporter/collector"
	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/demo"
	"github.com/slotexporter/slot_exporter/redisconn"
)

const name = "slot_exporter"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the whole program; it returns the exit code. It stops when ctx is
// done.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	app := kingpin.New(name, "Prometheus exporter and leak detector for crash-safe limits kept in Redis.")
	app.UsageWriter(stderr)
	app.ErrorWriter(stderr)
	configGiven := false
	var (
		metricsPath = app.Flag("web.telemetry-path", "Path under which to expose metrics.").Default("/metrics").String()
		configFile  = app.Flag("config.file", "slot_exporter configuration file.").Default("slot_exporter.yml").IsSetByUser(&configGiven).String()
		configCheck = app.Flag("config.check", "Validate the configuration file and exit.").Bool()
		logLevel    = app.Flag("log.level", "Only log messages with the given severity or above. One of: [debug, info, warn, error]").Default("info").Enum("debug", "info", "warn", "error")
		logFormat   = app.Flag("log.format", "Output format of log messages. One of: [logfmt, json]").Default("logfmt").Enum("logfmt", "json")
		demoMode    = app.Flag("demo", "Run against an embedded Redis with simulated traffic (healthy streams, crashes, zombies, leaks). Ignores --config.file unless it is given explicitly.").Bool()
		webFlags    = kingpinflag.AddFlags(app, ":10121")
	)
	app.Version(version.Print(name))
	app.HelpFlag.Short('h')
	if _, err := app.Parse(args); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}

	logger := newLogger(stderr, *logLevel, *logFormat)
	// go-redis logs dial failures on its own; the sweeper already reports
	// them once per sweep, so keep these at debug.
	redis.SetLogger(redisLog{logger})

	if *configCheck {
		cfg, err := config.Load(*configFile)
		if err == nil {
			// The files the connection layer reads, with its errors.
			err = redisconn.Check(&cfg.Redis)
		}
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", *configFile, err)
			return 1
		}
		fmt.Fprintf(stdout, "%s: OK\n", *configFile)
		return 0
	}

	e := &exporter{logger: logger, configFile: *configFile}
	if *demoMode {
		d, err := demo.Start(ctx, logger)
		if err != nil {
			logger.Error("demo failed to start", "err", err)
			return 1
		}
		defer d.Stop()
		if !configGiven {
			e.configFile = ""
			e.inline = d.Config
		}
	}
	if err := e.reload(); err != nil {
		logger.Error("refusing to start", "err", err)
		return 1
	}
	defer e.shutdown()

	logger.Info("starting "+name, "version", version.Info(), "build_context", version.BuildContext())

	reg := prometheus.NewRegistry()
	reg.MustRegister(
		versioncollector.NewCollector("slot_exporter"),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	reg.MustRegister(collector.New(e.snapshot, collector.Options{ReloadOK: e.reloadOK.Load}))

	mux := http.NewServeMux()
	mux.Handle(*metricsPath, promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:            slog.NewLogLogger(logger.Handler(), slog.LevelError),
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: 10,
		Timeout:             10 * time.Second,
	}))
	e.routes(mux)
	if *metricsPath != "/" {
		landing, err := web.NewLandingPage(web.LandingConfig{
			Name:        name,
			Description: "Prometheus exporter and leak detector for crash-safe limits kept in Redis. Sweeps run in the background; a scrape reads the latest snapshot and never touches Redis.",
			Version:     version.Info(),
			Links: []web.LandingLinks{
				{Address: *metricsPath, Text: "Metrics"},
				{Address: "/-/healthy", Text: "Health"},
				{Address: "/-/ready", Text: "Readiness", Description: "ready once every family has been swept successfully"},
			},
		})
		if err != nil {
			logger.Error("landing page", "err", err)
			return 1
		}
		mux.Handle("/", landing)
	}

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				_ = e.reload()
			}
		}
	}()

	// ErrorLog: failed TLS handshakes and the like go through the
	// exporter's logger and its format, not straight to stderr.
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelError)}
	errc := make(chan error, 1)
	go func() { errc <- web.ListenAndServe(srv, webFlags, logger) }()
	select {
	case err := <-errc:
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("web server", "err", err)
			return 1
		}
	case <-ctx.Done():
		logger.Info("shutting down")
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}
	return 0
}

// newLogger builds the go-kit logger and bridges it to slog for
// exporter-toolkit and the rest of the program.
func newLogger(w io.Writer, lvl, format string) *slog.Logger {
	var l kitlog.Logger
	sw := kitlog.NewSyncWriter(w)
	if format == "json" {
		l = kitlog.NewJSONLogger(sw)
	} else {
		l = kitlog.NewLogfmtLogger(sw)
	}
	var level slog.Level
	switch lvl {
	case "debug":
		level = slog.LevelDebug
	case "warn":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	default:
		level = slog.LevelInfo
	}
	return slog.New(sloggokit.NewGoKitHandler(l, level))
}

type redisLog struct{ l *slog.Logger }

func (r redisLog) Printf(ctx context.Context, format string, v ...any) {
	r.l.Debug(fmt.Sprintf(format, v...), "component", "go-redis")
}
