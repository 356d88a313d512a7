package release

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/redistest"
)

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
	rs := exportertest.StartReleaseServer(t, ACLRule(exportertest.KindKeyPatterns...))
	cfgFile := filepath.Join(rs.Dir, "slot_exporter.yml")
	exportertest.WriteFile(t, cfgFile, rs.YAML)
	cfg, err := config.Load(cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	audit := filepath.Join(rs.Dir, "audit.jsonl")
	rel, err := New(audit, exportertest.Quiet())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rel.Close)
	if err := rel.Configure(cfg); err != nil {
		t.Fatal(err)
	}
	return &fixture{srv: rs.Server, admin: rs.Admin, cfg: cfg, cfgFile: cfgFile, rel: rel, audit: audit}
}

func (f *fixture) family(name string) *config.Family {
	if fam := family(f.cfg, name); fam != nil {
		return fam
	}
	panic("no family " + name)
}

// slotSet writes user's slot set of the streams family, members and
// their scores (expiries in ms), and returns its key. A failed write fails
// the test.
func (f *fixture) slotSet(t *testing.T, user string, scores map[string]float64) string {
	t.Helper()
	key := "joishi:streams:{" + user + "}"
	zs := make([]redis.Z, 0, len(scores))
	for m, s := range scores {
		zs = append(zs, redis.Z{Score: s, Member: m})
	}
	if err := f.admin.ZAdd(context.Background(), key, zs...).Err(); err != nil {
		t.Fatalf("ZADD %s: %v", key, err)
	}
	return key
}

// now is Redis TIME in ms.
func (f *fixture) now(t *testing.T) int64 { return exportertest.RedisTime(t, f.admin) }

// records reads the audit file back.
func (f *fixture) records(t *testing.T) []Record { return exportertest.JSONLines[Record](t, f.audit) }

func req(family, user string) Request {
	return Request{Source: "cli", Operator: "ops-alice", Family: family, User: user}
}

func confirm(reason string) Confirm { return Confirm{Operator: "ops-alice", Reason: reason} }

func mathInf(sign int) float64 { return math.Inf(sign) }
