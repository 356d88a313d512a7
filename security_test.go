package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/redisproc"
	"github.com/slotexporter/slot_exporter/internal/redistest"
	"github.com/slotexporter/slot_exporter/internal/tlstest"
)

// secSampling goes with the common families in every config here. A slot
// set with more than 3 members is oversized, so ZCOUNT is exercised.
var secSampling = []string{"interval: 200ms", "window: 1s", "max_members_per_key: 3"}

// secConfig writes slot_exporter.yml into dir: the redis block
// (indented lines), secSampling and the common families.
func secConfig(t *testing.T, dir, redisBlock string, sampling ...string) string {
	t.Helper()
	var redis []string
	for _, l := range strings.Split(strings.TrimRight(redisBlock, "\n"), "\n") {
		redis = append(redis, strings.TrimPrefix(l, "  "))
	}
	path := filepath.Join(dir, "slot_exporter.yml")
	exportertest.WriteFile(t, path, redisproc.Config{Redis: redis, Sampling: append(slices.Clone(secSampling), sampling...)}.YAML())
	return path
}

// secSeed writes three slot sets (one oversized), two counters and one key
// of the wrong type in each family.
func secSeed(t *testing.T, c redis.Cmdable) {
	t.Helper()
	ctx := context.Background()
	live := float64(time.Now().Add(119 * time.Second).UnixMilli())
	dead := float64(time.Now().Add(-time.Second).UnixMilli())
	sets := map[string][]redis.Z{
		redisproc.SlotKey("u1"):  {{Score: live, Member: "a"}, {Score: live, Member: "b"}},
		redisproc.SlotKey("u2"):  {{Score: live, Member: "c"}, {Score: dead, Member: "d"}},
		redisproc.SlotKey("big"): {{Score: live, Member: "m0"}, {Score: live, Member: "m1"}, {Score: live, Member: "m2"}, {Score: live, Member: "m3"}, {Score: live, Member: "m4"}},
	}
	for k, zs := range sets {
		if err := c.ZAdd(ctx, k, zs...).Err(); err != nil {
			t.Fatalf("seed: %v", err)
		}
		c.PExpire(ctx, k, 240*time.Second)
	}
	c.Set(ctx, redisproc.SlotKey("str"), "not a set", 0)
	c.Set(ctx, redisproc.CounterKey("u1"), 2, 0)
	c.Set(ctx, redisproc.CounterKey("u2"), 3, 0)
	if err := c.ZAdd(ctx, redisproc.CounterKey("z"), redis.Z{Score: 1, Member: "x"}).Err(); err != nil {
		t.Fatalf("seed: %v", err)
	}
}

// secSeeded is what a good sweep of secSeed's keys shows.
var secSeeded = map[string]string{
	`slot_sets{family="streams"}`:                    "3",
	`slot_members{family="streams",state="live"}`:    "8",
	`slot_members{family="streams",state="expired"}`: "1",
	`slot_users_active{family="streams"}`:            "3",
	`slot_sets{family="legacy"}`:                     "2",
	`slot_users_at_limit{family="legacy"}`:           "1",
	`slot_exporter_up`:                               "1",
}

// secCheckSeeded checks a page against secSeeded, and that the oversized
// and wrong-type keys were counted as skipped.
func secCheckSeeded(t *testing.T, page string) {
	t.Helper()
	for series, want := range secSeeded {
		if got := metric(page, series); got != want {
			t.Errorf("%s = %q, want %s", series, got, want)
		}
	}
	for _, series := range []string{
		`slot_exporter_keys_skipped_total{family="streams",reason="oversized"}`,
		`slot_exporter_keys_skipped_total{family="streams",reason="wrong_type"}`,
		`slot_exporter_keys_skipped_total{family="legacy",reason="wrong_type"}`,
	} {
		if n, _ := strconv.Atoi(metric(page, series)); n < 1 {
			t.Errorf("%s = %q, want >= 1", series, metric(page, series))
		}
	}
}

func secMetric(t *testing.T, p *exporterProc, series string) string {
	t.Helper()
	_, page := p.get(t, "/metrics")
	return metric(page, series)
}

func secCount(t *testing.T, p *exporterProc, series string) int {
	t.Helper()
	n, _ := strconv.Atoi(secMetric(t, p, series))
	return n
}

func secWaitUp(t *testing.T, p *exporterProc) {
	t.Helper()
	exportertest.WaitFor(t, 10*time.Second, "slot_exporter_up 1", func() bool { return secMetric(t, p, "slot_exporter_up") == "1" })
}

// secWaitFailing waits for a family's sweep errors to rise above before,
// with slot_exporter_up at 0.
func secWaitFailing(t *testing.T, p *exporterProc, family string, before int) {
	t.Helper()
	series := fmt.Sprintf(`slot_exporter_sweep_errors_total{family=%q}`, family)
	exportertest.WaitFor(t, 10*time.Second, family+" sweeps failing", func() bool {
		_, page := p.get(t, "/metrics")
		n, _ := strconv.Atoi(metric(page, series))
		return n > before && metric(page, "slot_exporter_up") == "0"
	})
}

func secNoSecret(t *testing.T, where, text string, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(text, s) {
			t.Errorf("%s shows a secret:\n%s", where, text)
		}
	}
}

// TestPasswordInConfigRefused: a password written in the config file, as a
// field or inside a URL, is refused by --config.check with the field path
// and where to put it instead, and the password is not echoed.
func TestPasswordInConfigRefused(t *testing.T) {
	pw := redisproc.Secret()
	const where = "passwords are not accepted in the config file; put it in a file named by redis.password_file, or in the " + config.PasswordEnv + " environment variable"
	cases := map[string]struct{ block, want string }{
		"field":             {"  addr: 127.0.0.1:6379\n  password: " + pw + "\n", "redis.password: " + where},
		"field capitalised": {"  addr: 127.0.0.1:6379\n  PASSWORD: " + pw + "\n", "redis.PASSWORD: " + where},
		"URL":               {"  addr: redis://:" + pw + "@127.0.0.1:6379\n", "redis.addr: " + where},
		"URL with user":     {"  addr: redis://default:" + pw + "@127.0.0.1:6379/0\n", "redis.addr: " + where},
		"rediss URL":        {"  addr: rediss://exporter:" + pw + "@localhost:6380\n", "redis.addr: " + where},
		"no scheme":         {"  addr: ':" + pw + "@127.0.0.1:6379'\n", "redis.addr: " + where},
		"cluster seed":      {"  mode: cluster\n  addrs: ['redis://:" + pw + "@127.0.0.1:7000']\n", "redis.addrs[0]: " + where},
		"sentinel":          {"  mode: sentinel\n  master_name: m\n  addrs: ['127.0.0.1:26379', 'u:" + pw + "@127.0.0.1:26380']\n", "redis.addrs[1]: " + where},
		// go-redis has no such URL option; the value must not be echoed
		// in the refusal either.
		"URL query": {"  addr: redis://127.0.0.1:6379/0?password=" + pw + "\n", "redis.addr: invalid URL: unexpected option: password"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := secConfig(t, t.TempDir(), c.block)
			var out, errb bytes.Buffer
			code := run(context.Background(), []string{"--config.file=" + cfg, "--config.check"}, &out, &errb)
			if code != 1 || !strings.Contains(errb.String(), c.want) {
				t.Errorf("exit %d, stderr %q; want 1 and %q", code, errb.String(), c.want)
			}
			secNoSecret(t, "--config.check output", out.String()+errb.String(), pw)
		})
	}
}

// TestPasswordFlagRejected: there is no command-line flag for a password
// (it would show in ps and shell history); trying one is a usage error that
// names the flag but not the value.
func TestPasswordFlagRejected(t *testing.T) {
	pw := redisproc.Secret()
	for _, args := range [][]string{
		{"--redis.password=" + pw},
		{"--redis.password", pw},
		{"--redis-password=" + pw},
		{"--password=" + pw},
		{"-p", pw},
		{"--redis.addr=redis://:" + pw + "@127.0.0.1:6379"},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), args, &out, &errb)
		if code != 2 || !strings.Contains(errb.String(), "unknown") {
			t.Errorf("%q: exit %d, stderr %q; want 2 and an unknown-flag error", args[0], code, errb.String())
		}
		secNoSecret(t, fmt.Sprintf("the usage error for %q", args[0]), out.String()+errb.String(), pw)
	}
}

// TestPasswordNeverLeaks runs the exporter against a password-protected
// Redis with debug logging and then goes looking for the password (and a
// wrong one) everywhere the exporter writes: logs, every page, the errors
// of refused reloads. The password file is re-read for new connections,
// so a rotation needs no reload.
func TestPasswordNeverLeaks(t *testing.T) {
	pw, wrong := redisproc.Secret(), redisproc.Secret()
	srv := redistest.Start(t, "--requirepass", pw)
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr, Password: pw, DisableIdentity: true})
	t.Cleanup(func() { _ = admin.Close() })
	secSeed(t, admin)

	dir := t.TempDir()
	pf := filepath.Join(dir, "redis-password")
	exportertest.WriteFile(t, pf, pw+"\n")
	// Relative: resolved against the config file's directory.
	good := fmt.Sprintf("  addr: %q\n  password_file: redis-password\n", srv.Addr)
	cfg := secConfig(t, dir, good)
	p := startExporter(t, "--config.file="+cfg, "--log.level=debug")
	secWaitUp(t, p)
	_, page := p.get(t, "/metrics")
	secCheckSeeded(t, page)

	var shown []string // every page and error the exporter produced
	pages := func() {
		for _, path := range []string{"/", "/metrics", "/-/ready", "/-/healthy"} {
			code, body := p.get(t, path)
			if code != http.StatusOK {
				t.Errorf("GET %s: %d", path, code)
			}
			shown = append(shown, path+": "+body)
		}
	}
	pages()

	// A wrong password: sweeps fail with WRONGPASS, and say so without
	// the password.
	exportertest.WriteFile(t, pf, wrong+"\n")
	before := secCount(t, p, `slot_exporter_sweep_errors_total{family="streams"}`)
	// Established connections stay logged in; drop them.
	_ = admin.ClientKillByFilter(context.Background(), "TYPE", "normal").Err()
	secWaitFailing(t, p, "streams", before)
	// The sweep that was reading when its connection was killed fails
	// with EOF; the next ones, on new connections, are refused.
	exportertest.WaitFor(t, 10*time.Second, "a sweep error saying WRONGPASS", func() bool {
		return strings.Contains(p.logs.String(), "WRONGPASS")
	})
	pages()

	// Rotated back: picked up by the next connection, no reload.
	exportertest.WriteFile(t, pf, pw+"\n")
	secWaitUp(t, p)

	reloads := map[string]string{
		"password field":        good + "  password: " + pw + "\n",
		"password in URL":       fmt.Sprintf("  addr: \"redis://:%s@%s\"\n", pw, srv.Addr),
		"user and password":     fmt.Sprintf("  addr: \"redis://default:%s@%s\"\n", pw, srv.Addr),
		"missing password file": fmt.Sprintf("  addr: %q\n  password_file: nope\n", srv.Addr),
	}
	for name, block := range reloads {
		secConfig(t, dir, block)
		code, body := p.post(t, "/-/reload")
		if code != http.StatusBadRequest || !strings.Contains(body, "refused") {
			t.Errorf("%s: reload answered %d %q, want 400 refused", name, code, body)
		}
		shown = append(shown, "reload "+name+": "+body)
	}
	// redis-cli reads redis://SECRET@host as a password; go-redis as a
	// user name. Accepted or refused, it must not show up anywhere.
	secConfig(t, dir, fmt.Sprintf("  addr: \"redis://%s@%s\"\n  password_file: redis-password\n", wrong, srv.Addr))
	code, body := p.post(t, "/-/reload")
	shown = append(shown, "reload userinfo: "+body)
	if code == http.StatusOK {
		before := secCount(t, p, `slot_exporter_sweep_errors_total{family="streams"}`)
		secWaitFailing(t, p, "streams", before)
		pages()
	}
	// An unreachable Redis makes go-redis log at debug level, so the log
	// searched below does hold debug lines.
	secConfig(t, dir, fmt.Sprintf("  addr: \"127.0.0.1:%d\"\n  password_file: redis-password\n", redistest.FreePort(t)))
	if code, body := p.post(t, "/-/reload"); code != http.StatusOK {
		t.Fatalf("reload to an unreachable Redis: %d %q", code, body)
	}
	exportertest.WaitFor(t, 10*time.Second, "a debug line", func() bool { return strings.Contains(p.logs.String(), "level=debug") })
	secConfig(t, dir, good)
	if code, body := p.post(t, "/-/reload"); code != http.StatusOK {
		t.Fatalf("good config refused: %d %q", code, body)
	}
	secWaitUp(t, p)
	pages()

	for _, s := range shown {
		secNoSecret(t, "a page or error", s, pw, wrong)
	}
	secNoSecret(t, "the exporter's log", p.logs.String(), pw, wrong)
}

// TestPasswordFromEnv: REDIS_PASSWORD alone is enough, and does not show
// up in the log either.
func TestPasswordFromEnv(t *testing.T) {
	pw := redisproc.Secret()
	srv := redistest.Start(t, "--requirepass", pw)
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr, Password: pw, DisableIdentity: true})
	t.Cleanup(func() { _ = admin.Close() })
	secSeed(t, admin)
	t.Setenv(config.PasswordEnv, pw)
	cfg := secConfig(t, t.TempDir(), fmt.Sprintf("  addr: %q\n", srv.Addr))
	p := startExporter(t, "--config.file="+cfg, "--log.level=debug")
	secWaitUp(t, p)
	_, page := p.get(t, "/metrics")
	secCheckSeeded(t, page)
	secNoSecret(t, "/metrics", page, pw)
	secNoSecret(t, "the exporter's log", p.logs.String(), pw)
}

// aclCommands is the exact set of commands a standalone scan-mode sweep of
// slot sets and counters needs. HELLO and AUTH need no grant: Redis allows
// them to every user. Cluster mode adds CLUSTER SLOTS (and CLUSTER SHARDS
// and READONLY for read_from: replica); discovery: notify adds CONFIG GET,
// PSUBSCRIBE and channel permissions; neither is covered here.
var aclCommands = []struct {
	cmd      string
	families []string // the families whose sweeps need it
}{
	{"scan", []string{"streams", "legacy"}},
	{"time", []string{"streams", "legacy"}},
	// ZSCAN reads a slot set's members; without it the exporter reads
	// them with ZRANGE and warns (see the zscan sub-test). ZRANGE also
	// finds an oversized set's newest score.
	{"zscan", []string{"streams"}},
	{"zrange", []string{"streams"}},
	{"pttl", []string{"streams"}},
	{"zcount", []string{"streams"}}, // oversized sets only
	{"getrange", []string{"legacy"}},
	{"info", nil}, // restart detection; see the INFO sub-test
	// Change tracking (sampling.track_changes, on by default): two
	// connections of its own, one subscribed to the invalidation channel
	// (which needs &__redis__:invalidate), one with CLIENT TRACKING
	// redirected to it, kept alive with PING. Without them sweeps read
	// every key; see the tracking sub-test.
	{"client|id", nil},
	{"client|tracking", nil},
	{"subscribe", nil},
	{"ping", nil},
}

// trackingCommands are the commands of aclCommands that only change
// tracking needs.
var trackingCommands = []string{"client|id", "client|tracking", "subscribe", "ping"}

func aclUser(pw string, withInfo bool) string {
	return aclUserWithout(pw, withInfo, "")
}

// aclUserWithout is the exact ACL user less one command (none for "").
func aclUserWithout(pw string, withInfo bool, without string) string {
	rules := "user exporter on >" + pw + " %R~joishi:* resetchannels &__redis__:invalidate -@all"
	for _, c := range aclCommands {
		if (c.cmd != "info" || withInfo) && c.cmd != without {
			rules += " +" + c.cmd
		}
	}
	return rules
}

// TestACLMinimalCommandSet: an ACL user with exactly aclCommands (and
// read-only access to the joishi: keys) sweeps everything correctly and
// never trips the ACL log; taking away any one command breaks the sweep
// of the families that need it, so the list has nothing to spare.
func TestACLMinimalCommandSet(t *testing.T) {
	pw := redisproc.Secret()
	dir := t.TempDir()
	// An ACL file, not ACL SETUSER alone: it survives the restarts of the
	// INFO sub-test.
	aclFile := filepath.Join(dir, "users.acl")
	writeACL := func(withInfo bool) {
		exportertest.WriteFile(t, aclFile, "user default on nopass ~* &* +@all\n"+aclUser(pw, withInfo)+"\n")
	}
	writeACL(true)
	srv := redistest.Start(t, "--aclfile", aclFile)
	admin := srv.Client()
	ctx := context.Background()
	secSeed(t, admin)
	pf := filepath.Join(dir, "pw")
	exportertest.WriteFile(t, pf, pw)
	cfg := secConfig(t, dir, fmt.Sprintf("  addr: %q\n  username: exporter\n  password_file: %q\n", srv.Addr, pf), "track_changes: true")
	p := startExporter(t, "--config.file="+cfg)
	secWaitUp(t, p)
	// A few more sweeps, so that any command sent only now and then would
	// have been sent.
	time.Sleep(600 * time.Millisecond)
	_, page := p.get(t, "/metrics")
	secCheckSeeded(t, page)
	if log, err := admin.Do(ctx, "ACL", "LOG").Slice(); err != nil || len(log) != 0 {
		t.Fatalf("ACL LOG after good sweeps: %v, %v; want empty (a command outside the list was tried)", log, err)
	}

	if l := p.logs.String(); strings.Contains(l, "cannot track changes") || strings.Contains(l, "cannot read INFO") {
		t.Fatalf("change tracking or INFO refused with the exact list:\n%s", l)
	}
	// With change tracking, a key is read again only when it is written,
	// so a read command taken away would only show much later: each one is
	// proven needed with tracking off, where every sweep reads every key.
	p.stop()
	cfg = secConfig(t, dir, fmt.Sprintf("  addr: %q\n  username: exporter\n  password_file: %q\n", srv.Addr, pf), "track_changes: false")
	p = startExporter(t, "--config.file="+cfg)
	secWaitUp(t, p)
	for _, c := range aclCommands {
		if c.cmd == "info" || c.cmd == "zscan" || slices.Contains(trackingCommands, c.cmd) {
			continue
		}
		t.Run("without "+c.cmd, func(t *testing.T) {
			before := map[string]int{}
			for _, f := range c.families {
				before[f] = secCount(t, p, fmt.Sprintf(`slot_exporter_sweep_errors_total{family=%q}`, f))
			}
			if err := admin.Do(ctx, "ACL", "SETUSER", "exporter", "-"+c.cmd).Err(); err != nil {
				t.Fatal(err)
			}
			for _, f := range c.families {
				secWaitFailing(t, p, f, before[f])
			}
			if want := fmt.Sprintf("no permissions to run the '%s' command", c.cmd); !strings.Contains(p.logs.String(), want) {
				t.Errorf("the sweep error does not say %q", want)
			}
			if err := admin.Do(ctx, "ACL", "SETUSER", "exporter", "+"+c.cmd).Err(); err != nil {
				t.Fatal(err)
			}
			secWaitUp(t, p)
		})
	}

	// An ACL written for a release that read slot sets with ZRANGE: the
	// exporter reads them with ZRANGE, says once what to grant, and its
	// figures stay whole.
	t.Run("without zscan", func(t *testing.T) {
		before := secCount(t, p, `slot_exporter_sweep_errors_total{family="streams"}`)
		if err := admin.Do(ctx, "ACL", "SETUSER", "exporter", "-zscan").Err(); err != nil {
			t.Fatal(err)
		}
		exportertest.WaitFor(t, 10*time.Second, "the warning about ZSCAN", func() bool {
			return strings.Contains(p.logs.String(), "the ACL refuses ZSCAN: slot sets are read with ZRANGE")
		})
		// Two sweeps more (a TIME each), reading every key by ZRANGE.
		for range 2 {
			n := exportertest.Calls(t, admin, "time")
			exportertest.WaitFor(t, 10*time.Second, "a sweep", func() bool { return exportertest.Calls(t, admin, "time") > n })
		}
		_, page := p.get(t, "/metrics")
		secCheckSeeded(t, page)
		if got := secCount(t, p, `slot_exporter_sweep_errors_total{family="streams"}`); got != before || metric(page, "slot_exporter_up") != "1" {
			t.Errorf("without ZSCAN: sweep errors %d (were %d), up %s; want the sweeps to go on", got, before, metric(page, "slot_exporter_up"))
		}
		if n := strings.Count(p.logs.String(), "the ACL refuses ZSCAN"); n != 1 {
			t.Errorf("warned %d times, want once", n)
		}
		if err := admin.Do(ctx, "ACL", "SETUSER", "exporter", "+zscan").Err(); err != nil {
			t.Fatal(err)
		}
	})

	// INFO only serves restart detection (run_id). With it, a restart that
	// empties Redis ends the vanished holds as "lost"; without it the sweep
	// still works (the exporter warns once) but the restart reads as
	// ordinary ends of holds: INFO is optional, and this shows what it buys.
	t.Run("without info", func(t *testing.T) {
		ended := func(outcome string) int {
			return secCount(t, p, fmt.Sprintf(`slot_holds_ended_total{family="streams",outcome=%q}`, outcome))
		}
		// Sweeps fail while Redis restarts; only a good sweep of the
		// emptied server settles the question.
		emptied := func() bool { return secMetric(t, p, `slot_sets{family="streams"}`) == "0" }
		lost := ended("lost")
		srv.Restart()
		exportertest.WaitFor(t, 15*time.Second, "a sweep of the emptied Redis", emptied)
		if got := ended("lost"); got <= lost {
			t.Fatalf("control: with INFO, a restart ended %d holds as lost, want more than %d", got, lost)
		}

		writeACL(false)
		secSeed(t, admin)
		exportertest.WaitFor(t, 10*time.Second, "the reseeded keys", func() bool { return secMetric(t, p, `slot_sets{family="streams"}`) == "3" })
		lost, gone := ended("lost"), ended("released")+ended("expired")
		srv.Restart()
		exportertest.WaitFor(t, 15*time.Second, "a sweep of the emptied Redis without INFO", emptied)
		if ended("lost") != lost || ended("released")+ended("expired") <= gone {
			t.Errorf("without INFO the restart was still told apart (lost %d -> %d, released+expired %d -> %d)", lost, ended("lost"), gone, ended("released")+ended("expired"))
		}
		if up := secMetric(t, p, "slot_exporter_up"); up != "1" {
			t.Errorf("without INFO slot_exporter_up = %q, want 1: INFO is optional", up)
		}
		// The sweep that found the server emptied may have read its INFO
		// before the restart; the warning comes with the first sweep
		// whose check is refused, and through the process's log pipe.
		want := "cannot read INFO; restarts and flushes will read as releases"
		exportertest.WaitFor(t, 15*time.Second, "the warning "+want, func() bool { return strings.Contains(p.logs.String(), want) })
	})
}

// TestTLSToRedis: the exporter sweeps a TLS-only Redis that requires client
// certificates, through a tls block or a rediss:// address; with a wrong CA,
// no client certificate or no TLS at all it reports up 0 and says why.
func TestTLSToRedis(t *testing.T) {
	certs, other := tlstest.New(t), tlstest.New(t)
	srv := tlstest.StartRedis(t, certs, true)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, TLSConfig: certs.ClientConfig(), DisableIdentity: true})
	t.Cleanup(func() { _ = c.Close() })
	secSeed(t, c)
	tlsBlock := func(ca, extra string) string {
		return fmt.Sprintf("  tls:\n    ca_file: %q\n    cert_file: %q\n    key_file: %q\n%s", ca, certs.ClientCertFile, certs.ClientKeyFile, extra)
	}

	for name, block := range map[string]string{
		"tls block":  fmt.Sprintf("  addr: %q\n", srv.Addr) + tlsBlock(certs.CAFile, "    server_name: localhost\n"),
		"rediss URL": fmt.Sprintf("  addr: \"rediss://localhost:%d\"\n", srv.Port) + tlsBlock(certs.CAFile, ""),
	} {
		t.Run(name, func(t *testing.T) {
			p := startExporter(t, "--config.file="+secConfig(t, t.TempDir(), block))
			secWaitUp(t, p)
			_, page := p.get(t, "/metrics")
			secCheckSeeded(t, page)
		})
	}

	for name, c := range map[string]struct{ block, want string }{
		"wrong CA":              {fmt.Sprintf("  addr: %q\n", srv.Addr) + tlsBlock(other.CAFile, ""), "certificate signed by unknown authority"},
		"no client certificate": {fmt.Sprintf("  addr: %q\n  tls:\n    ca_file: %q\n", srv.Addr, certs.CAFile), "tls: certificate required"},
		"no TLS":                {fmt.Sprintf("  addr: %q\n", srv.Addr), "sweep failed"},
	} {
		t.Run(name, func(t *testing.T) {
			p := startExporter(t, "--config.file="+secConfig(t, t.TempDir(), c.block))
			secWaitFailing(t, p, "streams", 0)
			if code, _ := p.get(t, "/-/ready"); code != http.StatusServiceUnavailable {
				t.Errorf("/-/ready: %d, want 503", code)
			}
			if !strings.Contains(p.logs.String(), c.want) {
				t.Errorf("the log does not say %q:\n%s", c.want, p.logs.String())
			}
		})
	}
}

// webHash is bcrypt("scrape-pw-7f3a9c") at the minimum cost, precomputed
// so the test needs no bcrypt import.
const (
	webUser     = "prometheus"
	webPassword = "scrape-pw-7f3a9c"
	webHash     = "$2a$04$2m8UWKJLGjt/PdhnYixIp.xGvwvq6bHKm07a133/Wg920RP3kE19S"
)

// secStartHTTPS is startExporter for an exporter behind --web.config.file
// with TLS and basic auth.
func secStartHTTPS(t *testing.T, client *http.Client, args ...string) *exporterProc {
	t.Helper()
	return startExporterAt(t, "https", func(base string) bool {
		code, _, err := secDo(client, http.MethodGet, base+"/-/healthy", webUser, webPassword)
		return err == nil && code == http.StatusOK
	}, args...)
}

func secDo(client *http.Client, method, url, user, pass string) (int, string, error) {
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		return 0, "", err
	}
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// TestWebConfigHTTPSAndBasicAuth: with --web.config.file the exporter serves
// HTTPS only, and every page, /-/reload included, wants the basic-auth
// user.
func TestWebConfigHTTPSAndBasicAuth(t *testing.T) {
	srv := redistest.Start(t)
	secSeed(t, srv.Client())
	certs := tlstest.New(t)
	dir := t.TempDir()
	cfg := secConfig(t, dir, fmt.Sprintf("  addr: %q\n", srv.Addr))
	webCfg := filepath.Join(dir, "web.yml")
	exportertest.WriteFile(t, webCfg, fmt.Sprintf("tls_server_config:\n  cert_file: %q\n  key_file: %q\nbasic_auth_users:\n  %s: %q\n",
		certs.CertFile, certs.KeyFile, webUser, webHash))
	client := &http.Client{
		Timeout:   2 * time.Minute,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: certs.Pool, MinVersion: tls.VersionTLS12}},
	}
	t.Cleanup(client.CloseIdleConnections)
	p := secStartHTTPS(t, client, "--config.file="+cfg, "--web.config.file="+webCfg)

	exportertest.WaitFor(t, 10*time.Second, "up over HTTPS", func() bool {
		code, body, err := secDo(client, http.MethodGet, p.base+"/metrics", webUser, webPassword)
		return err == nil && code == http.StatusOK && metric(body, "slot_exporter_up") == "1"
	})
	for _, r := range []struct{ method, path string }{
		{"GET", "/metrics"}, {"GET", "/"}, {"GET", "/-/healthy"}, {"GET", "/-/ready"}, {"POST", "/-/reload"},
	} {
		for who, cred := range map[string][2]string{
			"no credentials": {"", ""},
			"wrong password": {webUser, webPassword + "x"},
			"unknown user":   {"root", webPassword},
		} {
			code, _, err := secDo(client, r.method, p.base+r.path, cred[0], cred[1])
			if err != nil || code != http.StatusUnauthorized {
				t.Errorf("%s %s with %s: %d, %v; want 401", r.method, r.path, who, code, err)
			}
		}
		code, _, err := secDo(client, r.method, p.base+r.path, webUser, webPassword)
		if err != nil || code != http.StatusOK {
			t.Errorf("%s %s with the right credentials: %d, %v; want 200", r.method, r.path, code, err)
		}
	}

	// Plain HTTP to the HTTPS port is a 400, not a page.
	plain := &http.Client{Timeout: 2 * time.Minute}
	code, _, err := secDo(plain, http.MethodGet, "http"+strings.TrimPrefix(p.base, "https")+"/metrics", webUser, webPassword)
	if err != nil || code != http.StatusBadRequest {
		t.Errorf("plain HTTP: %d, %v; want 400", code, err)
	}
	exportertest.WaitFor(t, 5*time.Second, "the server's own errors in the exporter's log", func() bool {
		return strings.Contains(p.logs.String(), "client sent an HTTP request to an HTTPS server")
	})
	// A client that does not trust the CA does not get through.
	untrusting := &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12}}}
	if _, _, err := secDo(untrusting, http.MethodGet, p.base+"/metrics", webUser, webPassword); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("client without the CA: err = %v, want a certificate error", err)
	}
	secNoSecret(t, "the exporter's log", p.logs.String(), webPassword)
}

// secRaw sends one raw request and reads the response's status and
// headers. The write runs on its own so that a server answering before it
// has read everything (431) cannot deadlock the test.
func secRaw(t *testing.T, addr, raw string) (int, http.Header) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	go func() { _, _ = io.WriteString(conn, raw) }()
	method, _, _ := strings.Cut(raw, " ")
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: method})
	if err != nil {
		t.Errorf("%.60q: no response: %v", raw, err)
		return 0, nil
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<20))
	resp.Body.Close()
	return resp.StatusCode, resp.Header
}

// TestHTTPRobustness: wrong methods, junk headers, oversized and malformed
// requests, path tricks and old protocol versions get 2xx/3xx/4xx answers,
// never a 5xx or a crash, and the exporter keeps serving.
func TestHTTPRobustness(t *testing.T) {
	srv := redistest.Start(t)
	secSeed(t, srv.Client())
	cfg := secConfig(t, t.TempDir(), fmt.Sprintf("  addr: %q\n", srv.Addr))
	p := startExporter(t, "--config.file="+cfg)
	exportertest.WaitFor(t, 10*time.Second, "ready", func() bool { c, _ := p.get(t, "/-/ready"); return c == 200 })
	addr := strings.TrimPrefix(p.base, "http://")

	type check struct {
		name, raw string
		want      int // 0: any 2xx-4xx
	}
	req := func(method, path string, headers ...string) string {
		return method + " " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + strings.Join(headers, "") + "\r\n"
	}
	var checks []check
	for _, m := range []string{"GET", "HEAD", "DELETE", "OPTIONS", "PATCH", "TRACE"} {
		checks = append(checks, check{m + " /-/reload", req(m, "/-/reload"), http.StatusMethodNotAllowed})
	}
	for _, path := range []string{"/-/healthy", "/-/ready"} {
		for _, m := range []string{"POST", "PUT", "DELETE", "PATCH"} {
			checks = append(checks, check{m + " " + path, req(m, path), http.StatusMethodNotAllowed})
		}
		checks = append(checks, check{"HEAD " + path, req("HEAD", path), http.StatusOK})
	}
	for _, path := range []string{"/", "/metrics", "/-/healthy", "/-/ready", "/-/reload"} {
		for _, m := range []string{"GET", "POST", "PUT", "DELETE", "OPTIONS", "TRACE", "FOO", "CONNECT"} {
			checks = append(checks, check{m + " " + path + " (any)", req(m, path), 0})
		}
	}
	for _, accept := range []string{
		";;;,,,=", "*/*;q=banana", "application/openmetrics-text; version=99.0", "application/openmetrics-text; version=1.0.0; escaping=bogus",
		"application/vnd.google.protobuf;proto=bogus;encoding=delimited", "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=text",
		"text/plain;version=0.0.4;escaping=nonsense", strings.Repeat("text/plain,", 2000), "\xff\xfe",
	} {
		checks = append(checks, check{"Accept " + accept[:min(len(accept), 30)], req("GET", "/metrics", "Accept: "+accept+"\r\n", "Accept-Encoding: gzip;q=x, br, zstd, *;q=-1\r\n"), http.StatusOK})
	}
	body := strings.Repeat("x", 300<<10)
	checks = append(checks,
		check{"GET /metrics with a body", req("GET", "/metrics", "Content-Length: 5\r\n") + "hello", http.StatusOK},
		check{"POST /metrics with a large body", req("POST", "/metrics", fmt.Sprintf("Content-Length: %d\r\n", len(body))) + body, http.StatusOK},
		check{"chunked junk to /-/healthy", req("GET", "/-/healthy", "Transfer-Encoding: chunked\r\n") + "zz\r\n\r\n", 0},
		check{"negative Content-Length", req("POST", "/-/reload", "Content-Length: -5\r\n"), http.StatusBadRequest},
		check{"conflicting Content-Length", req("POST", "/metrics", "Content-Length: 1\r\n", "Content-Length: 2\r\n") + "ab", http.StatusBadRequest},
		check{"huge header", req("GET", "/metrics", "X-Big: "+strings.Repeat("a", 1<<20+8192)+"\r\n"), http.StatusRequestHeaderFieldsTooLarge},
		check{"huge URL", req("GET", "/metrics?"+strings.Repeat("a", 1<<20+8192)), http.StatusRequestHeaderFieldsTooLarge},
		check{"header without colon", req("GET", "/metrics", "NoColonHere\r\n"), http.StatusBadRequest},
		check{"control byte in Host", "GET /metrics HTTP/1.1\r\nHost: a\x01b\r\n\r\n", http.StatusBadRequest},
		check{"garbage request line", "GARBAGE\r\n\r\n", http.StatusBadRequest},
		check{"request line without version", "GET /metrics\r\n\r\n", http.StatusBadRequest},
		check{"TLS handshake on the plain port", "\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + strings.Repeat("\x00", 40) + "\r\n\r\n", http.StatusBadRequest},
		check{"HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", http.StatusBadRequest},
		check{"HTTP/1.1 without Host", "GET /metrics HTTP/1.1\r\n\r\n", http.StatusBadRequest},
		check{"HTTP/1.0 without Host", "GET /metrics HTTP/1.0\r\n\r\n", http.StatusOK},
		check{"absolute URI", "GET http://evil.example/-/healthy HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", http.StatusOK},
		check{"bad escape", req("GET", "/%"), http.StatusBadRequest},
		check{"encoded traversal", req("GET", "/..%2f..%2fetc/passwd"), http.StatusNotFound},
		check{"encoded dots", req("GET", "/%2e%2e/%2e%2e/etc/passwd"), http.StatusNotFound},
		check{"NUL in path", req("GET", "/-/healthy%00"), http.StatusNotFound},
		check{"trailing slash", req("GET", "/metrics/"), http.StatusNotFound},
		check{"bad query on /metrics", req("GET", "/metrics?%zz&name[]=;"), http.StatusOK},
		// net/http itself answers an unknown protocol version, before any
		// handler runs; 505 is the correct status, and the one 5xx here.
		check{"HTTP/9.9", "GET /metrics HTTP/9.9\r\nHost: x\r\n\r\n", http.StatusHTTPVersionNotSupported},
	)
	for _, c := range checks {
		code, hdr := secRaw(t, addr, c.raw)
		switch {
		case code == 0:
		case c.want != 0 && code != c.want:
			t.Errorf("%s: %d, want %d", c.name, code, c.want)
		case c.want == 0 && (code < 200 || code >= 500):
			t.Errorf("%s: %d, want 2xx-4xx", c.name, code)
		case code == http.StatusMethodNotAllowed && hdr.Get("Allow") == "":
			t.Errorf("%s: 405 without an Allow header", c.name)
		}
	}
	// Unclean paths are redirected to their clean form on this server,
	// never elsewhere, and what they lead to is not found.
	for _, path := range []string{"/../../etc/passwd", "//etc/passwd", "/metrics/../../etc/passwd"} {
		code, hdr := secRaw(t, addr, req("GET", path))
		loc := hdr.Get("Location")
		if code/100 != 3 || !strings.HasPrefix(loc, "/") || strings.HasPrefix(loc, "//") {
			t.Errorf("%s: %d Location %q, want a redirect to a local path", path, code, loc)
			continue
		}
		if code, _ := secRaw(t, addr, req("GET", loc)); code != http.StatusNotFound {
			t.Errorf("%s -> %s: %d, want 404", path, loc, code)
		}
	}

	if code, page := p.get(t, "/metrics"); code != http.StatusOK || metric(page, "slot_exporter_up") != "1" {
		t.Errorf("after the abuse, /metrics: %d, up %q", code, metric(page, "slot_exporter_up"))
	}
	if strings.Contains(p.logs.String(), "panic") {
		t.Errorf("a handler panicked:\n%s", p.logs.String())
	}
}

// TestACLTrackingCommands: each of change tracking's commands is needed.
// Without one, the exporter says it cannot track changes (or lost
// tracking) and reads every key every sweep, which still succeeds.
func TestACLTrackingCommands(t *testing.T) {
	for _, cmd := range trackingCommands {
		t.Run("without "+cmd, func(t *testing.T) {
			pw := redisproc.Secret()
			dir := t.TempDir()
			aclFile := filepath.Join(dir, "users.acl")
			exportertest.WriteFile(t, aclFile, "user default on nopass ~* &* +@all\n"+aclUserWithout(pw, true, cmd)+"\n")
			srv := redistest.Start(t, "--aclfile", aclFile)
			secSeed(t, srv.Client())
			pf := filepath.Join(dir, "pw")
			exportertest.WriteFile(t, pf, pw)
			cfg := secConfig(t, dir, fmt.Sprintf("  addr: %q\n  username: exporter\n  password_file: %q\n", srv.Addr, pf), "track_changes: true")
			p := startExporter(t, "--config.file="+cfg)
			secWaitUp(t, p)
			exportertest.WaitFor(t, 10*time.Second, "the exporter to say change tracking is off", func() bool {
				l := p.logs.String()
				return strings.Contains(l, "cannot track changes") || strings.Contains(l, "change tracking lost")
			})
			_, page := p.get(t, "/metrics")
			secCheckSeeded(t, page)
		})
	}
}
