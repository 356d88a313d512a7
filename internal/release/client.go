package release

import (
	"errors"
	"fmt"
	"os"
	"reflect"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/topology"
	"github.com/slotexporter/slot_exporter/redisconn"
)

// WriteConfig is the redis section the release client uses: the sampling
// one with the release user's credentials, and always the primary.
func WriteConfig(cfg *config.Config) (config.Redis, error) {
	if cfg.Release == nil || cfg.Release.Username == "" {
		return config.Redis{}, errors.New("release: the config file has no release block; releases write as their own Redis user (release.username, release.password_file)")
	}
	if os.Getenv(config.PasswordEnv) != "" && cfg.Release.PasswordFile != "" {
		// The connection layer lets the variable win over any password
		// file: the release user would log in with the sampling password.
		return config.Redis{}, fmt.Errorf("release: %s is set and would override release.password_file; give the sampling password in redis.password_file instead", config.PasswordEnv)
	}
	rc := cfg.Redis
	rc.Username = cfg.Release.Username
	rc.PasswordFile = cfg.Release.PasswordFile
	rc.ReadFrom = config.ReadFromPrimary
	if rc.PasswordFile != "" {
		f, err := os.Open(rc.PasswordFile)
		if err != nil {
			return config.Redis{}, fmt.Errorf("release.password_file: %w", err)
		}
		_ = f.Close()
	}
	return rc, nil
}

// Configure takes a (re)loaded config. The write client is rebuilt when
// the redis or release section changed.
func (r *Releaser) Configure(cfg *config.Config) error {
	rc, err := WriteConfig(cfg)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.client != nil && r.cfg != nil && reflect.DeepEqual(r.cfg.Redis, cfg.Redis) && reflect.DeepEqual(r.cfg.Release, cfg.Release) {
		r.cfg = cfg
		return nil
	}
	c, err := redisconn.New(&rc)
	if err != nil {
		return fmt.Errorf("release client: %w", err)
	}
	if r.client != nil {
		_ = r.client.Close()
	}
	r.cfg, r.client, r.topo = cfg, c, topology.New(c, false)
	return nil
}

// Close closes the write client.
func (r *Releaser) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.client != nil {
		_ = r.client.Close()
		r.client = nil
	}
}

// current returns the config and the write side to use for one request.
func (r *Releaser) current() (*config.Config, *topology.Topology, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cfg == nil || r.topo == nil {
		return nil, nil, errors.New("release is not configured")
	}
	return r.cfg, r.topo, nil
}

// username is the release user's name, for messages.
func (r *Releaser) username() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cfg == nil || r.cfg.Release == nil {
		return ""
	}
	return r.cfg.Release.Username
}
