package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/redisproc"
	"github.com/slotexporter/slot_exporter/internal/redistest"
	"github.com/slotexporter/slot_exporter/internal/topology"
)

// shardConfig is the common families, the slot family under the name
// family, with the file's own sampling.shard.
func shardConfig(addr, family, shard string) string {
	slots := redisproc.Slots()
	slots.Name = family
	return redisproc.Config{
		Addr:     addr,
		Sampling: []string{"interval: 200ms", "window: 1s", "shard: " + shard},
		Families: []redisproc.Family{slots, redisproc.Counters()},
	}.YAML()
}

// usersOf lists the users with a slot_user_used_max series of family on a
// metrics page, sorted.
func usersOf(page, family string) []string {
	re := regexp.MustCompile(`(?m)^slot_user_used_max\{family="` + regexp.QuoteMeta(family) + `",user="([^"]+)"\} `)
	var users []string
	for _, m := range re.FindAllStringSubmatch(page, -1) {
		users = append(users, m[1])
	}
	slices.Sort(users)
	return users
}

// TestShardFlagOverridesTheFile: two exporters given --sampling.shard=0/2
// and 1/2 over one config file that says 0/3 report disjoint users that
// add up to every user, at start and after a reload of a file that says
// 1/3; an exporter without the flag keeps the file's third.
func TestShardFlagOverridesTheFile(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	ctx := context.Background()
	now := time.Now()
	const n = 60
	var all []string
	want := map[string][]string{} // users by shard, as the hash slots deal them
	for i := range n {
		u := fmt.Sprintf("u%02d", i)
		all = append(all, u)
		k := redisproc.SlotKey(u)
		if err := c.ZAdd(ctx, k, redis.Z{Score: float64(now.Add(119 * time.Second).UnixMilli()), Member: "a"}).Err(); err != nil {
			t.Fatal(err)
		}
		c.PExpire(ctx, k, 240*time.Second)
		c.Set(ctx, redisproc.CounterKey(u), 1, 0)
		s := topology.HashSlot(k)
		want[fmt.Sprintf("%d/2", s%2)] = append(want[fmt.Sprintf("%d/2", s%2)], u)
		want[fmt.Sprintf("%d/3", s%3)] = append(want[fmt.Sprintf("%d/3", s%3)], u)
	}
	slices.Sort(all)
	for k, us := range want {
		slices.Sort(us)
		if len(us) == 0 || len(us) == n {
			t.Fatalf("shard %s would hold %d of %d users: the fixture does not split", k, len(us), n)
		}
	}

	cfg := filepath.Join(t.TempDir(), "slot_exporter.yml")
	exportertest.WriteFile(t, cfg, shardConfig(srv.Addr, "streams", "0/3"))
	half0 := startExporter(t, "--config.file="+cfg, "--sampling.shard=0/2")
	half1 := startExporter(t, "--config.file="+cfg, "--sampling.shard=1/2")
	third := startExporter(t, "--config.file="+cfg)

	// page waits until p reports family and the counter family, then
	// returns its metrics page.
	page := func(p *exporterProc, family string) string {
		t.Helper()
		var body string
		exportertest.WaitFor(t, 10*time.Second, family+" swept", func() bool {
			_, body = p.get(t, "/metrics")
			return metric(body, `slot_sets{family="`+family+`"}`) != "" && metric(body, `slot_sets{family="legacy"}`) != ""
		})
		return body
	}
	check := func(when, family string) {
		t.Helper()
		p0, p1 := page(half0, family), page(half1, family)
		u0, u1 := usersOf(p0, family), usersOf(p1, family)
		if !slices.Equal(u0, want["0/2"]) || !slices.Equal(u1, want["1/2"]) {
			t.Errorf("%s: --sampling.shard=0/2 reports %v, 1/2 reports %v; want %v and %v", when, u0, u1, want["0/2"], want["1/2"])
		}
		if l0, l1 := usersOf(p0, "legacy"), usersOf(p1, "legacy"); !slices.Equal(l0, want["0/2"]) || !slices.Equal(l1, want["1/2"]) {
			t.Errorf("%s: counter family: 0/2 reports %v, 1/2 reports %v; want %v and %v", when, l0, l1, want["0/2"], want["1/2"])
		}
		union := slices.Concat(u0, u1)
		slices.Sort(union)
		if !slices.Equal(union, all) {
			t.Errorf("%s: the two halves report %d users together (%v), want all %d", when, len(union), union, n)
		}
		var sets, counters int
		for _, p := range []string{p0, p1} {
			var a, b int
			fmt.Sscan(metric(p, `slot_sets{family="`+family+`"}`), &a)
			fmt.Sscan(metric(p, `slot_sets{family="legacy"}`), &b)
			sets, counters = sets+a, counters+b
		}
		if sets != n || counters != n {
			t.Errorf("%s: slot_sets add up to %d and those of the counter family to %d over the halves, want %d each", when, sets, counters, n)
		}
	}
	check("at start", "streams")
	if got := usersOf(page(third, "streams"), "streams"); !slices.Equal(got, want["0/3"]) {
		t.Errorf("without the flag the file's 0/3 is read: got %v, want %v", got, want["0/3"])
	}

	// The file now says 1/3 and renames the family, which shows that the
	// reload took; the flag still decides the keys.
	exportertest.WriteFile(t, cfg, shardConfig(srv.Addr, "streams2", "1/3"))
	for _, p := range []*exporterProc{half0, half1, third} {
		if code, msg := p.post(t, "/-/reload"); code != 200 {
			t.Fatalf("reload: %d %s", code, msg)
		}
	}
	check("after a reload", "streams2")
	p := page(third, "streams2")
	if got := usersOf(p, "streams2"); !slices.Equal(got, want["1/3"]) {
		t.Errorf("after the reload, without the flag the file's 1/3 is read: got %v, want %v", got, want["1/3"])
	}
	// The counter family is the same in both files, so its sweeps carry
	// on across the reload: the new shard shows from its next sweep.
	exportertest.WaitFor(t, 10*time.Second, "the counter family read with the file's new 1/3", func() bool {
		return slices.Equal(usersOf(page(third, "streams2"), "legacy"), want["1/3"])
	})
}

// TestShardFlagRefusesBadValues: a bad --sampling.shard stops the exporter
// before it starts, with one line that gives the rule and the value, and a
// hint where a manifest's pod index did not arrive. --config.check applies
// the flag too.
func TestShardFlagRefusesBadValues(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "slot_exporter.yml")
	exportertest.WriteFile(t, cfg, testConfig("127.0.0.1:1", "streams"))
	const hint = "apps.kubernetes.io/pod-index"
	for _, tc := range []struct {
		value    string
		wantHint bool
	}{
		{"3/3", false}, {"two", false}, {"", false}, {"1/0", false}, {"-1/3", false},
		{"0/16385", false}, {"1/2/3", false}, {"/3", true}, {"$(POD_INDEX)/3", true},
	} {
		// A value that slipped through would start the exporter: the
		// deadline ends it and the exit code and message say so.
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		var out, errb bytes.Buffer
		code := run(ctx, []string{"--config.file=" + cfg, "--web.listen-address=127.0.0.1:0", "--sampling.shard=" + tc.value}, &out, &errb)
		cancel()
		msg := fmt.Sprintf("--sampling.shard: want i/n with 0 <= i < n <= 16384, such as 0/3, not %q", tc.value)
		lines := strings.Split(strings.TrimSuffix(errb.String(), "\n"), "\n")
		if code == 0 || len(lines) != 1 || !strings.HasPrefix(lines[0], "slot_exporter: "+msg) {
			t.Errorf("--sampling.shard=%s: exit %d, stderr %q; want non-zero and one line with %q", tc.value, code, errb.String(), msg)
		}
		if strings.Contains(errb.String(), hint) != tc.wantHint {
			t.Errorf("--sampling.shard=%s: stderr %q, hint about the pod-index label wanted: %v", tc.value, errb.String(), tc.wantHint)
		}
	}

	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"--config.file=" + cfg, "--config.check", "--sampling.shard= 2 / 3"}, &out, &errb); code != 0 {
		t.Errorf("--sampling.shard=' 2 / 3' with --config.check: exit %d, stderr %q", code, errb.String())
	}
	out.Reset()
	errb.Reset()
	if code := run(context.Background(), []string{"--config.file=" + cfg, "--config.check", "--sampling.shard=3/3"}, &out, &errb); code == 0 || out.Len() != 0 {
		t.Errorf("--sampling.shard=3/3 with --config.check: exit %d, stdout %q", code, out.String())
	}
}
