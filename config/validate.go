package config

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"time"
)

// Defaults, as documented in DESIGN.md.
const (
	DefaultMode               = ModeStandalone
	DefaultReadFrom           = ReadFromPrimary
	DefaultDialTimeout        = 5 * time.Second
	DefaultInterval           = 5 * time.Second
	MinInterval               = 10 * time.Millisecond
	DefaultTimeout            = 30 * time.Second
	DefaultScanCount          = 1000
	DefaultWindow             = time.Minute
	DefaultMaxKeysPerSecond   = 0
	DefaultMaxMembersPerKey   = 1000
	DefaultDiscovery          = DiscoveryScan
	DefaultFullScanInterval   = 5 * time.Minute
	DefaultTrackChanges       = true
	DefaultRedisCPUShare      = 0.1
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
	if !p.sampling["track_changes"] {
		s.TrackChanges = DefaultTrackChanges
	}
	if !p.sampling["redis_cpu_share"] {
		s.RedisCPUShare = DefaultRedisCPUShare
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
		case KindBullMQ, KindSidekiq, KindRQ, KindCelery:
			frameworkDefaults(f, set)
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
	if c.Release != nil {
		abs(&c.Release.PasswordFile)
	}
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
			"prefix":               f.Prefix != "",
			"queues":               f.Queues != nil,
			"visibility_timeout":   f.VisibilityTimeout != 0,
		})
	}
	_, err := validate(c, p)
	return err
}

// validate checks c, whose defaults are applied, and returns the compiled
// user regexps. It reads no file and parses no Redis URL beyond its
// shape: the connection layer (redisconn.Check) does both.
func validate(c *Config, p *presence) ([]*regexp.Regexp, error) {
	if len(c.Families) == 0 {
		return nil, errors.New("families: at least one family is required")
	}
	if err := validateRedis(&c.Redis); err != nil {
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
	if err := validateRelease(c.Release, &c.Redis); err != nil {
		return nil, err
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

func validateSampling(s *Sampling) error {
	switch {
	case s.Interval <= 0:
		return errors.New("sampling.interval: must be > 0")
	case s.Interval < MinInterval:
		// Each sweep sends a few commands outside the read pace (TIME,
		// INFO, CONFIG GET with notify): at 1ns, back-to-back sweeps of
		// an idle family sent Redis thousands a second.
		return fmt.Errorf("sampling.interval: %v is below %v; each sweep sends Redis a few commands outside the read pace", s.Interval, MinInterval)
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
	case !(s.RedisCPUShare >= 0 && s.RedisCPUShare <= 1):
		return errors.New("sampling.redis_cpu_share: must be between 0 and 1, a share of one Redis core (0 = no CPU pacing)")
	}
	i, n, err := ParseShard(s.Shard)
	if err != nil {
		return err
	}
	s.ShardIndex, s.ShardCount = i, n
	return nil
}
