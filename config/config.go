// Package config loads and validates slot_exporter's YAML configuration.
//
// Decoding is strict (unknown fields are errors) and every error names the
// field path it is about, e.g. "families[1].heartbeat_interval: must be
// shorter than ttl".
package config

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
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

// PasswordEnv is the environment variable that holds the Redis password.
// It wins over redis.password_file.
const PasswordEnv = "REDIS_PASSWORD"

// maxPasswordFileSize bounds what Password reads.
const maxPasswordFileSize = 64 << 10

// Load reads, decodes, defaults and validates the file at path.
//
// Relative file names in it (redis.password_file, redis.tls.*_file) are
// taken relative to the directory of path, and are absolute in the result.
// Errors other than the file's own read error do not name path: the caller
// does.
func Load(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parse(b, filepath.Dir(path))
}

// Parse decodes, defaults and validates YAML bytes. Relative file names
// are left as they are (relative to the working directory).
func Parse(b []byte) (*Config, error) { return parse(b, "") }

func parse(b []byte, dir string) (*Config, error) {
	doc, err := decodeYAML(b)
	if err != nil {
		return nil, err
	}
	c := &Config{}
	p, err := decode(doc, c)
	if err != nil {
		return nil, err
	}
	applyDefaults(c, p)
	var written *TLS
	if c.Redis.TLS != nil {
		t := *c.Redis.TLS
		written = &t
	}
	if dir != "" {
		resolvePaths(c, dir)
	}
	res, err := validate(c, p, written)
	if err != nil {
		return nil, err
	}
	for i, re := range res {
		c.Families[i].UserRegexp = re
	}
	return c, nil
}

// UserOf returns the user a key belongs to, or false when the key does not
// yield one (the sweeper counts it as skipped, reason bad_user).
//
// The user is the first capture group of UserRegexp; an empty capture is no
// user. A Family built in code without UserRegexp gets it derived on each
// call (slow; Parse fills it in).
func (f *Family) UserOf(key string) (string, bool) {
	re := f.UserRegexp
	if re == nil {
		var err error
		if re, err = compileUser(f); err != nil {
			return "", false
		}
	} else if s := cachedShape(re); s != nil {
		return s.userOf(key)
	}
	m := re.FindStringSubmatch(key)
	if len(m) < 2 || m[1] == "" {
		return "", false
	}
	return m[1], true
}

// Password returns the Redis password from REDIS_PASSWORD or PasswordFile
// (trailing newline trimmed); "" when neither is set. An unreadable file is
// an error that names redis.password_file but never echoes file contents.
//
// It reads the file on every call, so a rotated password is picked up on
// the next connection.
func (r *Redis) Password() (string, error) {
	if p := os.Getenv(PasswordEnv); p != "" {
		return p, nil
	}
	if r.PasswordFile == "" {
		return "", nil
	}
	f, err := os.Open(r.PasswordFile)
	if err != nil {
		return "", fmt.Errorf("redis.password_file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxPasswordFileSize+1))
	if err != nil {
		return "", fmt.Errorf("redis.password_file: %w", err)
	}
	if len(b) > maxPasswordFileSize {
		return "", fmt.Errorf("redis.password_file: %s: larger than %d bytes", r.PasswordFile, maxPasswordFileSize)
	}
	s := string(b)
	if t, ok := strings.CutSuffix(s, "\r\n"); ok {
		return t, nil
	}
	return strings.TrimSuffix(s, "\n"), nil
}
