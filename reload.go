package main

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/kind"
	"github.com/slotexporter/slot_exporter/internal/release"
	"github.com/slotexporter/slot_exporter/internal/snapshot"
	"github.com/slotexporter/slot_exporter/internal/sweep"
	"github.com/slotexporter/slot_exporter/internal/topology"
	"github.com/slotexporter/slot_exporter/redisconn"
)

// exporter holds what a reload swaps: the config, the Redis client and the
// sweeper. It is the web pages' Source.
type exporter struct {
	logger     *slog.Logger
	configFile string
	inline     []byte // demo config, used when configFile is ""
	// overrides are the flags' and environment's settings, over the file.
	overrides config.Overrides
	// shard is --sampling.shard, "" without it: it wins over the file's
	// sampling.shard at every load, so a reload cannot move a replica
	// onto another replica's keys.
	shard string
	// release is nil unless --web.enable-release: then a config without a
	// release block is refused, at start and on reload.
	release *release.Releaser

	mu       sync.Mutex
	cfg      *config.Config
	client   redis.UniversalClient
	sweeper  atomic.Pointer[sweep.Sweeper]
	current  atomic.Pointer[config.Config]
	reloadOK atomic.Bool
}

func (e *exporter) load() (*config.Config, error) {
	var cfg *config.Config
	var err error
	if e.inline != nil {
		cfg, err = config.ParseWith(e.inline, e.overrides)
	} else if cfg, err = config.LoadWith(e.configFile, e.overrides); err != nil && e.configFile != "" {
		err = fmt.Errorf("%s: %w", e.configFile, err)
	}
	if err == nil && e.shard != "" {
		err = cfg.OverrideShard(e.shard)
	}
	if err != nil {
		return nil, err
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
	if err == nil && e.release != nil {
		_, err = release.WriteConfig(cfg)
	}
	var client redis.UniversalClient
	if err == nil {
		client = e.client
		if e.cfg == nil || !reflect.DeepEqual(e.cfg.Redis, cfg.Redis) {
			client, err = redisconn.New(&cfg.Redis)
			err = e.overrides.NameEnv(err)
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
	e.current.Store(cfg)
	if e.release != nil {
		if err := e.release.Configure(cfg); err != nil {
			// WriteConfig passed above; only the client could fail here.
			e.logger.Error("release client", "err", err)
		}
	}
	e.reloadOK.Store(true)
	e.logger.Info("config loaded", "file", e.configFile, "families", len(cfg.Families), "shard", cfg.Sampling.Shard)
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

// Snapshot is the latest sweep's state.
func (e *exporter) Snapshot() *snapshot.Snapshot {
	if s := e.sweeper.Load(); s != nil {
		return s.Snapshot()
	}
	return nil
}

// Config is the running config.
func (e *exporter) Config() *config.Config { return e.current.Load() }

// Topology reaches Redis through the sampling client, for the on-call
// page's live reads.
func (e *exporter) Topology() *topology.Topology {
	if s := e.sweeper.Load(); s != nil {
		return s.Topology()
	}
	return nil
}

// FirstSeen looks a member up in the running sweeper's trackers, for the
// on-call page and the release preview.
func (e *exporter) FirstSeen(family, key string, memberHash uint64) (int64, bool) {
	if s := e.sweeper.Load(); s != nil {
		return s.FirstSeen(family, key, memberHash)
	}
	return 0, false
}

// Queue looks a framework family's queue up in the running sweeper, for
// the on-call page.
func (e *exporter) Queue(family, queue string) (kind.QueueView, bool) {
	if s := e.sweeper.Load(); s != nil {
		return s.Queue(family, queue)
	}
	return kind.QueueView{}, false
}

func (e *exporter) ready() bool {
	s := e.sweeper.Load()
	return s != nil && s.Ready()
}
