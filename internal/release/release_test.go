package release

import (
	"context"
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/track"
)

// TestSlotSetRelease: the preview picks the dead members and says why;
// the release removes them, keeps the live one, and keeps a member whose
// heartbeat arrived between the preview and the release. Both are audited.
func TestSlotSetRelease(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	now := f.now(t)
	// ttl 120s, heartbeat 20s, stale_after 40s; scores are expiries.
	key := f.slotSet(t, "u1", map[string]float64{
		"expired": float64(now - 60_000),
		"stale":   float64(now + 50_000), // last heartbeat 70s ago
		"revive":  float64(now + 60_000), // stale until its heartbeat below
		"live":    float64(now + 110_000),
		"future":  float64(now) * 1000, // µs written as ms
	})
	p, err := f.rel.Preview(ctx, req("streams", "u1"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Refusal != "" || len(p.Keys) != 1 || p.Keys[0].Key != key {
		t.Fatalf("plan: refusal %q, keys %+v; want one key %s", p.Refusal, p.Keys, key)
	}
	if p.Holdings.Search.How != FoundByHashTag {
		t.Errorf("found by %q, want %q", p.Holdings.Search.How, FoundByHashTag)
	}
	states := map[string]string{}
	for _, m := range p.Keys[0].Remove {
		states[m.Member] = m.State.String()
	}
	want := map[string]string{"expired": "expired", "stale": "stale", "revive": "stale", "future": "future"}
	if !mapsEqual(states, want) {
		t.Errorf("would remove %v, want %v", states, want)
	}
	if len(p.Keys[0].Keep) != 1 || p.Keys[0].Keep[0].Member != "live" || p.Keys[0].Keep[0].State != track.StateLive {
		t.Errorf("would keep %+v, want only live", p.Keys[0].Keep)
	}

	// The holder of "revive" heartbeats: its expiry moves forward.
	f.admin.ZAddXX(ctx, key, redis.Z{Score: float64(f.now(t) + 120_000), Member: "revive"})

	out, err := f.rel.Execute(ctx, p, confirm("night page: holders died"))
	if err != nil {
		t.Fatal(err)
	}
	left, err := f.admin.ZRange(ctx, key, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(left)
	if !slices.Equal(left, []string{"live", "revive"}) {
		t.Errorf("left in Redis: %v, want [live revive]", left)
	}
	if out.Result != ResultReleased || out.Removed != 3 || out.Kept != 1 || out.Gone != 0 || !out.Audited {
		t.Errorf("outcome %s: removed %d kept %d gone %d, audited %v; want released 3 1 0, audited", out.Result, out.Removed, out.Kept, out.Gone, out.Audited)
	}

	recs := f.records(t)
	if len(recs) != 3 {
		t.Fatalf("%d audit lines, want 3 (preview, the release's intent, its outcome)", len(recs))
	}
	pr, rr := recs[0], recs[2]
	if ir := recs[1]; ir.Action != ActionRelease || ir.Result != ResultStarted || len(ir.Items) != 4 || ir.Items[0].Outcome != WouldRemove {
		t.Errorf("intent line %+v", ir)
	}
	if pr.Action != ActionPreview || pr.Result != ResultPreviewed || pr.Operator != "ops-alice" || len(pr.Items) != 4 {
		t.Errorf("preview line %+v", pr)
	}
	if rr.Action != ActionRelease || rr.Result != ResultReleased || rr.Operator != "ops-alice" ||
		rr.Reason != "night page: holders died" || rr.Family != "streams" || rr.User != "u1" || !slices.Equal(rr.Keys, []string{key}) {
		t.Errorf("release line %+v", rr)
	}
	outcomes := map[string]string{}
	for _, it := range rr.Items {
		outcomes[it.Member] = it.Outcome
		if it.State == "" || it.Score == "" || it.Expiry == "" {
			t.Errorf("item without state, score or expiry: %+v", it)
		}
		if it.Member == "revive" && it.Now == "" {
			t.Errorf("kept member without its current score: %+v", it)
		}
	}
	if want := map[string]string{"expired": Removed, "stale": Removed, "future": Removed, "revive": KeptMoved}; !mapsEqual(outcomes, want) {
		t.Errorf("audited outcomes %v, want %v", outcomes, want)
	}
	if c := f.rel.Counts(); c[ResultPreviewed] != 1 || c[ResultReleased] != 1 || c[ResultRefused] != 0 || c[ResultFailed] != 0 {
		t.Errorf("counts %v", c)
	}
}

// TestScoreFormatsRoundTrip: the score the preview hands to the members
// script compares equal to what ZSCORE answers, for every shape of score:
// a script that misread one would keep a dead member forever, or (worse)
// remove one that moved.
func TestScoreFormatsRoundTrip(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	scores := map[string]float64{"tiny": 1e-7, "frac": 1726000000123.25, "big": 1.7e21, "neg": -5, "inf": mathInf(1), "ninf": mathInf(-1), "zero": 0}
	f.slotSet(t, "edge", scores)
	p, err := f.rel.Preview(ctx, Request{Source: "cli", Operator: "ops-alice", Family: "streams", User: "edge", IncludeLive: true})
	if err != nil {
		t.Fatal(err)
	}
	out, err := f.rel.Execute(ctx, p, confirm("edge scores"))
	if err != nil {
		t.Fatal(err)
	}
	if out.Removed != len(scores) {
		t.Errorf("removed %d of %d: %+v", out.Removed, len(scores), out.Items)
	}
}

// TestLockStaleToken: a lock deleted only while it holds the previewed
// token. One taken over by another holder since the preview is left alone.
func TestLockStaleToken(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	key := "lock:job:eu-u7"
	// A lease of an hour on a 30s lock: PX given seconds. Future.
	f.admin.Set(ctx, key, "token-1", time.Hour)
	p, err := f.rel.Preview(ctx, req("jobs", "u7"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Holdings.Search.How != FoundByScan {
		t.Errorf("found by %q, want the SCAN fallback (the user regexp has no inverse)", p.Holdings.Search.How)
	}
	if len(p.Keys) != 1 || len(p.Keys[0].Remove) != 1 || p.Keys[0].Remove[0].Member != "token-1" || p.Keys[0].Remove[0].State != track.StateFuture {
		t.Fatalf("plan %+v, want token-1 removed as future", p.Keys)
	}
	// The lease runs out and another holder takes the lock.
	f.admin.Set(ctx, key, "token-2", 20*time.Second)
	out, err := f.rel.Execute(ctx, p, confirm("stuck lock"))
	if err != nil {
		t.Fatal(err)
	}
	if v := f.admin.Get(ctx, key).Val(); v != "token-2" {
		t.Fatalf("the lock holds %q, want token-2 untouched", v)
	}
	if out.Removed != 0 || len(out.Items) != 1 || out.Items[0].Outcome != Changed || out.Items[0].Now != "token-2" {
		t.Errorf("outcome %+v", out.Items)
	}

	// With the token unchanged, the lock goes.
	f.admin.Set(ctx, key, "token-3", time.Hour)
	p, err = f.rel.Preview(ctx, req("jobs", "u7"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.rel.Execute(ctx, p, confirm("stuck lock")); err != nil {
		t.Fatal(err)
	}
	if n := f.admin.Exists(ctx, key).Val(); n != 0 {
		t.Errorf("the lock is still there")
	}

	// A lock with a normal lease is live: a default release leaves it.
	f.admin.Set(ctx, key, "token-4", 20*time.Second)
	p, err = f.rel.Preview(ctx, req("jobs", "u7"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Refusal == "" {
		t.Errorf("a live lock previewed for release: %+v", p.Keys)
	}
}

// TestCounterCompareAndSet: a counter that moved since the preview is not
// overwritten; one that did not is set to the operator's value, and a
// rate counter keeps its TTL.
func TestCounterCompareAndSet(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.admin.Set(ctx, "legacy:u1", "5", 0)
	p, err := f.rel.Preview(ctx, req("legacy", "u1"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Refusal != "" || p.Keys[0].Value != "5" {
		t.Fatalf("plan %+v refusal %q", p.Keys, p.Refusal)
	}
	f.admin.Incr(ctx, "legacy:u1") // a live acquire since
	out, err := f.rel.Execute(ctx, p, confirm("reset"))
	if err != nil {
		t.Fatal(err)
	}
	if v := f.admin.Get(ctx, "legacy:u1").Val(); v != "6" {
		t.Errorf("counter %s, want 6: a counter changed since the preview was overwritten", v)
	}
	if out.Items[0].Outcome != Changed || out.Items[0].Now != "6" {
		t.Errorf("outcome %+v", out.Items)
	}
	p, _ = f.rel.Preview(ctx, req("legacy", "u1"))
	c := confirm("reset to the 2 holders still running")
	c.NewValue = 2
	if _, err := f.rel.Execute(ctx, p, c); err != nil {
		t.Fatal(err)
	}
	if v := f.admin.Get(ctx, "legacy:u1").Val(); v != "2" {
		t.Errorf("counter %s, want 2", v)
	}
	// Below 0, a limiter that counts holders lets in as many more.
	p, _ = f.rel.Preview(ctx, req("legacy", "u1"))
	c.NewValue = -100
	if out, err := f.rel.Execute(ctx, p, c); !errors.Is(err, ErrRefused) || out.Result != ResultRefused || !strings.Contains(err.Error(), "the new value -100 is below 0") {
		t.Errorf("a new value of -100: %v (%s), want refused as below 0", err, out.Result)
	}
	if v := f.admin.Get(ctx, "legacy:u1").Val(); v != "2" {
		t.Errorf("counter %s after a refused release, want 2", v)
	}

	f.admin.Set(ctx, "rl:api:u1", "150", time.Minute)
	p, _ = f.rel.Preview(ctx, req("api", "u1"))
	if _, err := f.rel.Execute(ctx, p, confirm("caller locked out")); err != nil {
		t.Fatal(err)
	}
	if v, ttl := f.admin.Get(ctx, "rl:api:u1").Val(), f.admin.PTTL(ctx, "rl:api:u1").Val(); v != "0" || ttl <= 0 {
		t.Errorf("rate counter %s with PTTL %v, want 0 with its TTL kept", v, ttl)
	}
}

// TestRefusals: what is not released, and that each refusal is audited
// and counted, with Redis untouched.
func TestRefusals(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	now := f.now(t)
	key := f.slotSet(t, "u2", map[string]float64{"dead": float64(now - 60_000)})

	if _, err := f.rel.Preview(ctx, Request{Source: "cli", Family: "streams", User: "u2"}); !errors.Is(err, ErrRefused) {
		t.Errorf("preview without an operator: %v, want refused", err)
	}
	if _, err := f.rel.Preview(ctx, req("nosuch", "u2")); !errors.Is(err, ErrRefused) {
		t.Errorf("preview of an unknown family: %v, want refused", err)
	}
	p, err := f.rel.Preview(ctx, req("mail", "u2"))
	if err != nil || p.Refusal == "" {
		t.Errorf("preview of a queue: %v, refusal %q; want a refusal", err, p.Refusal)
	}
	if _, err := f.rel.Execute(ctx, p, confirm("x")); !errors.Is(err, ErrRefused) {
		t.Errorf("release of a queue: %v, want refused", err)
	}
	p, err = f.rel.Preview(ctx, req("streams", "u2"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.rel.Execute(ctx, p, confirm("")); !errors.Is(err, ErrRefused) {
		t.Errorf("release without a reason: %v, want refused", err)
	}
	if _, err := f.rel.Execute(ctx, p, Confirm{Operator: "mallory", Reason: "x"}); !errors.Is(err, ErrRefused) {
		t.Errorf("release by another operator than the preview's: %v, want refused", err)
	}
	if n := f.admin.ZCard(ctx, key).Val(); n != 1 {
		t.Fatalf("a refused release changed the set: %d members", n)
	}

	// An audit file that cannot be written: nothing is released.
	if err := os.Remove(f.audit); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(f.audit, 0o700); err != nil {
		t.Fatal(err)
	}
	out, err := f.rel.Execute(ctx, p, confirm("audit is broken"))
	if err == nil || out.Result != ResultFailed {
		t.Errorf("release with an unwritable audit file: %v, result %s; want failed", err, out.Result)
	}
	if n := f.admin.ZCard(ctx, key).Val(); n != 1 {
		t.Errorf("a release that could not be audited changed the set: %d members", n)
	}
	if err := os.Remove(f.audit); err != nil {
		t.Fatal(err)
	}

	c := f.rel.Counts()
	if c[ResultRefused] != 6 || c[ResultFailed] != 1 || c[ResultPreviewed] != 1 || c[ResultReleased] != 0 {
		t.Errorf("counts %v, want 6 refused, 1 failed, 1 previewed", c)
	}
}

// TestReadFindsKeys: the plain name, the hash-tag name, and the SCAN
// fallback with a user full of glob characters, which must match itself
// only.
func TestReadFindsKeys(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	now := f.now(t)
	f.admin.ZAdd(ctx, "joishi:streams:plain", redis.Z{Score: float64(now + 100_000), Member: "m"})
	topo := f.rel.topo
	h, err := Read(ctx, topo, f.family("streams"), "plain", ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h.Search.How != FoundByPattern || len(h.Keys) != 1 || h.Keys[0].Key != "joishi:streams:plain" {
		t.Errorf("plain key: %+v %+v", h.Search, h.Keys)
	}

	user := `a*b?[c]\`
	f.admin.Set(ctx, "lock:job:eu-"+user, "tok", time.Minute)
	f.admin.Set(ctx, "lock:job:eu-aXXbYc", "decoy", time.Minute) // what an unescaped pattern would match
	h, err = Read(ctx, topo, f.family("jobs"), user, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Keys) != 1 || h.Keys[0].Key != "lock:job:eu-"+user {
		t.Fatalf("keys %+v, want the one lock of %q", h.Keys, user)
	}
	if h.Search.Scanned != 1 {
		t.Errorf("SCAN %q returned %d keys, want 1: the user's glob characters are not escaped", h.Search.Pattern, h.Search.Scanned)
	}

	h, err = Read(ctx, topo, f.family("streams"), "nobody", ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Keys) != 0 || h.Search.How != "" || h.Search.Pattern != `*nobody*` {
		t.Errorf("no key: %+v %+v", h.Search, h.Keys)
	}
}

func TestGlobHelpers(t *testing.T) {
	for _, c := range []struct {
		glob, sub, key string
		ok             bool
	}{
		{"joishi:streams:*", "u", "joishi:streams:u", true},
		{`a\*b:*`, "u", "a*b:u", true},
		{"a:*:b", "{u}", "a:{u}:b", true},
		{"a:*:*", "u", "", false},
		{"a:?:*", "u", "", false},
		{"nostar", "u", "nostar", false},
	} {
		key, ok := literalKey(c.glob, c.sub)
		if key != c.key || ok != c.ok {
			t.Errorf("literalKey(%q, %q) = %q, %v; want %q, %v", c.glob, c.sub, key, ok, c.key, c.ok)
		}
	}
	if got := EscapeGlob(`a*b?[c]\^-`); got != `a\*b\?\[c\]\\\^\-` {
		t.Errorf("EscapeGlob = %q", got)
	}
	f := newFixture(t)
	if got := scanPattern(f.family("mail"), "u*"); got != `queue:mail:u\*` {
		t.Errorf("scanPattern(first * is the user) = %q", got)
	}
	if got := scanPattern(f.family("jobs"), "u*"); got != `*u\**` {
		t.Errorf("scanPattern(own user regexp) = %q", got)
	}
}

// TestWriteConfig: the write client logs in as the release user, on the
// primary, and refuses a password the connection layer would override.
func TestWriteConfig(t *testing.T) {
	f := newFixture(t)
	cfg := *f.cfg
	cfg.Redis.ReadFrom = "replica"
	rc, err := WriteConfig(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rc.Username != "releaser" || rc.PasswordFile != cfg.Release.PasswordFile || rc.ReadFrom != "primary" {
		t.Errorf("write config %+v", rc)
	}
	t.Setenv("REDIS_PASSWORD", "sampling-secret")
	if _, err := WriteConfig(&cfg); err == nil || !strings.Contains(err.Error(), "REDIS_PASSWORD") {
		t.Errorf("with REDIS_PASSWORD set: %v, want a refusal naming it", err)
	}
	cfg.Release = nil
	if _, err := WriteConfig(&cfg); err == nil {
		t.Errorf("no release block: no error")
	}
}

func TestFormatTime(t *testing.T) {
	for ms, want := range map[float64]string{
		1_796_099_476_123:     "2026-12-01T04:31:16.123Z",
		mathInf(1):            "never",
		1_796_099_481_000_000: "1796099481000000 ms (beyond year 9999)",
	} {
		if got := FormatTime(ms); got != want {
			t.Errorf("FormatTime(%s) = %q, want %q", strconv.FormatFloat(ms, 'g', -1, 64), got, want)
		}
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
