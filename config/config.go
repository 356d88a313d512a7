// Package config loads and validates slot_exporter's YAML configuration.
//
// Decoding is strict (unknown fields are errors) and every error names the
// field path it is about, e.g. "families[1].heartbeat_interval: must be
// shorter than ttl".
package config

import (
	"regexp"
	"time"
)

// Family kinds.
const (
	KindSlotSet = "slotset"
	KindCounter = "counter"
)

// Redis modes, read_from values and discovery modes.
const (
	ModeStandalone = "standalone"
	ModeCluster    = "cluster"
	ModeSentinel   = "sentinel"

	ReadFromPrimary = "primary"
	ReadFromReplica = "replica"

	DiscoveryScan   = "scan"
	DiscoveryNotify = "notify"
)

// Config is the whole file after defaults and validation.
type Config struct {
	Redis    Redis    `yaml:"redis"`
	Sampling Sampling `yaml:"sampling"`
	Leaks    Leaks    `yaml:"leaks"`
	Families []Family `yaml:"families"`
}

// Redis says how to reach Redis. Passwords never live here: see
// PasswordFile and the REDIS_PASSWORD environment variable.
type Redis struct {
	// Addr is host:port, or a redis:// / rediss:// URL (rediss implies TLS).
	Addr  string   `yaml:"addr"`
	Addrs []string `yaml:"addrs"` // cluster seeds or sentinel addresses
	// Mode is standalone (default), cluster or sentinel.
	Mode string `yaml:"mode"`
	// MasterName is the sentinel master name; required in sentinel mode.
	MasterName   string `yaml:"master_name"`
	Username     string `yaml:"username"`
	PasswordFile string `yaml:"password_file"`
	DB           int    `yaml:"db"`
	// ReadFrom is primary (default) or replica.
	ReadFrom    string        `yaml:"read_from"`
	TLS         *TLS          `yaml:"tls"`
	DialTimeout time.Duration `yaml:"dial_timeout"` // default 5s
}

// TLS configures TLS to Redis.
type TLS struct {
	CAFile             string `yaml:"ca_file"`
	CertFile           string `yaml:"cert_file"`
	KeyFile            string `yaml:"key_file"`
	ServerName         string `yaml:"server_name"`
	InsecureSkipVerify bool   `yaml:"insecure_skip_verify"`
}

// Sampling controls the background sweeps.
type Sampling struct {
	Interval         time.Duration `yaml:"interval"`            // default 5s
	Timeout          time.Duration `yaml:"timeout"`             // default 30s
	ScanCount        int           `yaml:"scan_count"`          // default 1000
	Window           time.Duration `yaml:"window"`              // default 1m; >= interval
	MaxKeysPerSecond int           `yaml:"max_keys_per_second"` // default 0 = unbounded
	MaxMembersPerKey int           `yaml:"max_members_per_key"` // default 1000
	Discovery        string        `yaml:"discovery"`           // scan (default) or notify
	FullScanInterval time.Duration `yaml:"full_scan_interval"`  // notify mode only; default 5m
}

// Leaks controls leak detection and the per-user series cap.
type Leaks struct {
	FloorWindow   time.Duration `yaml:"floor_window"`    // default 30m
	PerUserSeries int           `yaml:"per_user_series"` // default 500; 0 emits no per-user series
}

// Family is a set of keys found by a SCAN pattern, one key per user.
type Family struct {
	Name  string `yaml:"name"`
	Kind  string `yaml:"kind"`
	Match string `yaml:"match"`
	// User is an optional regexp whose first capture group is the user id.
	// Default: what the first * of Match matched.
	User  string `yaml:"user"`
	Limit int    `yaml:"limit"`

	// slotset only.
	TTL                time.Duration `yaml:"ttl"`
	HeartbeatInterval  time.Duration `yaml:"heartbeat_interval"`
	MaxHold            time.Duration `yaml:"max_hold"`
	StaleAfter         time.Duration `yaml:"stale_after"`          // default 2 x heartbeat_interval
	ClockSkewTolerance time.Duration `yaml:"clock_skew_tolerance"` // default 5s
	ScoreUnit          string        `yaml:"score_unit"`           // ms (default) or s

	// UserRegexp is User compiled, or the regexp derived from Match.
	UserRegexp *regexp.Regexp `yaml:"-"`
}

// Load reads, decodes, defaults and validates the file at path.
func Load(path string) (*Config, error) { panic("TODO") }

// Parse decodes, defaults and validates YAML bytes.
func Parse(b []byte) (*Config, error) { panic("TODO") }

// UserOf returns the user a key belongs to, or false when the key does not
// yield one (the sweeper counts it as skipped, reason bad_user).
func (f *Family) UserOf(key string) (string, bool) { panic("TODO") }

// Password returns the Redis password from REDIS_PASSWORD or PasswordFile
// (trailing newline trimmed); "" when neither is set. An unreadable file is
// an error that names redis.password_file but never echoes file contents.
func (r *Redis) Password() (string, error) { panic("TODO") }
