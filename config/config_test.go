package config

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// badConfigs pairs every testdata/bad-*.yml with the exact error it gives.
var badConfigs = map[string]string{
	// Decoding.
	"bad-empty.yml":             "families: at least one family is required",
	"bad-no-families.yml":       "families: at least one family is required",
	"bad-not-mapping.yml":       "the file must be a mapping (redis, sampling, leaks, families), not a list",
	"bad-multi-doc.yml":         "the file holds more than one YAML document",
	"bad-yaml-syntax.yml":       "yaml: line 1: did not find expected ',' or ']'",
	"bad-families-not-list.yml": "families: must be a list, not a mapping",
	"bad-unknown-field.yml":     `families[0]: unknown field "limt" (did you mean "limit"?)`,
	"bad-unknown-top-level.yml": `unknown field "familes" (did you mean "families"?)`,
	"bad-duplicate-key.yml":     "families[0].limit: defined more than once",
	"bad-duration.yml":          `sampling.window: invalid duration "abc"`,
	"bad-duration-no-unit.yml":  `families[0].ttl: invalid duration "120"`,
	"bad-integer.yml":           `sampling.scan_count: invalid integer "lots"`,

	// redis.
	"bad-password.yml":                     "redis.password: passwords are not accepted in the config file; put it in a file named by redis.password_file, or in the REDIS_PASSWORD environment variable",
	"bad-addr-url-password.yml":            "redis.addr: passwords are not accepted in the config file; put it in a file named by redis.password_file, or in the REDIS_PASSWORD environment variable",
	"bad-addr-password-no-scheme.yml":      "redis.addr: passwords are not accepted in the config file; put it in a file named by redis.password_file, or in the REDIS_PASSWORD environment variable",
	"bad-addr-invalid.yml":                 `redis.addr: invalid address "localhost" (want host:port, or a redis:// or rediss:// URL)`,
	"bad-mode.yml":                         `redis.mode: unknown mode "foo" (want standalone, cluster or sentinel)`,
	"bad-standalone-no-addr.yml":           "redis.addr: required in standalone mode",
	"bad-standalone-addrs.yml":             "redis.addrs: only used in cluster and sentinel modes; use redis.addr",
	"bad-cluster-no-addrs.yml":             "redis.addrs: required in cluster mode",
	"bad-cluster-db.yml":                   "redis.db: must be 0 in cluster mode (a cluster has only database 0)",
	"bad-sentinel-no-master.yml":           "redis.master_name: required in sentinel mode",
	"bad-read-from.yml":                    `redis.read_from: unknown value "secondary" (want primary or replica)`,
	"bad-read-from-replica-standalone.yml": "redis.read_from: replica needs mode cluster or sentinel; in standalone mode there is only the server at redis.addr",
	"bad-tls-cert-without-key.yml":         "redis.tls.key_file: required when cert_file is set",
	// Release.
	"bad-release-same-user.yml":   `release.username: must differ from the sampling user "exporter", which stays read-only`,
	"bad-release-password.yml":    "release.password: passwords are not accepted in the config file; put it in a file named by release.password_file",
	"bad-release-no-username.yml": "release.username: required (the Redis ACL user that releases write as)",

	// sampling and leaks.
	"bad-interval.yml":            "sampling.interval: must be > 0",
	"bad-interval-tiny.yml":       "sampling.interval: 1ns is below 10ms; each sweep sends Redis a few commands outside the read pace",
	"bad-timeout.yml":             "sampling.timeout: must be > 0",
	"bad-window.yml":              "sampling.window: must be >= interval",
	"bad-scan-count.yml":          "sampling.scan_count: must be >= 1",
	"bad-max-keys-per-second.yml": "sampling.max_keys_per_second: must be >= 0 (0 = unbounded)",
	"bad-max-members-per-key.yml": "sampling.max_members_per_key: must be >= 1",
	"bad-discovery.yml":           `sampling.discovery: unknown discovery "poll" (want scan or notify)`,
	"bad-full-scan-interval.yml":  "sampling.full_scan_interval: must be >= interval",
	"bad-redis-cpu-share.yml":     "sampling.redis_cpu_share: must be between 0 and 1, a share of one Redis core (0 = no CPU pacing)",
	"bad-shard.yml":               `sampling.shard: want i/n with 0 <= i < n <= 16384, such as 0/3, not "3/3"`,
	"bad-shard-format.yml":        `sampling.shard: want i/n with 0 <= i < n <= 16384, such as 0/3, not "two"`,
	"bad-floor-window.yml":        "leaks.floor_window: must be >= sampling.window",
	"bad-per-user-series.yml":     "leaks.per_user_series: must be >= 0",

	// families.
	"bad-name-missing.yml":           "families[0].name: required",
	"bad-name-invalid.yml":           `families[0].name: invalid name "my streams" (want letters, digits, _, - and . only)`,
	"bad-duplicate-name.yml":         `families[1].name: duplicate name "streams" (also families[0])`,
	"bad-kind.yml":                   `families[0].kind: unknown kind "semaphore" (want slotset, counter, ratelimit, lock, list, stream, bullmq, sidekiq, rq or celery)`,
	"bad-ratelimit-window.yml":       "families[0].window: required for kind ratelimit (the fixed window the key's TTL is set to)",
	"bad-lock-ttl.yml":               "families[0].ttl: required for kind lock (the lease the holder sets with PX)",
	"bad-lock-heartbeat.yml":         "families[0].heartbeat_interval: not used by kind lock",
	"bad-list-max-wait.yml":          "families[0].max_wait: required for kind list (how long an element may stay next before the queue counts as stalled)",
	"bad-list-pop-side.yml":          `families[0].pop_side: unknown side "middle" (want right or left)`,
	"bad-stream-max-hold.yml":        "families[0].max_hold: required for kind stream (how long an entry may stay pending)",
	"bad-stream-deliveries.yml":      "families[0].max_deliveries: must be >= 1",
	"bad-framework-match.yml":        "families[0].match: not used by kind bullmq (the queue is its unit: its queues are found under prefix)",
	"bad-framework-user.yml":         "families[0].user: not used by kind rq (the queue is its unit: its queues are found under prefix)",
	"bad-framework-limit.yml":        "families[0].limit: not used by kind sidekiq (the queue is its unit: its queues are found under prefix)",
	"bad-framework-prefix.yml":       `families[0].prefix: "bull*" holds a SCAN pattern character (*, ?, [, ] or \)`,
	"bad-framework-prefix-empty.yml": "families[0].prefix: must not be empty",
	"bad-framework-queues.yml":       `families[0].queues[2]: duplicate queue "mail" (also queues[0])`,
	"bad-framework-queue-empty.yml":  "families[0].queues[1]: must not be empty",
	"bad-framework-max-wait.yml":     "families[0].max_wait: must be > 0",
	"bad-framework-max-hold.yml":     "families[0].max_hold: must be > 0",
	"bad-celery-visibility.yml":      "families[0].visibility_timeout: must be > 0",
	"bad-celery-max-hold.yml":        "families[0].max_hold: not used by kind celery",
	"bad-bullmq-visibility.yml":      "families[0].visibility_timeout: not used by kind bullmq",
	"bad-score-mode.yml":             `families[0].score: unknown score mode "refresh" (want expiry or heartbeat)`,
	"bad-family-floor-window.yml":    "families[0].floor_window: must be 0 or >= sampling.window",
	"bad-match-no-star.yml":          "families[0].match: must contain a * (what it matches is the user) unless user is set",
	"bad-match-class.yml":            "families[0].match: unterminated [ class",
	"bad-user-regexp.yml":            "families[0].user: invalid regexp: missing closing ): `^joishi:streams:(.*`",
	"bad-user-no-group.yml":          "families[0].user: has no capture group (its first group is the user)",
	"bad-limit-missing.yml":          "families[0].limit: required for kind slotset",
	"bad-limit.yml":                  "families[0].limit: must be >= 1",
	"bad-ttl-missing.yml":            "families[0].ttl: required for kind slotset",
	"bad-heartbeat.yml":              "families[0].heartbeat_interval: must be shorter than ttl",
	"bad-max-hold.yml":               "families[0].max_hold: must be longer than ttl",
	"bad-stale-after-short.yml":      "families[0].stale_after: must be longer than heartbeat_interval",
	"bad-stale-after-ttl.yml":        "families[0].stale_after: must be shorter than ttl (a member expires before it could be stale)",
	"bad-stale-after-default.yml":    "families[0].stale_after: the default, 2 x heartbeat_interval (1m0s), is not shorter than ttl; set stale_after between heartbeat_interval and ttl",
	"bad-clock-skew.yml":             "families[0].clock_skew_tolerance: must be >= 0",
	"bad-score-unit.yml":             `families[0].score_unit: unknown unit "us" (want ms or s)`,
	"bad-counter-ttl.yml":            "families[1].ttl: not used by kind counter",
	"bad-counter-score-unit.yml":     "families[0].score_unit: not used by kind counter",
}

// secrets that bad configs hold and that no error may echo.
var secrets = []string{"hunter2", "s3cr3t-pw"}

func TestBadConfigs(t *testing.T) {
	files, err := filepath.Glob("testdata/bad-*.yml")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range files {
		name := filepath.Base(f)
		seen[name] = true
		t.Run(name, func(t *testing.T) {
			want, ok := badConfigs[name]
			if !ok {
				t.Fatalf("%s has no expected error in badConfigs", name)
			}
			c, err := Load(f)
			if err == nil {
				t.Fatalf("Load(%s) = %+v, want error %q", name, c, want)
			}
			if c != nil {
				t.Errorf("Load(%s) returned a config with its error", name)
			}
			if got := err.Error(); got != want {
				t.Errorf("Load(%s) error\n got: %s\nwant: %s", name, got, want)
			}
			for _, s := range secrets {
				if strings.Contains(err.Error(), s) {
					t.Errorf("Load(%s) error echoes the secret %q: %s", name, s, err)
				}
			}
			// Parse gives the same errors: they never depend on where the file is.
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Parse(b); err == nil || err.Error() != want {
				t.Errorf("Parse(%s) error = %v, want %q", name, err, want)
			}
		})
	}
	for name := range badConfigs {
		if !seen[name] {
			t.Errorf("badConfigs names %s, which is not in testdata", name)
		}
	}
}

func TestGoodDefaults(t *testing.T) {
	c, err := Load("testdata/good.yml")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.Families[0].UserRegexp.String(), `(?s)^joishi:streams:(.*)$`; got != want {
		t.Errorf("families[0] UserRegexp = %s, want %s", got, want)
	}
	if got, want := c.Families[1].UserRegexp.String(), `(?s)^joishi:streams-legacy:(.*)$`; got != want {
		t.Errorf("families[1] UserRegexp = %s, want %s", got, want)
	}
	c.Families[0].UserRegexp, c.Families[1].UserRegexp = nil, nil
	want := &Config{
		Redis: Redis{
			Addr:        "127.0.0.1:6379",
			Mode:        ModeStandalone,
			ReadFrom:    ReadFromPrimary,
			DialTimeout: 5 * time.Second,
		},
		Sampling: Sampling{
			Interval:         5 * time.Second,
			Timeout:          30 * time.Second,
			ScanCount:        1000,
			Window:           time.Minute,
			MaxKeysPerSecond: 0,
			MaxMembersPerKey: 1000,
			Discovery:        DiscoveryScan,
			FullScanInterval: 5 * time.Minute,
			TrackChanges:     true,
			RedisCPUShare:    0.1,
			ShardCount:       1,
		},
		Leaks: Leaks{
			FloorWindow:   30 * time.Minute,
			PerUserSeries: 500,
		},
		Families: []Family{
			{
				Name:               "streams",
				Kind:               KindSlotSet,
				Match:              "joishi:streams:*",
				Limit:              3,
				TTL:                120 * time.Second,
				HeartbeatInterval:  20 * time.Second,
				MaxHold:            15 * time.Minute,
				StaleAfter:         40 * time.Second, // 2 x heartbeat_interval
				ClockSkewTolerance: 5 * time.Second,
				ScoreUnit:          "ms",
				Score:              ScoreExpiry,
				FloorWindow:        30 * time.Minute, // leaks.floor_window
			},
			{
				Name:        "streams_legacy",
				Kind:        KindCounter,
				Match:       "joishi:streams-legacy:*",
				Limit:       3,
				FloorWindow: 30 * time.Minute,
			},
		},
	}
	// What Parse compiles is checked by TestUserOf and TestGlobToRegexp.
	for i := range want.Families {
		f, g := &want.Families[i], &c.Families[i]
		f.UserRegexp, f.MatchRegexp, f.shape = g.UserRegexp, g.MatchRegexp, g.shape
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("Load(good.yml)\n got: %+v\nwant: %+v", c, want)
	}
}

func TestGoodExplicit(t *testing.T) {
	c, err := Load("testdata/good-explicit.yml")
	if err != nil {
		t.Fatal(err)
	}
	r := c.Redis
	if r.Addr != "redis.internal:6380" || r.Username != "exporter" || r.DB != 2 || r.DialTimeout != 2*time.Second {
		t.Errorf("redis = %+v", r)
	}
	// Relative file names are relative to the config file.
	if want := filepath.Join("testdata", "secrets", "redis-password"); r.PasswordFile != want {
		t.Errorf("password_file = %q, want %q", r.PasswordFile, want)
	}
	wantTLS := &TLS{
		CAFile:     filepath.Join("testdata", "tls", "ca.pem"),
		CertFile:   filepath.Join("testdata", "tls", "client.pem"),
		KeyFile:    filepath.Join("testdata", "tls", "client-key.pem"),
		ServerName: "redis.internal",
	}
	if !reflect.DeepEqual(r.TLS, wantTLS) {
		t.Errorf("tls = %+v, want %+v", r.TLS, wantTLS)
	}
	wantSampling := Sampling{
		Interval:         2 * time.Second,
		Timeout:          10 * time.Second,
		ScanCount:        500,
		Window:           30 * time.Second,
		MaxKeysPerSecond: 20000,
		MaxMembersPerKey: 50,
		Discovery:        DiscoveryNotify,
		FullScanInterval: 10 * time.Minute,
		TrackChanges:     false,
		RedisCPUShare:    0.1,
		ShardCount:       1,
	}
	if c.Sampling != wantSampling {
		t.Errorf("sampling = %+v, want %+v", c.Sampling, wantSampling)
	}
	if want := (Leaks{FloorWindow: time.Hour, PerUserSeries: 0}); c.Leaks != want {
		t.Errorf("leaks = %+v, want %+v (an explicit 0 stays 0)", c.Leaks, want)
	}
	if len(c.Families) != 2 {
		t.Fatalf("got %d families, want 2", len(c.Families))
	}
	for i, f := range c.Families {
		if f.TTL != 120*time.Second || f.HeartbeatInterval != 20*time.Second || f.MaxHold != 15*time.Minute ||
			f.StaleAfter != 50*time.Second || f.ClockSkewTolerance != 0 || f.ScoreUnit != ScoreUnitSeconds {
			t.Errorf("families[%d] = %+v", i, f)
		}
	}
	// The second family merges the first (<<: *slots) and overrides some keys.
	jobs := c.Families[1]
	if jobs.Name != "jobs" || jobs.Limit != 1 || jobs.User != "" || jobs.Match != "jobs:*:slots" {
		t.Errorf("families[1] = %+v", jobs)
	}
	if u, ok := jobs.UserOf("jobs:u7:slots"); !ok || u != "u7" {
		t.Errorf("families[1].UserOf = %q, %v; want u7", u, ok)
	}
	if u, ok := c.Families[0].UserOf("joishi:streams:{u1}"); !ok || u != "u1" {
		t.Errorf("families[0].UserOf = %q, %v; want u1", u, ok)
	}
}

func TestExamplesLoad(t *testing.T) {
	files, err := filepath.Glob("../examples/*.yml")
	if err != nil {
		t.Fatal(err)
	}
	frameworks, err := filepath.Glob("../examples/frameworks/*.yml")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, frameworks...)
	if len(files) < 3 {
		t.Fatalf("found %d example configs, want at least 3", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			var o Overrides
			if filepath.Base(f) == "container.yml" {
				o.Addr = "127.0.0.1:6379" // the image's REDIS_ADDR
			}
			c, err := LoadWith(f, o)
			if err != nil {
				t.Fatalf("Load(%s): %v", f, err)
			}
			if err := c.Validate(); err != nil {
				t.Errorf("Validate after Load(%s): %v", f, err)
			}
		})
	}
}

// TestFamilyFlagValues: a --family field's value is a YAML scalar where it
// is one, and the text given where YAML would read it as something else.
func TestFamilyFlagValues(t *testing.T) {
	for _, tc := range []struct {
		val  string
		want any
	}{
		{"3", 3},
		{"90s", "90s"},
		{"true", true},
		{`"quoted"`, "quoted"},
		{"[a-z]+:(.*)", "[a-z]+:(.*)"},
		{"&x (.*)", "&x (.*)"},
		{"*alias", "*alias"},
		{"{a: b}", "{a: b}"},
		{"~", "~"},
		{"", ""},
	} {
		f, err := ParseFamilyFlag("s=counter:c:*,user=" + tc.val)
		if err != nil {
			t.Fatalf("%q: %v", tc.val, err)
		}
		if got := f["user"]; got != tc.want {
			t.Errorf("user=%s: %#v, want %#v", tc.val, got, tc.want)
		}
	}
	if _, err := ParseFamilyFlag("s=counter:c:*,user=^c:([a-z]{1,3})$"); err == nil || !strings.Contains(err.Error(), `"3})$" is not field=value (a value cannot hold a comma`) {
		t.Errorf("a comma in a value: %v", err)
	}
}

// TestFamilyFlagFrameworks: a queue framework's --family takes its prefix
// where the other kinds take a pattern, and a queue per queues=NAME.
func TestFamilyFlagFrameworks(t *testing.T) {
	for _, tc := range []struct {
		flag, prefix string
		queues       []string
		err          string
	}{
		{flag: "b=bullmq", prefix: "bull"},
		{flag: "b=bullmq:", prefix: "bull"},
		{flag: "b=bullmq,", err: `--family "b=bullmq,": "" is not field=value`},
		{flag: "b=bullmq:myapp,queues=mail,queues=sms", prefix: "myapp", queues: []string{"mail", "sms"}},
		{flag: "q=sidekiq"},
		{flag: "q=sidekiq:app,max_wait=1m", prefix: "app"},
		{flag: "r=rq,queues=default", prefix: "rq", queues: []string{"default"}},
		{flag: "c=celery"},
		{flag: "c=celery:x", err: `--family "c=celery:x".prefix: not used by kind celery`},
		{flag: "b=bullmq:a,prefix=b", err: `--family "b=bullmq:a,prefix=b": prefix is given by name=kind:prefix`},
		{flag: "b=bullmq,match=x", err: `--family "b=bullmq,match=x": match is given by name=kind:pattern`},
		{flag: "b=bullmq,limit=3", err: `--family "b=bullmq,limit=3".limit: not used by kind bullmq`},
		{flag: "s=slotset,limit=3", err: `--family "s=slotset,limit=3": want name=kind:pattern`},
		{flag: "s=bucket", err: `--family "s=bucket": unknown kind "bucket"`},
	} {
		c, err := ParseWith(nil, Overrides{Addr: "h:1", Families: []string{tc.flag}})
		if tc.err != "" {
			if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
				t.Errorf("%s: %v, want %q", tc.flag, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.flag, err)
			continue
		}
		f := c.Families[0]
		if f.Prefix != tc.prefix || !slices.Equal(f.Queues, tc.queues) {
			t.Errorf("%s: prefix %q, queues %q; want %q, %q", tc.flag, f.Prefix, f.Queues, tc.prefix, tc.queues)
		}
	}
}

// TestLiteralKey: a match without glob characters names one key.
func TestLiteralKey(t *testing.T) {
	for match, want := range map[string]bool{"rq:queues": true, "queues": true, "a:*": false, "a?": false, "a[bc]": false, `a\*`: false, "": false} {
		f := Family{Match: match}
		if k, ok := f.LiteralKey(); ok != want || ok && k != match {
			t.Errorf("LiteralKey of %q: %q, %v; want %v", match, k, ok, want)
		}
	}
}

// TestEnvironmentNamedInErrors: an error about a redis field that an
// environment variable set names the variable, not the config file.
func TestEnvironmentNamedInErrors(t *testing.T) {
	fam := []string{"s=counter:c:*"}
	for _, tc := range []struct {
		o    Overrides
		file string
		want string
	}{
		{Overrides{Addr: "redis://:pw@h:1", Families: fam}, "", "REDIS_ADDR: passwords are not accepted here; put it in a file named by redis.password_file"},
		{Overrides{Addr: "http://h:1", Families: fam}, "", `REDIS_ADDR: unsupported URL scheme "http"`},
		// From the file, the file is named.
		{Overrides{Families: fam}, "redis: {addr: 'redis://:pw@h:1'}\n", "redis.addr: passwords are not accepted in the config file"},
	} {
		_, err := ParseWith([]byte(tc.file), tc.o)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%+v over %q: %v, want %q", tc.o, tc.file, err, tc.want)
		}
	}
}

func TestParseDetails(t *testing.T) {
	const fam = "families: [{name: a, kind: counter, match: 'a:*', limit: 1}]\n"
	for _, tc := range []struct {
		name, yaml, err string
	}{
		{"null section is empty", "redis: {addr: 'h:1'}\nsampling:\n" + fam, ""},
		{"null field is unset", "redis: {addr: 'h:1'}\nleaks: {per_user_series: ~}\n" + fam, ""},
		{"quoted int is not an int", "redis: {addr: 'h:1', db: '1'}\n" + fam, `redis.db: invalid integer "1"`},
		{"list for a string", "redis: {addr: [a]}\n" + fam, "redis.addr: must be a string, not a list"},
		{"addrs entry", "redis: {mode: cluster, addrs: ['h:1', {a: b}]}\n" + fam, "redis.addrs[1]: must be a string, not a mapping"},
		{"addrs entry host:port", "redis: {mode: cluster, addrs: ['h:1', 'redis://h:2']}\n" + fam, `redis.addrs[1]: invalid address "redis://h:2" (want host:port; URLs only go in redis.addr)`},
		{"addrs entry password", "redis: {mode: sentinel, master_name: m, addrs: ['u:s3cr3t-pw@h:1']}\n" + fam, "redis.addrs[0]: " + errPasswordInConfig},
		{"URL password with odd characters", "redis: {addr: 'redis://u:s3cr3t-pw/x?#@h:1'}\n" + fam, "redis.addr: " + errPasswordInConfig},
		{"URL with a user and no password", "redis: {addr: 'redis://exporter@h:1/3'}\n" + fam, "redis.addr: " + errPasswordInConfig},
		{"bare secret before @", "redis: {addr: 's3cr3t@h:1'}\n" + fam, "redis.addr: " + errPasswordInConfig},
		{"URL scheme", "redis: {addr: 'http://h:1'}\n" + fam, `redis.addr: unsupported URL scheme "http" (want redis or rediss)`},
		{"cluster with addr", "redis: {mode: cluster, addr: 'h:1'}\n" + fam, ""},
		{"cluster with addr and addrs", "redis: {mode: cluster, addr: 'h:1', addrs: ['h:2']}\n" + fam, "redis.addr: set redis.addr or redis.addrs, not both"},
		{"sentinel with addr", "redis: {mode: sentinel, addr: 'h:1', master_name: m}\n" + fam, "redis.addr: not used in sentinel mode; list the sentinels in redis.addrs"},
		{"master_name outside sentinel", "redis: {addr: 'h:1', master_name: m}\n" + fam, "redis.master_name: only used in sentinel mode"},
		{"replica in cluster", "redis: {mode: cluster, addrs: ['h:1'], read_from: replica}\n" + fam, ""},
		{"Password capitalised", "redis: {addr: 'h:1', Password: x}\n" + fam, "redis.Password: " + errPasswordInConfig},
		{"tls bool", "redis: {addr: 'h:1', tls: {insecure_skip_verify: yes please}}\n" + fam, `redis.tls.insecure_skip_verify: invalid boolean "yes please" (want true or false)`},
		{"tls unknown", "redis: {addr: 'h:1', tls: {ca_flie: x}}\n" + fam, `redis.tls: unknown field "ca_flie" (did you mean "ca_file"?)`},
		{"unknown far from anything", "redis: {addr: 'h:1', zzzzzzzz: 1}\n" + fam, `redis: unknown field "zzzzzzzz"`},
		{"family not a mapping", "redis: {addr: 'h:1'}\nfamilies: [x]\n", "families[0]: must be a mapping, not a string"},
		{"non-string key", "redis: {addr: 'h:1', [a]: b}\n" + fam, "redis: field names must be strings, not a list"},
		{"bad merge", "redis: {addr: 'h:1', <<: 3}\n" + fam, "redis: << must merge a mapping or a list of mappings, not an integer"},
		{"counter ttl 0 is still set", "redis: {addr: 'h:1'}\nfamilies: [{name: a, kind: counter, match: 'a:*', limit: 1, ttl: 0s}]\n", "families[0].ttl: not used by kind counter"},
		{"kind missing", "redis: {addr: 'h:1'}\nfamilies: [{name: a, match: 'a:*', limit: 1}]\n", "families[0].kind: required (slotset, counter, ratelimit, lock, list, stream, bullmq, sidekiq, rq or celery)"},
		{"no star but user", "redis: {addr: 'h:1'}\nfamilies: [{name: a, kind: counter, match: 'a:b', user: '^(a):b$', limit: 1}]\n", ""},
		{"escaped star is no star", "redis: {addr: 'h:1'}\nfamilies: [{name: a, kind: counter, match: 'a:\\*', limit: 1}]\n", "families[0].match: must contain a * (what it matches is the user) unless user is set"},
		{"dial_timeout", "redis: {addr: 'h:1', dial_timeout: 0s}\n" + fam, "redis.dial_timeout: must be > 0"},
		{"negative db", "redis: {addr: 'h:1', db: -1}\n" + fam, "redis.db: must be >= 0"},
		{"full_scan_interval ignored in scan mode", "redis: {addr: 'h:1'}\nsampling: {full_scan_interval: 1s}\n" + fam, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.yaml))
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("Parse: %v", err)
			case tc.err != "" && err == nil:
				t.Fatalf("Parse = %+v, want error %q", c, tc.err)
			case tc.err != "" && err.Error() != tc.err:
				t.Fatalf("Parse error\n got: %s\nwant: %s", err, tc.err)
			}
			if err != nil && strings.Contains(err.Error(), "s3cr3t-pw") {
				t.Errorf("error echoes the secret: %s", err)
			}
		})
	}
}

// TestDecoderKnowsEveryField guards against a field added to the types but
// not to the decoder: every yaml tag must be a known key.
func TestDecoderKnowsEveryField(t *testing.T) {
	base := map[string]string{
		"":             "%s: [[1]]\nfamilies: [{name: a, kind: counter, match: 'a:*', limit: 1}]\n",
		"redis.":       "redis: {%s: [[1]]}\nfamilies: [{name: a, kind: counter, match: 'a:*', limit: 1}]\n",
		"redis.tls.":   "redis: {addr: 'h:1', tls: {%s: [[1]]}}\nfamilies: [{name: a, kind: counter, match: 'a:*', limit: 1}]\n",
		"sampling.":    "redis: {addr: 'h:1'}\nsampling: {%s: [[1]]}\nfamilies: [{name: a, kind: counter, match: 'a:*', limit: 1}]\n",
		"leaks.":       "redis: {addr: 'h:1'}\nleaks: {%s: [[1]]}\nfamilies: [{name: a, kind: counter, match: 'a:*', limit: 1}]\n",
		"release.":     "redis: {addr: 'h:1'}\nrelease: {%s: [[1]]}\nfamilies: [{name: a, kind: counter, match: 'a:*', limit: 1}]\n",
		"families[0].": "redis: {addr: 'h:1'}\nfamilies: [{%s: [[1]]}]\n",
	}
	for prefix, typ := range map[string]reflect.Type{
		"":             reflect.TypeFor[Config](),
		"redis.":       reflect.TypeFor[Redis](),
		"redis.tls.":   reflect.TypeFor[TLS](),
		"sampling.":    reflect.TypeFor[Sampling](),
		"leaks.":       reflect.TypeFor[Leaks](),
		"release.":     reflect.TypeFor[Release](),
		"families[0].": reflect.TypeFor[Family](),
	} {
		for i := range typ.NumField() {
			tag := typ.Field(i).Tag.Get("yaml")
			if tag == "-" || !typ.Field(i).IsExported() {
				continue
			}
			_, err := Parse([]byte(strings.ReplaceAll(base[prefix], "%s", tag)))
			if err == nil || !strings.HasPrefix(err.Error(), prefix+tag) || strings.Contains(err.Error(), "unknown field") {
				t.Errorf("%s%s: got error %v, want a type error for that field", prefix, tag, err)
			}
		}
	}
}

func TestValidate(t *testing.T) {
	c, err := Load("testdata/good.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	c.Families[0].HeartbeatInterval = c.Families[0].TTL
	if err, want := c.Validate(), "families[0].heartbeat_interval: must be shorter than ttl"; err == nil || err.Error() != want {
		t.Errorf("Validate = %v, want %q", err, want)
	}
	c.Families[0].HeartbeatInterval = 20 * time.Second
	c.Families[1].TTL = time.Second
	if err, want := c.Validate(), "families[1].ttl: not used by kind counter"; err == nil || err.Error() != want {
		t.Errorf("Validate = %v, want %q", err, want)
	}
}

func TestUserOf(t *testing.T) {
	for _, tc := range []struct {
		match, user, key string
		want             string // "" = no user
	}{
		// Derived from match: the first * is the user.
		{"joishi:streams:*", "", "joishi:streams:u1", "u1"},
		{"joishi:streams:*", "", "joishi:streams:{u1}", "{u1}"},
		{"joishi:streams:*", "", "joishi:streams:", ""}, // empty capture
		{"joishi:streams:*", "", "joishi:other:u1", ""},
		{"joishi:streams:*", "", "xjoishi:streams:u1", ""}, // anchored
		{"joishi:streams:*", "", "joishi:streams:a\nb", "a\nb"},
		{"joishi:streams:*", "", "joishi:streams:ü:ß", "ü:ß"},
		{"a.b:*", "", "a.b:u", "u"},
		{"a.b:*", "", "axb:u", ""}, // . is literal
		{"jobs:*:slots", "", "jobs:u7:slots", "u7"},
		{"jobs:*:*", "", "jobs:u7:x:y", "u7:x"}, // the first * is greedy
		{"t?:*", "", "t1:u", "u"},
		{"t?:*", "", "t12:u", ""},
		{"t[0-9]:*", "", "t5:u", "u"},
		{"t[0-9]:*", "", "tx:u", ""},
		{"t[^0-9]:*", "", "tx:u", "u"},
		{"t[9-0]:*", "", "t5:u", "u"}, // reversed range, as Redis
		{`t\*:*`, "", "t*:u", "u"},
		{`t\*:*`, "", "tx:u", ""},
		{`t[\]]:*`, "", "t]:u", "u"},
		{"t[]:*", "", "t]:u", ""}, // [] matches nothing
		{"t[^]:*", "", "t]:u", "u"},
		{"(x)+:*", "", "(x)+:u", "u"},

		// Explicit user regexp, used as given.
		{"joishi:streams:*", `^joishi:streams:\{?([^}]+)\}?$`, "joishi:streams:{u1}", "u1"},
		{"joishi:streams:*", `^joishi:streams:\{?([^}]+)\}?$`, "joishi:streams:u1", "u1"},
		{"joishi:streams:*", `^joishi:streams:\{?([^}]+)\}?$`, "joishi:streams:{}", "{"}, // as the regexp says
		{"joishi:streams:*", `^joishi:streams:\{?([^}]+)\}?$`, "joishi:other:u1", ""},
		{"*", `streams:(\w+)`, "x:streams:u1:y", "u1"}, // not anchored
		{"*", `(a)?b`, "b", ""}, // group did not take part

		// A user id of at most MaxUserBytes, by either path.
		{"joishi:streams:*", "", "joishi:streams:" + strings.Repeat("u", MaxUserBytes), strings.Repeat("u", MaxUserBytes)},
		{"joishi:streams:*", "", "joishi:streams:" + strings.Repeat("u", MaxUserBytes+1), ""},
		{"joishi:streams:*", `^joishi:streams:(.+)$`, "joishi:streams:" + strings.Repeat("u", MaxUserBytes+1), ""},
	} {
		f := &Family{Name: "f", Kind: KindCounter, Match: tc.match, User: tc.user, Limit: 1}
		re, err := validateFamily(f, "families[0]", present{"limit": true})
		if err != nil {
			t.Fatalf("match %q user %q: %v", tc.match, tc.user, err)
		}
		// Hand-built (no UserRegexp) and validated give the same answer.
		for _, re := range []*regexp.Regexp{nil, re} {
			f.UserRegexp = re
			got, ok := f.UserOf(tc.key)
			if ok != (tc.want != "") || got != tc.want {
				t.Errorf("match %q user %q: UserOf(%q) = %q, %v; want %q", tc.match, tc.user, tc.key, got, ok, tc.want)
			}
		}
	}
}

func TestGlobToRegexp(t *testing.T) {
	for _, tc := range []struct{ glob, re string }{
		{"joishi:streams:*", `(?s)^joishi:streams:(.*)$`},
		{"a:*:b:*", `(?s)^a:(.*):b:.*$`},
		{"a?b", `(?s)^a.b$`},
		{"a.b+c", `(?s)^a\.b\+c$`},
		{`a\*b\`, `(?s)^a\*b\\$`},
		{"[abc]", `(?s)^[\x{61}\x{62}\x{63}]$`},
		{"[^a-c]", `(?s)^[^\x{61}-\x{63}]$`},
		{"[c-a]", `(?s)^[\x{61}-\x{63}]$`},
		{`[\]]`, `(?s)^[\x{5d}]$`},
		{"[]", `(?s)^[^\x00-\x{10FFFF}]$`},
		{"[^]", `(?s)^.$`},
	} {
		got, _, err := GlobToRegexp(tc.glob)
		if err != nil || got != tc.re {
			t.Errorf("GlobToRegexp(%q) = %q, %v; want %q", tc.glob, got, err, tc.re)
		}
		if _, err := regexp.Compile(got); err != nil {
			t.Errorf("GlobToRegexp(%q) = %q does not compile: %v", tc.glob, got, err)
		}
	}
	for _, glob := range []string{"[", "a[bc", "[a-]", `[\`, "[^"} {
		if _, _, err := GlobToRegexp(glob); err == nil {
			t.Errorf("GlobToRegexp(%q): no error for an unterminated class", glob)
		}
	}
}

func TestGoodKinds(t *testing.T) {
	c, err := Load("testdata/good-kinds.yml")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Family{}
	for _, f := range c.Families {
		got[f.Name] = f
	}
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"semaphores", got["semaphores"].Score == ScoreHeartbeat && got["semaphores"].StaleAfter == 9*time.Second},
		{"streams", got["streams"].Score == ScoreExpiry},
		{"streams_legacy floor off", got["streams_legacy"].FloorWindow == 0},
		{"api_rate inherits leaks.floor_window", got["api_rate"].FloorWindow == DefaultFloorWindow && got["api_rate"].Window == time.Minute},
		{"jobs_lock skew default", got["jobs_lock"].ClockSkewTolerance == DefaultClockSkewTolerance && got["jobs_lock"].Limit == 0},
		{"mail_queue pops right", got["mail_queue"].PopSide == PopRight && got["mail_queue"].MaxWait == 5*time.Minute},
		{"events max_deliveries", got["events"].MaxDeliveries == 5},
		{"jobs: bullmq defaults", got["jobs"].Prefix == "bull" && got["jobs"].Match == "bull:*:id" && got["jobs"].MaxHold == 30*time.Minute && got["jobs"].Watches("any")},
		{"mailers: prefix and queues", got["mailers"].Match == "{mail}:*:id" && got["mailers"].MaxWait == DefaultFrameworkMaxWait && got["mailers"].Watches("digest") && !got["mailers"].Watches("other")},
		{"sidekiq: no namespace", got["sidekiq_jobs"].Prefix == "" && got["sidekiq_jobs"].Match == "queues" && got["sidekiq_jobs"].MaxHold == DefaultFrameworkMaxHold},
		{"rq: prefix rq", got["rq_jobs"].Match == "rq:queues"},
		{"celery: visibility_timeout", got["celery_tasks"].VisibilityTimeout == 2*time.Hour && got["celery_tasks"].MaxHold == 0},
	} {
		if !tc.ok {
			t.Errorf("%s: not as written or defaulted: %+v", tc.name, got)
		}
	}
	for _, f := range c.Families {
		if f.MatchRegexp == nil || f.UserRegexp == nil {
			t.Errorf("%s: matchers not compiled at load", f.Name)
		}
	}
	// A framework's discovery key names its queue (bullmq) or the set
	// that lists them; a job's own keys are not discovery keys.
	for _, tc := range []struct {
		fam, key, want string
		ok             bool
	}{
		{"jobs", "bull:mail:id", "mail", true},
		{"jobs", "bull:a:b:id", "a:b", true},
		{"mailers", "{mail}:welcome:id", "welcome", true},
		{"sidekiq_jobs", "queues", "queues", true},
		{"rq_jobs", "rq:queues", "rq:queues", true},
		{"celery_tasks", "_kombu.binding.celery", "celery", true},
	} {
		f := got[tc.fam]
		u, ok := f.UserOf(tc.key)
		if ok != tc.ok || u != tc.want || !f.MatchRegexp.MatchString(tc.key) {
			t.Errorf("%s: UserOf(%q) = %q, %v (match %v), want %q", tc.fam, tc.key, u, ok, f.MatchRegexp.MatchString(tc.key), tc.want)
		}
	}
	if err := c.Validate(); err != nil {
		t.Errorf("Validate after Load: %v", err)
	}
}
