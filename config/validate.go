package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Defaults, as documented in DESIGN.md.
const (
	DefaultMode               = ModeStandalone
	DefaultReadFrom           = ReadFromPrimary
	DefaultDialTimeout        = 5 * time.Second
	DefaultInterval           = 5 * time.Second
	DefaultTimeout            = 30 * time.Second
	DefaultScanCount          = 1000
	DefaultWindow             = time.Minute
	DefaultMaxKeysPerSecond   = 0
	DefaultMaxMembersPerKey   = 1000
	DefaultDiscovery          = DiscoveryScan
	DefaultFullScanInterval   = 5 * time.Minute
	DefaultFloorWindow        = 30 * time.Minute
	DefaultPerUserSeries      = 500
	DefaultClockSkewTolerance = 5 * time.Second
	DefaultScoreUnit          = ScoreUnitMillis
	DefaultMaxDeliveries      = 5
)

// Score units of slot-set members.
const (
	ScoreUnitMillis  = "ms"
	ScoreUnitSeconds = "s"
)

func applyDefaults(c *Config, p *presence) {
	r := &c.Redis
	if r.Mode == "" {
		r.Mode = DefaultMode
	}
	if r.ReadFrom == "" {
		r.ReadFrom = DefaultReadFrom
	}
	if !p.redis["dial_timeout"] {
		r.DialTimeout = DefaultDialTimeout
	}

	s := &c.Sampling
	if !p.sampling["interval"] {
		s.Interval = DefaultInterval
	}
	if !p.sampling["timeout"] {
		s.Timeout = DefaultTimeout
	}
	if !p.sampling["scan_count"] {
		s.ScanCount = DefaultScanCount
	}
	if !p.sampling["window"] {
		s.Window = DefaultWindow
	}
	if !p.sampling["max_keys_per_second"] {
		s.MaxKeysPerSecond = DefaultMaxKeysPerSecond
	}
	if !p.sampling["max_members_per_key"] {
		s.MaxMembersPerKey = DefaultMaxMembersPerKey
	}
	if s.Discovery == "" {
		s.Discovery = DefaultDiscovery
	}
	if !p.sampling["full_scan_interval"] {
		s.FullScanInterval = DefaultFullScanInterval
	}

	if !p.leaks["floor_window"] {
		c.Leaks.FloorWindow = DefaultFloorWindow
	}
	if !p.leaks["per_user_series"] {
		c.Leaks.PerUserSeries = DefaultPerUserSeries
	}

	for i := range c.Families {
		f, set := &c.Families[i], p.families[i]
		if !set["floor_window"] {
			f.FloorWindow = c.Leaks.FloorWindow
		}
		switch f.Kind {
		case KindSlotSet:
			if !set["stale_after"] {
				f.StaleAfter = twice(f.HeartbeatInterval)
			}
			if !set["clock_skew_tolerance"] {
				f.ClockSkewTolerance = DefaultClockSkewTolerance
			}
			if f.ScoreUnit == "" {
				f.ScoreUnit = DefaultScoreUnit
			}
			if f.Score == "" {
				f.Score = ScoreExpiry
			}
		case KindLock:
			if !set["clock_skew_tolerance"] {
				f.ClockSkewTolerance = DefaultClockSkewTolerance
			}
		case KindList:
			if f.PopSide == "" {
				f.PopSide = PopRight
			}
		case KindStream:
			if !set["max_deliveries"] {
				f.MaxDeliveries = DefaultMaxDeliveries
			}
		}
	}
}

// twice is 2*d, saturated.
func twice(d time.Duration) time.Duration {
	const maxDuration = time.Duration(1<<63 - 1)
	if d > maxDuration/2 {
		return maxDuration
	}
	return 2 * d
}

// resolvePaths makes the relative file names in c relative to dir.
func resolvePaths(c *Config, dir string) {
	abs := func(p *string) {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
	abs(&c.Redis.PasswordFile)
	if t := c.Redis.TLS; t != nil {
		abs(&t.CAFile)
		abs(&t.CertFile)
		abs(&t.KeyFile)
	}
}

// Validate checks a Config as Parse returns it, defaults filled in: a zero
// field that has a default is an error here. Parse has already run it;
// it is for configs built or changed in code. It does not modify c and
// does not look at UserRegexp.
func (c *Config) Validate() error {
	// Only the families' presence matters to validate; a set field is a
	// non-zero one.
	p := &presence{}
	for _, f := range c.Families {
		p.families = append(p.families, present{
			"limit":                f.Limit != 0,
			"ttl":                  f.TTL != 0,
			"heartbeat_interval":   f.HeartbeatInterval != 0,
			"max_hold":             f.MaxHold != 0,
			"stale_after":          f.StaleAfter != 0,
			"clock_skew_tolerance": f.ClockSkewTolerance != 0,
			"score_unit":           f.ScoreUnit != "",
			"score":                f.Score != "",
			"floor_window":         f.FloorWindow != 0,
			"window":               f.Window != 0,
			"max_wait":             f.MaxWait != 0,
			"pop_side":             f.PopSide != "",
			"max_deliveries":       f.MaxDeliveries != 0,
		})
	}
	_, err := validate(c, p, nil)
	return err
}

// validate checks c, whose defaults are applied, and returns the compiled
// user regexps. sourcePaths, if not nil, gives the TLS file names as written
// in the file, for error messages.
func validate(c *Config, p *presence, sourcePaths *TLS) ([]*regexp.Regexp, error) {
	if len(c.Families) == 0 {
		return nil, errors.New("families: at least one family is required")
	}
	if err := validateRedis(&c.Redis, sourcePaths); err != nil {
		return nil, err
	}
	if err := validateSampling(&c.Sampling); err != nil {
		return nil, err
	}
	l := c.Leaks
	switch {
	case l.FloorWindow <= 0:
		return nil, errors.New("leaks.floor_window: must be > 0")
	case l.FloorWindow < c.Sampling.Window:
		return nil, errors.New("leaks.floor_window: must be >= sampling.window")
	case l.PerUserSeries < 0:
		return nil, errors.New("leaks.per_user_series: must be >= 0")
	}

	res := make([]*regexp.Regexp, len(c.Families))
	names := map[string]int{}
	for i := range c.Families {
		f := &c.Families[i]
		path := fmt.Sprintf("families[%d]", i)
		if j, dup := names[f.Name]; dup && f.Name != "" {
			return nil, fmt.Errorf("%s.name: duplicate name %q (also families[%d])", path, f.Name, j)
		}
		names[f.Name] = i
		re, err := validateFamily(f, path, p.families[i])
		if err != nil {
			return nil, err
		}
		switch {
		case f.FloorWindow < 0:
			return nil, fmt.Errorf("%s.floor_window: must be >= 0 (0 turns the floor alert off)", path)
		case f.FloorWindow > 0 && f.FloorWindow < c.Sampling.Window:
			return nil, fmt.Errorf("%s.floor_window: must be 0 or >= sampling.window", path)
		}
		res[i] = re
	}
	return res, nil
}

func validateRedis(r *Redis, sourcePaths *TLS) error {
	switch r.Mode {
	case ModeStandalone:
		if len(r.Addrs) > 0 {
			return errors.New("redis.addrs: only used in cluster and sentinel modes; use redis.addr")
		}
		if r.Addr == "" {
			return errors.New("redis.addr: required in standalone mode")
		}
	case ModeCluster:
		if r.Addr == "" && len(r.Addrs) == 0 {
			return errors.New("redis.addrs: required in cluster mode")
		}
		if r.Addr != "" && len(r.Addrs) > 0 {
			return errors.New("redis.addr: set redis.addr or redis.addrs, not both")
		}
	case ModeSentinel:
		if r.Addr != "" {
			return errors.New("redis.addr: not used in sentinel mode; list the sentinels in redis.addrs")
		}
		if len(r.Addrs) == 0 {
			return errors.New("redis.addrs: required in sentinel mode")
		}
		if r.MasterName == "" {
			return errors.New("redis.master_name: required in sentinel mode")
		}
	default:
		return fmt.Errorf("redis.mode: unknown mode %q (want standalone, cluster or sentinel)", r.Mode)
	}
	if r.MasterName != "" && r.Mode != ModeSentinel {
		return errors.New("redis.master_name: only used in sentinel mode")
	}

	var urlDB int
	if r.Addr != "" {
		db, err := checkAddr("redis.addr", r.Addr, true)
		if err != nil {
			return err
		}
		urlDB = db
	}
	for i, a := range r.Addrs {
		if _, err := checkAddr(fmt.Sprintf("redis.addrs[%d]", i), a, false); err != nil {
			return err
		}
	}

	switch {
	case r.DB < 0:
		return errors.New("redis.db: must be >= 0")
	case r.DB != 0 && r.Mode == ModeCluster:
		return errors.New("redis.db: must be 0 in cluster mode (a cluster has only database 0)")
	case urlDB != 0 && r.Mode == ModeCluster:
		return errors.New("redis.addr: the URL names a database other than 0; a cluster has only database 0")
	case r.DB != 0 && urlDB != 0:
		return errors.New("redis.db: the database is also given in the redis.addr URL")
	}

	switch r.ReadFrom {
	case ReadFromPrimary:
	case ReadFromReplica:
		if r.Mode == ModeStandalone {
			return errors.New("redis.read_from: replica needs mode cluster or sentinel; in standalone mode there is only the server at redis.addr")
		}
	default:
		return fmt.Errorf("redis.read_from: unknown value %q (want primary or replica)", r.ReadFrom)
	}

	if r.DialTimeout <= 0 {
		return errors.New("redis.dial_timeout: must be > 0")
	}

	if t := r.TLS; t != nil {
		src := sourcePaths
		if src == nil {
			src = t
		}
		if t.CertFile != "" && t.KeyFile == "" {
			return errors.New("redis.tls.key_file: required when cert_file is set")
		}
		if t.KeyFile != "" && t.CertFile == "" {
			return errors.New("redis.tls.cert_file: required when key_file is set")
		}
		for _, f := range []struct{ path, name, shown string }{
			{"redis.tls.ca_file", t.CAFile, src.CAFile},
			{"redis.tls.cert_file", t.CertFile, src.CertFile},
			{"redis.tls.key_file", t.KeyFile, src.KeyFile},
		} {
			if f.name == "" {
				continue
			}
			st, err := os.Stat(f.name)
			if err != nil {
				var pe *os.PathError
				if errors.As(err, &pe) {
					err = pe.Err
				}
				return fmt.Errorf("%s: %q: %v", f.path, f.shown, err)
			}
			if st.IsDir() {
				return fmt.Errorf("%s: %q: is a directory", f.path, f.shown)
			}
		}
	}
	return nil
}

// checkAddr checks a host:port, or (if urlOK) a redis:// or rediss:// URL,
// and returns the database the URL names. A password in it is refused, and
// no error echoes it.
func checkAddr(path, addr string, urlOK bool) (db int, err error) {
	scheme, rest, isURL := strings.Cut(addr, "://")
	if !isURL {
		rest = addr
	}
	// Whatever sits before the last @ is userinfo, or a mangled URL that
	// url.Parse would misread. redis-cli reads a lone "secret@" as a
	// password, so any userinfo is refused, and never echoed: the user
	// name goes in redis.username.
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		return 0, fmt.Errorf("%s: %s", path, errPasswordInConfig)
	}
	if !isURL {
		host, port, err := net.SplitHostPort(addr)
		if err == nil && host != "" && !strings.ContainsAny(host, "@/ ") && validPort(port) {
			return 0, nil
		}
		if urlOK {
			return 0, fmt.Errorf("%s: invalid address %q (want host:port, or a redis:// or rediss:// URL)", path, addr)
		}
		return 0, fmt.Errorf("%s: invalid address %q (want host:port)", path, addr)
	}
	if !urlOK {
		return 0, fmt.Errorf("%s: invalid address %q (want host:port; URLs only go in redis.addr)", path, addr)
	}
	if scheme != "redis" && scheme != "rediss" {
		return 0, fmt.Errorf("%s: unsupported URL scheme %q (want redis or rediss)", path, scheme)
	}
	u, err := url.Parse(addr)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return 0, fmt.Errorf("%s: invalid URL: %v", path, err)
	}
	if _, ok := u.User.Password(); ok {
		return 0, fmt.Errorf("%s: %s", path, errPasswordInConfig)
	}
	opts, err := redis.ParseURL(addr)
	if err != nil {
		return 0, fmt.Errorf("%s: invalid URL: %s", path, strings.TrimPrefix(err.Error(), "redis: "))
	}
	return opts.DB, nil
}

func validPort(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n > 0 && n < 65536
}

func validateSampling(s *Sampling) error {
	switch {
	case s.Interval <= 0:
		return errors.New("sampling.interval: must be > 0")
	case s.Timeout <= 0:
		return errors.New("sampling.timeout: must be > 0")
	case s.ScanCount < 1:
		return errors.New("sampling.scan_count: must be >= 1")
	case s.Window < s.Interval:
		return errors.New("sampling.window: must be >= interval")
	case s.MaxKeysPerSecond < 0:
		return errors.New("sampling.max_keys_per_second: must be >= 0 (0 = unbounded)")
	case s.MaxMembersPerKey < 1:
		return errors.New("sampling.max_members_per_key: must be >= 1")
	}
	switch s.Discovery {
	case DiscoveryScan, DiscoveryNotify:
	default:
		return fmt.Errorf("sampling.discovery: unknown discovery %q (want scan or notify)", s.Discovery)
	}
	switch {
	case s.FullScanInterval <= 0:
		return errors.New("sampling.full_scan_interval: must be > 0")
	case s.Discovery == DiscoveryNotify && s.FullScanInterval < s.Interval:
		return errors.New("sampling.full_scan_interval: must be >= interval")
	}
	return nil
}

var validName = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// kindFields are the fields each kind takes beyond name, kind, match, user,
// limit and floor_window; any other is an error that names the kind.
var kindFields = map[Kind][]string{
	KindSlotSet:   {"ttl", "heartbeat_interval", "max_hold", "stale_after", "clock_skew_tolerance", "score_unit", "score"},
	KindCounter:   {},
	KindRateLimit: {"window"},
	KindLock:      {"ttl", "max_hold", "clock_skew_tolerance"},
	KindList:      {"max_wait", "pop_side"},
	KindStream:    {"max_hold", "max_deliveries"},
}

// kindSpecific lists every kind-specific field, in the order they are
// checked.
var kindSpecific = []string{"ttl", "heartbeat_interval", "max_hold", "stale_after", "clock_skew_tolerance", "score_unit", "score", "window", "max_wait", "pop_side", "max_deliveries"}

func kindList() string {
	names := make([]string, len(Kinds))
	for i, k := range Kinds {
		names[i] = string(k)
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

func validateFamily(f *Family, path string, set present) (*regexp.Regexp, error) {
	switch {
	case f.Name == "":
		return nil, fmt.Errorf("%s.name: required", path)
	case !validName.MatchString(f.Name):
		return nil, fmt.Errorf("%s.name: invalid name %q (want letters, digits, _, - and . only)", path, f.Name)
	}

	allowed, known := kindFields[f.Kind]
	switch {
	case f.Kind == "":
		return nil, fmt.Errorf("%s.kind: required (%s)", path, kindList())
	case !known:
		return nil, fmt.Errorf("%s.kind: unknown kind %q (want %s)", path, f.Kind, kindList())
	}

	if f.Match == "" {
		return nil, fmt.Errorf("%s.match: required", path)
	}
	src, hasStar, err := GlobToRegexp(f.Match)
	if err != nil {
		return nil, fmt.Errorf("%s.match: %v", path, err)
	}
	var re *regexp.Regexp
	if f.User == "" {
		if !hasStar {
			return nil, fmt.Errorf("%s.match: must contain a * (what it matches is the user) unless user is set", path)
		}
		if re, err = regexp.Compile(src); err != nil {
			return nil, fmt.Errorf("%s.match: %s", path, strings.TrimPrefix(err.Error(), "error parsing regexp: "))
		}
	} else {
		if re, err = regexp.Compile(f.User); err != nil {
			return nil, fmt.Errorf("%s.user: invalid regexp: %s", path, strings.TrimPrefix(err.Error(), "error parsing regexp: "))
		}
		if re.NumSubexp() < 1 {
			return nil, fmt.Errorf("%s.user: has no capture group (its first group is the user)", path)
		}
	}

	limitRequired := f.Kind == KindSlotSet || f.Kind == KindCounter
	switch {
	case !set["limit"] && limitRequired:
		return nil, fmt.Errorf("%s.limit: required for kind %s", path, f.Kind)
	case set["limit"] && f.Limit < 1:
		return nil, fmt.Errorf("%s.limit: must be >= 1", path)
	}
	for _, name := range kindSpecific {
		if set[name] && !slices.Contains(allowed, name) {
			return nil, fmt.Errorf("%s.%s: not used by kind %s", path, name, f.Kind)
		}
	}

	switch f.Kind {
	case KindCounter:
		return re, nil
	case KindRateLimit:
		switch {
		case !set["window"]:
			return nil, fmt.Errorf("%s.window: required for kind ratelimit (the fixed window the key's TTL is set to)", path)
		case f.Window <= 0:
			return nil, fmt.Errorf("%s.window: must be > 0", path)
		}
		return re, nil
	case KindLock:
		switch {
		case !set["ttl"]:
			return nil, fmt.Errorf("%s.ttl: required for kind lock (the lease the holder sets with PX)", path)
		case f.TTL <= 0:
			return nil, fmt.Errorf("%s.ttl: must be > 0", path)
		case !set["max_hold"]:
			return nil, fmt.Errorf("%s.max_hold: required for kind lock", path)
		case f.MaxHold <= f.TTL:
			return nil, fmt.Errorf("%s.max_hold: must be longer than ttl", path)
		case f.ClockSkewTolerance < 0:
			return nil, fmt.Errorf("%s.clock_skew_tolerance: must be >= 0", path)
		}
		return re, nil
	case KindList:
		switch {
		case !set["max_wait"]:
			return nil, fmt.Errorf("%s.max_wait: required for kind list (how long an element may stay next before the queue counts as stalled)", path)
		case f.MaxWait <= 0:
			return nil, fmt.Errorf("%s.max_wait: must be > 0", path)
		}
		switch f.PopSide {
		case PopRight, PopLeft:
		default:
			return nil, fmt.Errorf("%s.pop_side: unknown side %q (want right or left)", path, f.PopSide)
		}
		return re, nil
	case KindStream:
		switch {
		case !set["max_hold"]:
			return nil, fmt.Errorf("%s.max_hold: required for kind stream (how long an entry may stay pending)", path)
		case f.MaxHold <= 0:
			return nil, fmt.Errorf("%s.max_hold: must be > 0", path)
		case f.MaxDeliveries < 1:
			return nil, fmt.Errorf("%s.max_deliveries: must be >= 1", path)
		}
		return re, nil
	}

	switch {
	case !set["ttl"]:
		return nil, fmt.Errorf("%s.ttl: required for kind slotset", path)
	case f.TTL <= 0:
		return nil, fmt.Errorf("%s.ttl: must be > 0", path)
	case !set["heartbeat_interval"]:
		return nil, fmt.Errorf("%s.heartbeat_interval: required for kind slotset", path)
	case f.HeartbeatInterval <= 0:
		return nil, fmt.Errorf("%s.heartbeat_interval: must be > 0", path)
	case f.HeartbeatInterval >= f.TTL:
		return nil, fmt.Errorf("%s.heartbeat_interval: must be shorter than ttl", path)
	case !set["max_hold"]:
		return nil, fmt.Errorf("%s.max_hold: required for kind slotset", path)
	case f.MaxHold <= f.TTL:
		return nil, fmt.Errorf("%s.max_hold: must be longer than ttl", path)
	case f.StaleAfter <= f.HeartbeatInterval:
		return nil, fmt.Errorf("%s.stale_after: must be longer than heartbeat_interval", path)
	case f.StaleAfter >= f.TTL && !set["stale_after"]:
		return nil, fmt.Errorf("%s.stale_after: the default, 2 x heartbeat_interval (%v), is not shorter than ttl; set stale_after between heartbeat_interval and ttl", path, f.StaleAfter)
	case f.StaleAfter >= f.TTL:
		return nil, fmt.Errorf("%s.stale_after: must be shorter than ttl (a member expires before it could be stale)", path)
	case f.ClockSkewTolerance < 0:
		return nil, fmt.Errorf("%s.clock_skew_tolerance: must be >= 0", path)
	}
	switch f.ScoreUnit {
	case ScoreUnitMillis, ScoreUnitSeconds:
	default:
		return nil, fmt.Errorf("%s.score_unit: unknown unit %q (want ms or s)", path, f.ScoreUnit)
	}
	switch f.Score {
	case ScoreExpiry, ScoreHeartbeat:
	default:
		return nil, fmt.Errorf("%s.score: unknown score mode %q (want expiry or heartbeat)", path, f.Score)
	}
	return re, nil
}
