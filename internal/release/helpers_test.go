package release

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/redistest"
)

// families covers every kind: slot sets found by their hash-tag name,
// locks whose names the user regexp cannot be inverted into (found by the
// SCAN fallback), counters, rate counters, and a queue (not releasable).
const families = `
families:
  - name: streams
    kind: slotset
    match: "joishi:streams:*"
    user: '^joishi:streams:\{?([^}]+)\}?$'
    limit: 3
    ttl: 120s
    heartbeat_interval: 20s
    max_hold: 15m
  - name: legacy
    kind: counter
    match: "legacy:*"
    limit: 3
  - name: api
    kind: ratelimit
    match: "rl:api:*"
    limit: 100
    window: 1m
  - name: jobs
    kind: lock
    match: "lock:job:*"
    user: '^lock:job:[a-z]+-(.+)$'
    ttl: 30s
    max_hold: 10m
  - name: mail
    kind: list
    match: "queue:mail:*"
    max_wait: 5m
`

// keyPatterns are the release user's keys in tests.
var keyPatterns = []string{"joishi:*", "legacy:*", "rl:*", "lock:*", "queue:*"}

type fixture struct {
	srv     *redistest.Server
	admin   *redis.Client
	cfg     *config.Config
	cfgFile string
	rel     *Releaser
	audit   string
}

// newFixture starts Redis with a release user holding exactly ACLRule,
// and a releaser logged in as it.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	srv := redistest.Start(t)
	admin := srv.Client()
	ctx := context.Background()
	dir := t.TempDir()
	pw := filepath.Join(dir, "release.pw")
	if err := os.WriteFile(pw, []byte("rel-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rule := append([]any{"ACL", "SETUSER", "releaser", "reset", "on", ">rel-secret"}, splitRule(ACLRule(keyPatterns...))...)
	if err := admin.Do(ctx, rule...).Err(); err != nil {
		t.Fatalf("ACL SETUSER: %v", err)
	}
	yaml := fmt.Sprintf("redis: {addr: %q}\nrelease: {username: releaser, password_file: %q}\n%s", srv.Addr, pw, families)
	cfgFile := filepath.Join(dir, "slot_exporter.yml")
	if err := os.WriteFile(cfgFile, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	audit := filepath.Join(dir, "audit.jsonl")
	rel, err := New(audit, exportertest.Quiet())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rel.Close)
	if err := rel.Configure(cfg); err != nil {
		t.Fatal(err)
	}
	return &fixture{srv: srv, admin: admin, cfg: cfg, cfgFile: cfgFile, rel: rel, audit: audit}
}

func splitRule(rule string) []any {
	var out []any
	for _, f := range strings.Fields(rule) {
		out = append(out, f)
	}
	return out
}

func (f *fixture) family(name string) *config.Family {
	for i := range f.cfg.Families {
		if f.cfg.Families[i].Name == name {
			return &f.cfg.Families[i]
		}
	}
	panic("no family " + name)
}

// now is Redis TIME in ms.
func (f *fixture) now(t *testing.T) int64 {
	t.Helper()
	tm, err := f.admin.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return tm.UnixMilli()
}

// records reads the audit file back.
func (f *fixture) records(t *testing.T) []Record {
	t.Helper()
	file, err := os.Open(f.audit)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	var out []Record
	sc := bufio.NewScanner(file)
	for sc.Scan() {
		var r Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

func req(family, user string) Request {
	return Request{Source: "cli", Operator: "ops-alice", Family: family, User: user}
}

func confirm(reason string) Confirm { return Confirm{Operator: "ops-alice", Reason: reason} }

func mathInf(sign int) float64 { return math.Inf(sign) }
