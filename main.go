// Command slot_exporter samples crash-safe per-user limits kept in Redis
// (slot sets) and legacy INCR/DECR counters in the background, and exports
// what it finds to Prometheus: usage, anomalies, and the one shape that
// means a leak, a usage floor that never returns to zero.
package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/alecthomas/kingpin/v2"
	kitlog "github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/common/version"
	toolkit "github.com/prometheus/exporter-toolkit/web"
	"github.com/prometheus/exporter-toolkit/web/kingpinflag"
	"github.com/redis/go-redis/v9"
	sloggokit "github.com/tjhop/slog-gokit"

	"github.com/slotexporter/slot_exporter/collector"
	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/buildinfo"
	"github.com/slotexporter/slot_exporter/internal/demo"
	"github.com/slotexporter/slot_exporter/internal/gctarget"
	"github.com/slotexporter/slot_exporter/internal/release"
	"github.com/slotexporter/slot_exporter/internal/web"
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
	gogc := gctarget.Apply()
	memLimit := gctarget.ApplyMemoryLimit()
	app := kingpin.New(name, "Prometheus exporter and leak detector for crash-safe limits kept in Redis.")
	// --help and --version answer on stdout, as node_exporter's do, so
	// that `slot_exporter --help | grep` works; errors stay on stderr.
	app.UsageWriter(stdout)
	app.ErrorWriter(stderr)
	exited, exitCode := false, 0
	app.Terminate(func(code int) { exited, exitCode = true, code })
	configGiven, shardGiven := false, false
	// The exporter is the default command: no command runs it as before.
	serveCmd := app.Command("serve", "Run the exporter (the default). `slot_exporter help serve` lists its flags, with --family among them.").Default()
	var (
		metricsPath = app.Flag("web.telemetry-path", "Path under which to expose metrics.").Default("/metrics").String()
		configFile  = app.Flag("config.file", "slot_exporter configuration file (also "+configEnv+"). Without one, REDIS_ADDR and --family are the whole configuration.").Default(defaultConfigFile).IsSetByUser(&configGiven).String()
		families    = serveCmd.Flag("family", "A family to watch, name=kind:pattern[,field=value...] (repeatable), e.g. 'streams=slotset:joishi:streams:*,limit=3'; replaces the config file's families. Kinds get the defaults the README lists.").PlaceHolder("NAME=KIND:PATTERN").Strings()
		configCheck = app.Flag("config.check", "Validate the configuration file and exit.").Bool()
		shard       = app.Flag("sampling.shard", "Overrides sampling.shard of the config file, at start and at every reload, so that n replicas can share one file; each reads only the keys whose cluster hash slot s has s % n == i.").PlaceHolder("i/n").IsSetByUser(&shardGiven).String()
		logLevel    = app.Flag("log.level", "Only log messages with the given severity or above. One of: [debug, info, warn, error]").Default("info").Enum("debug", "info", "warn", "error")
		logFormat   = app.Flag("log.format", "Output format of log messages. One of: [logfmt, json]").Default("logfmt").Enum("logfmt", "json")
		demoMode    = app.Flag("demo", "Run against an embedded Redis with simulated traffic (healthy streams, crashes, zombies, leaks). Ignores --config.file unless it is given explicitly.").Bool()
		enablePprof = app.Flag("web.enable-pprof", "Serve Go runtime profiles at /debug/pprof/ (and link them from the landing page).").Bool()
		enableRel   = app.Flag("web.enable-release", "Serve the release button on the on-call pages. Needs basic-auth users in --web.config.file, --release.audit-file, and a release block in the config file.").Bool()
		auditFile   = app.Flag("release.audit-file", "File that every release preview and release is appended to, one JSON line each (the web button and the release command).").String()
		maxRequests = app.Flag("web.max-requests", "Maximum number of parallel scrapes of the metrics path; more get 503, counted in promhttp_metric_handler_requests_total{code=\"503\"} and logged. 0 means no limit.").Default("40").Int()
		idleTimeout = app.Flag("web.idle-timeout", "How long an idle keep-alive connection is kept open.").Default("2m").Duration()
		webFlags    = kingpinflag.AddFlags(app, ":10121")
		_           = app.GetFlag("web.listen-address").Help("Addresses on which to expose metrics and web interface. Repeatable for multiple addresses. Examples: `:10121` or `[::1]:10121` for http, `vsock://:10121` for vsock")

		releaseCmd = app.Command("release", "Release one user's dead slots (or reset a counter, or delete a stale lock) from the command line, with the same checks and audit file as the web button.")
		relFamily  = releaseCmd.Flag("family", "Family name.").Required().String()
		relUser    = releaseCmd.Flag("user", "User id, as the family's user regexp extracts it from a key.").Required().String()
		relReason  = releaseCmd.Flag("reason", "Why (written to the audit file); required unless --dry-run.").String()
		relDryRun  = releaseCmd.Flag("dry-run", "Preview only: say what would be removed, write nothing to Redis.").Bool()
		relLive    = releaseCmd.Flag("include-live", "Also remove members that look alive (a holder known to be gone that the state rules cannot prove dead).").Bool()
		relValue   = releaseCmd.Flag("value", "Counters and rate counters: the value to set (compare-and-set against the previewed value).").Default("0").Int64()
		relOp      = releaseCmd.Flag("operator", "Who releases, for the audit file (default: $USER).").String()
	)
	// go build and go run leave the version empty without -ldflags: take
	// it from the module's build information instead.
	buildinfo.Init()
	app.Version(version.Print(name))
	app.HelpFlag.Short('h')
	cmd, err := app.Parse(args)
	if exited {
		return exitCode
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	shardOverride := ""
	if shardGiven {
		if err := config.CheckShardFlag(*shard); err != nil {
			fmt.Fprintf(stderr, "%s: %v%s\n", name, err, shardHint(*shard))
			return 2
		}
		shardOverride = *shard
	}

	logger := newLogger(stderr, *logLevel, *logFormat)
	// go-redis logs dial failures on its own; the sweeper already reports
	// them once per sweep, so keep these at debug.
	redis.SetLogger(redisLog{logger})

	src := configSources(*configFile, configGiven, *families, *demoMode)

	if cmd == releaseCmd.FullCommand() {
		return release.RunCLI(ctx, release.CLIArgs{
			ConfigFile: cmp.Or(src.file, *configFile), AuditFile: *auditFile, Family: *relFamily, User: *relUser,
			Reason: *relReason, DryRun: *relDryRun, IncludeLive: *relLive, Value: *relValue, Operator: *relOp,
		}, stdout, stderr, logger)
	}

	if *configCheck {
		cfg, err := config.LoadWith(src.file, src.overrides)
		if err == nil && shardOverride != "" {
			err = cfg.OverrideShard(shardOverride)
		}
		if err == nil {
			// The files the connection layer reads, with its errors.
			err = src.overrides.NameEnv(redisconn.Check(&cfg.Redis))
		}
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", src.name(), err)
			return 1
		}
		fmt.Fprintf(stdout, "%s: OK\n", src.name())
		return 0
	}

	if !*demoMode && src.file == "" && src.overrides.Empty() {
		logger.Error("refusing to start: no configuration", "hint", config.NoConfigHint)
		return 1
	}
	// Bind before the demo and the first sweep, so that a taken port is
	// all a failed start reports.
	listeners, err := listen(webFlags)
	if err != nil {
		logger.Error("web server", "err", err)
		return 1
	}
	defer closeAll(listeners)

	e := &exporter{logger: logger, configFile: src.file, overrides: src.overrides, shard: shardOverride}
	loginHint, demoWebConfig := "", ""
	if *demoMode {
		d, err := demo.Start(ctx, logger, demo.Options{})
		if err != nil {
			logger.Error("demo failed to start", "err", err)
			return 1
		}
		defer d.Stop()
		if src.file == "" {
			e.inline = d.Config
			// The release button, ready to try: the demo made an
			// operator, an audit file and the Redis user releases write
			// as. A web config of the user's own keeps its say.
			if r := d.Release; *webFlags.WebConfigFile == "" && *auditFile == "" {
				*enableRel, demoWebConfig, *auditFile = true, r.WebConfigFile, r.AuditFile
				loginHint = fmt.Sprintf("Demo: the release button is on. Open Leaks, pick a user, preview a release and confirm it; log in as %q with the password the exporter logged at start. Every preview and release is appended to %s.", r.Operator, r.AuditFile)
				logger.Info("demo: release is on; log in to the release pages with these (printed once)",
					"user", r.Operator, "password", r.Password, "audit_file", r.AuditFile, "folder", r.Dir)
			}
		}
	}
	if *enableRel {
		// Every release is made by a named operator and audited: without
		// both there is no release button.
		if err := web.CheckRelease(cmp.Or(demoWebConfig, *webFlags.WebConfigFile), *auditFile); err != nil {
			logger.Error("refusing to start", "err", err)
			return 1
		}
		rel, err := release.New(*auditFile, logger)
		if err != nil {
			logger.Error("refusing to start", "err", err)
			return 1
		}
		defer rel.Close()
		rel.SetFirstSeen(e.FirstSeen)
		e.release = rel
	}
	logger.Info("configuration", src.attrs()...)
	if err := e.reload(); err != nil {
		logger.Error("refusing to start", "err", err)
		return 1
	}
	defer e.shutdown()

	logger.Info("starting "+name, "version", version.Info(), "build_context", version.BuildContext(),
		"gogc", gogc, "memory_limit", gctarget.Describe(memLimit))

	reg := prometheus.NewRegistry()
	reg.MustRegister(
		versioncollector.NewCollector("slot_exporter"),
		newGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	opts := collector.Options{ReloadOK: e.reloadOK.Load}
	if e.release != nil {
		opts.Releases = e.release.Counts
	}
	reg.MustRegister(collector.New(e.Snapshot, opts))

	handler, err := web.New(web.Options{
		Name:          name,
		Description:   "Prometheus exporter and leak detector for crash-safe limits kept in Redis. Sweeps run in the background; a scrape reads the latest snapshot and never touches Redis.",
		Version:       version.Info(),
		Logger:        logger,
		MetricsPath:   *metricsPath,
		Metrics:       metricsHandler(reg, *maxRequests, logger),
		Source:        e,
		FirstSeen:     e.FirstSeen,
		Queue:         e.Queue,
		Ready:         e.ready,
		Reload:        e.reload,
		EnablePprof:   *enablePprof,
		Releaser:      e.release,
		WebConfigFile: cmp.Or(demoWebConfig, *webFlags.WebConfigFile),
		LoginHint:     loginHint,
	})
	if err != nil {
		logger.Error("web pages", "err", err)
		return 1
	}

	var served http.Handler = handler
	if demoWebConfig != "" {
		if served, err = releaseAuth(handler, demoWebConfig); err != nil {
			logger.Error("demo release login", "err", err)
			return 1
		}
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
	srv := &http.Server{Handler: served, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: *idleTimeout,
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelError)}
	errc := make(chan error, 1)
	go func() {
		if listeners == nil {
			errc <- toolkit.ListenAndServe(srv, webFlags, logger)
			return
		}
		errc <- toolkit.ServeMultiple(listeners, srv, webFlags, logger)
	}()
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

// shardHint explains the values a manifest leaves behind when the pod's
// index did not reach it: "$(POD_INDEX)/3" when the variable is not defined,
// "/3" when it is defined but empty (the pod-index label is set from
// Kubernetes 1.28 on).
func shardHint(v string) string {
	if i, _, ok := strings.Cut(v, "/"); ok && (strings.TrimSpace(i) == "" || strings.Contains(i, "$(")) {
		return " (the index is missing: a StatefulSet pod takes it from its apps.kubernetes.io/pod-index label, Kubernetes 1.28 or later)"
	}
	return ""
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
