// Package config loads and validates slot_exporter's YAML configuration.
//
// Decoding is strict (unknown fields are errors) and every error names the
// field path it is about, e.g. "families[1].heartbeat_interval: must be
// shorter than ttl".
package config

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// Kind is what a family's keys hold; docs/design.md, "What it watches".
type Kind string

// Family kinds.
const (
	KindSlotSet   Kind = "slotset"
	KindCounter   Kind = "counter"
	KindRateLimit Kind = "ratelimit"
	KindLock      Kind = "lock"
	KindList      Kind = "list"
	KindStream    Kind = "stream"

	// Queue frameworks: the queue, not a key, is their unit; see
	// framework.go.
	KindBullMQ  Kind = "bullmq"
	KindSidekiq Kind = "sidekiq"
	KindRQ      Kind = "rq"
	KindCelery  Kind = "celery"
)

// Kinds lists every kind, in the order errors name them.
var Kinds = []Kind{KindSlotSet, KindCounter, KindRateLimit, KindLock, KindList, KindStream,
	KindBullMQ, KindSidekiq, KindRQ, KindCelery}

// Score modes of slot-set members.
const (
	// ScoreExpiry: the score is the slot's expiry.
	ScoreExpiry = "expiry"
	// ScoreHeartbeat: the score is the time of the last acquire or
	// refresh; the expiry is score + ttl.
	ScoreHeartbeat = "heartbeat"
)

// List pop sides.
const (
	PopRight = "right"
	PopLeft  = "left"
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
	// Release is who the release button and command write as; nil when
	// the file has no release block. See release.go.
	Release *Release `yaml:"release"`
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
	// TLSAsWritten is TLS with its file names as the file gave them,
	// before relative ones were resolved: the connection layer's file
	// checks name them so.
	TLSAsWritten *TLS `yaml:"-"`
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
	// FullScanInterval is how often every key is read again even when
	// nothing said it changed: the notify watcher's full SCAN, and the
	// slow reconciliation of track_changes. Default 5m.
	FullScanInterval time.Duration `yaml:"full_scan_interval"`
	// TrackChanges reads only the keys written since their last read
	// (Redis client tracking), and advances the others with time from
	// what was read. Default true; false reads every key every sweep.
	// Where tracking is unavailable (a cluster, Redis before 6, an ACL
	// without its commands) every key is read anyway.
	TrackChanges bool `yaml:"track_changes"`
	// RedisCPUShare is the share of one Redis core the exporter may add,
	// measured from INFO cpu; reads are paced toward it. Default 0.1; 0
	// turns CPU pacing off (max_keys_per_second still applies).
	RedisCPUShare float64 `yaml:"redis_cpu_share"`
	// Shard is "i/n": this exporter reads only the keys whose cluster
	// hash slot s has s % n == i. Empty: every key.
	Shard string `yaml:"shard"`
	// ShardIndex and ShardCount are Shard parsed (0 and 1 without one).
	ShardIndex int `yaml:"-"`
	ShardCount int `yaml:"-"`
}

// Leaks controls leak detection and the per-user series cap.
type Leaks struct {
	FloorWindow   time.Duration `yaml:"floor_window"`    // default 30m
	PerUserSeries int           `yaml:"per_user_series"` // default 500; 0 emits no per-user series
}

// Family is a set of keys found by a SCAN pattern, one key per user.
type Family struct {
	Name  string `yaml:"name"`
	Kind  Kind   `yaml:"kind"`
	Match string `yaml:"match"`
	// User is an optional regexp whose first capture group is the user id.
	// Default: what the first * of Match matched.
	User string `yaml:"user"`
	// Limit is required for slotset and counter, optional elsewhere
	// (0: none).
	Limit int `yaml:"limit"`
	// FloorWindow is how long used may stay off its baseline before it is
	// the leak signature; default leaks.floor_window, 0 turns it off.
	FloorWindow time.Duration `yaml:"floor_window"`

	// slotset and lock.
	TTL     time.Duration `yaml:"ttl"`
	MaxHold time.Duration `yaml:"max_hold"` // also stream
	// slotset only.
	HeartbeatInterval  time.Duration `yaml:"heartbeat_interval"`
	StaleAfter         time.Duration `yaml:"stale_after"`          // default 2 x heartbeat_interval
	ClockSkewTolerance time.Duration `yaml:"clock_skew_tolerance"` // default 5s; also lock
	ScoreUnit          string        `yaml:"score_unit"`           // ms (default) or s
	Score              string        `yaml:"score"`                // expiry (default) or heartbeat

	// ratelimit only: the fixed window.
	Window time.Duration `yaml:"window"`
	// list only.
	MaxWait time.Duration `yaml:"max_wait"`
	PopSide string        `yaml:"pop_side"` // right (default) or left
	// stream only.
	MaxDeliveries int `yaml:"max_deliveries"` // default 5

	// Queue frameworks (bullmq, sidekiq, rq, celery), which also take
	// max_wait and max_hold. Prefix is the framework's key prefix (bullmq
	// default "bull", rq default "rq", a sidekiq namespace: none); Queues
	// are the queues watched (default: every queue found).
	Prefix string   `yaml:"prefix"`
	Queues []string `yaml:"queues"`
	// VisibilityTimeout is celery's (kombu's) visibility_timeout: an
	// unacked message older than it is restored by the next worker.
	VisibilityTimeout time.Duration `yaml:"visibility_timeout"`

	// UserRegexp is User compiled, or the regexp derived from Match.
	UserRegexp *regexp.Regexp `yaml:"-"`
	// MatchRegexp is Match as a regexp, to pick the family's keys out of
	// a list of key names (notify discovery, cluster slot listings).
	MatchRegexp *regexp.Regexp `yaml:"-"`
	// shape is UserRegexp's fast path, when it has one.
	shape *userShape
}

// PasswordEnv is the environment variable that holds the Redis password.
// It wins over redis.password_file.
const PasswordEnv = "REDIS_PASSWORD"

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
	if c.Redis.TLS != nil {
		t := *c.Redis.TLS
		c.Redis.TLSAsWritten = &t
	}
	if dir != "" {
		resolvePaths(c, dir)
	}
	res, err := validate(c, p)
	if err != nil {
		return nil, err
	}
	for i, re := range res {
		f := &c.Families[i]
		f.UserRegexp = re
		f.shape = shapeOf(re)
		src, _, _ := GlobToRegexp(f.Match) // validate has compiled it once
		f.MatchRegexp = regexp.MustCompile(src)
	}
	return c, nil
}

// MaxUserBytes bounds a user id. Whoever can write one key under a
// family's pattern chooses its user: a key of 5 MB made a 5 MB user label,
// two series of it a 10 MB /metrics page that a scrape's label limit
// refuses whole, and 50 parallel scrapes took the exporter from 80 to 853
// MB. A longer id is no user (bad_user).
const MaxUserBytes = 1024

// UserOf returns the user a key belongs to, or false when the key does not
// yield one (the sweeper counts it as skipped, reason bad_user).
//
// The user is the first capture group of UserRegexp; an empty capture, or
// one longer than MaxUserBytes, is no user.
func (f *Family) UserOf(key string) (string, bool) {
	u, ok := f.userOf(key)
	if !ok || len(u) > MaxUserBytes {
		return "", false
	}
	return u, true
}

// LiteralKey is the one key a match without glob characters names (RQ's
// rq:queues, Sidekiq's queues): the sweep reads it by name. A SCAN for it
// walked the whole keyspace every sweep, 40 keys a call under the pace,
// to find one key.
func (f *Family) LiteralKey() (string, bool) {
	if f.Match == "" || strings.ContainsAny(f.Match, `*?[\`) {
		return "", false
	}
	return f.Match, true
}

// userOf is UserOf without the bound. A Family built in code without
// UserRegexp gets it derived on each call (slow; Parse fills it in, with
// the fast path for the common shapes).
func (f *Family) userOf(key string) (string, bool) {
	re := f.UserRegexp
	if re == nil {
		var err error
		if re, err = compileUser(f); err != nil {
			return "", false
		}
	} else if f.shape != nil {
		return f.shape.userOf(key)
	}
	m := re.FindStringSubmatch(key)
	if len(m) < 2 || m[1] == "" {
		return "", false
	}
	return m[1], true
}
