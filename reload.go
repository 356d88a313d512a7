package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/snapshot"
	"github.com/slotexporter/slot_exporter/internal/sweep"
	"github.com/slotexporter/slot_exporter/redisconn"
)

// exporter holds what a reload swaps: the config, the Redis client and the
// sweeper.
type exporter struct {
	logger     *slog.Logger
	configFile string
	inline     []byte // demo config, used when configFile is ""

	mu       sync.Mutex
	cfg      *config.Config
	client   redis.UniversalClient
	sweeper  atomic.Pointer[sweep.Sweeper]
	reloadOK atomic.Bool
}

func (e *exporter) load() (*config.Config, error) {
	if e.configFile == "" {
		return config.Parse(e.inline)
	}
	cfg, err := config.Load(e.configFile)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", e.configFile, err)
	}
	return cfg, nil
}

// reload loads the config and, if it is good, swaps in a new sweeper that
// inherits the old one's tracked state. A bad config is refused: the old
// one keeps running and slot_exporter_config_last_reload_successful drops
// to 0.
func (e *exporter) reload() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	cfg, err := e.load()
	var client redis.UniversalClient
	if err == nil {
		client = e.client
		if e.cfg == nil || !reflect.DeepEqual(e.cfg.Redis, cfg.Redis) {
			client, err = redisconn.New(&cfg.Redis)
		}
	}
	old := e.sweeper.Load()
	var s *sweep.Sweeper
	if err == nil {
		// sweep.New refuses a config it cannot run (discovery: notify
		// without keyspace events) before it stops the old sweeper.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		s, err = sweep.New(ctx, cfg, client, e.logger, old)
		cancel()
		if err != nil && client != e.client {
			_ = client.Close()
		}
	}
	if err != nil {
		e.reloadOK.Store(false)
		if e.cfg != nil {
			e.logger.Error("config reload refused; the previous config keeps running", "err", err)
		}
		return err
	}
	s.Start()
	e.sweeper.Store(s)
	if e.client != nil && e.client != client {
		_ = e.client.Close()
	}
	e.client, e.cfg = client, cfg
	e.reloadOK.Store(true)
	e.logger.Info("config loaded", "file", e.configFile, "families", len(cfg.Families))
	return nil
}

func (e *exporter) shutdown() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if s := e.sweeper.Load(); s != nil {
		s.Stop()
	}
	if e.client != nil {
		_ = e.client.Close()
	}
}

func (e *exporter) snapshot() *snapshot.Snapshot {
	if s := e.sweeper.Load(); s != nil {
		return s.Snapshot()
	}
	return nil
}

func (e *exporter) routes(mux *http.ServeMux) {
	mux.HandleFunc("/-/healthy", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		fmt.Fprintln(w, "Healthy")
	})
	mux.HandleFunc("/-/ready", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if s := e.sweeper.Load(); s == nil || !s.Ready() {
			http.Error(w, "not ready: the first sweep has not finished", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "Ready")
	})
	mux.HandleFunc("/-/reload", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost && r.Method != http.MethodPut {
			w.Header().Set("Allow", "POST, PUT")
			http.Error(w, "method not allowed: use POST", http.StatusMethodNotAllowed)
			return
		}
		if err := e.reload(); err != nil {
			// The request was fine; the file is not. 4xx, not 5xx: the
			// exporter itself is healthy and still serving the old config.
			http.Error(w, "config reload refused: "+err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintln(w, "Reloaded")
	})
}
