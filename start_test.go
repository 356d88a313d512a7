package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/redistest"
)

// noEnv clears the environment the configuration reads, and runs the test
// in an empty directory (no ./slot_exporter.yml).
func noEnv(t *testing.T) {
	for _, k := range []string{"REDIS_ADDR", "REDIS_USER", "REDIS_PASSWORD", "REDIS_PASSWORD_FILE", configEnv} {
		t.Setenv(k, "")
	}
	t.Chdir(t.TempDir())
}

// TestHelpAndVersionOnStdout: `slot_exporter --version | grep -q version`
// and `slot_exporter --help | grep -q config.file` work, as node_exporter's
// do, and the help's listen example is the exporter's own port.
func TestHelpAndVersionOnStdout(t *testing.T) {
	code, out, errs := runOnce(t, "--version")
	if code != 0 || !strings.Contains(out, "version") || errs != "" {
		t.Errorf("--version: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	code, out, errs = runOnce(t, "--help")
	if code != 0 || !strings.Contains(out, "--config.file") || !strings.Contains(out, "demo") || errs != "" {
		t.Errorf("--help: exit %d, stderr %q, stdout:\n%s", code, errs, out)
	}
	if !strings.Contains(out, "`:10121`") || strings.Contains(out, "9100") {
		t.Errorf("--help: the listen example should be :10121:\n%s", out)
	}
	code, _, errs = runOnce(t, "--no-such-flag")
	if code != 2 || !strings.Contains(errs, "no-such-flag") {
		t.Errorf("a bad flag: exit %d, stderr %q", code, errs)
	}
}

// TestHelpListsREADMEFlags: README's flag table and `slot_exporter help
// serve` list the same flags. A newcomer found --family in the table but
// not in --help, which lists the app's flags and not the default command's.
func TestHelpListsREADMEFlags(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	table := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `--([a-z][a-z.-]*)` \\|").FindAllSubmatch(readme, -1) {
		table[string(m[1])] = true
	}
	code, out, errs := runOnce(t, "help", "serve")
	if code != 0 || errs != "" {
		t.Fatalf("help serve: exit %d, stderr %q", code, errs)
	}
	help := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  (?:-\w, |    )--(?:\[no-\])?([a-z][a-z.-]*)`).FindAllStringSubmatch(out, -1) {
		if m[1] != "help" {
			help[m[1]] = true
		}
	}
	if len(table) < 10 || len(help) < 10 {
		t.Fatalf("README's table has %d flags and help serve %d: the patterns no longer match", len(table), len(help))
	}
	for f := range help {
		if !table[f] {
			t.Errorf("--%s is in help serve but not in README's flag table", f)
		}
	}
	for f := range table {
		if !help[f] {
			t.Errorf("--%s is in README's flag table but not in help serve:\n%s", f, out)
		}
	}
	if _, out, _ := runOnce(t, "--help"); !strings.Contains(out, "help serve") {
		t.Errorf("--help does not say where --family is listed:\n%s", out)
	}
}

// TestNoConfigSaysHow: started with nothing, it says how to give a
// configuration, and how to try it without one.
func TestNoConfigSaysHow(t *testing.T) {
	noEnv(t)
	code, _, errs := runOnce(t, "--web.listen-address=127.0.0.1:0")
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr %q", code, errs)
	}
	for _, want := range []string{"no configuration", "--config.file", configEnv, "REDIS_ADDR", "--family", "--demo"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q: %s", want, errs)
		}
	}
}

// TestFamilyFlagWithoutFile: REDIS_ADDR and --family are a whole
// configuration: metrics from a real Redis, no file anywhere, and the log
// says where each part came from.
func TestFamilyFlagWithoutFile(t *testing.T) {
	noEnv(t)
	srv := redistest.Start(t)
	c := srv.Client()
	ctx := context.Background()
	c.ZAdd(ctx, "joishi:streams:{u1}", redis.Z{Score: float64(time.Now().Add(time.Minute).UnixMilli()), Member: "a"})
	c.PExpire(ctx, "joishi:streams:{u1}", 2*time.Minute)
	c.Set(ctx, "legacy:{u2}", -1, 0)
	t.Setenv("REDIS_ADDR", srv.Addr)
	p := startExporter(t, "--family", "streams=slotset:joishi:streams:*", "--family", "legacy=counter:legacy:*,limit=3")
	var page string
	exportertest.WaitFor(t, time.Minute, "both families swept", func() bool {
		_, page = p.get(t, "/metrics")
		return metric(page, `slot_sets{family="streams"}`) == "1" && metric(page, `slot_counters_negative{family="legacy"}`) == "1"
	})
	if got := metric(page, `slot_family_limit{family="legacy"}`); got != "3" {
		t.Errorf("legacy limit %q, want 3 (limit=3 in --family)", got)
	}
	if got := metric(page, `slot_family_limit{family="streams"}`); got != "1e+06" {
		t.Errorf("streams limit %q, want the documented default 1e+06", got)
	}
	logs := p.logs.String()
	for _, want := range []string{"msg=configuration file=none", `redis.addr="from REDIS_ADDR"`, `families="from --family"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("start-up log lacks %q:\n%s", want, logs)
		}
	}
}

// TestPrecedence: the environment's Redis wins over the file's, a flag's
// file over the environment's, and --family over the file's families.
func TestPrecedence(t *testing.T) {
	noEnv(t)
	srv := redistest.Start(t)
	srv.Client().Set(context.Background(), "lock:job:{a}", "token", 0)
	dir := t.TempDir()
	fromEnv := filepath.Join(dir, "env.yml")
	// Nothing listens on port 1: the file's addr must lose to REDIS_ADDR.
	writeConfig(t, fromEnv, "127.0.0.1:1", "from_env_file")
	fromFlag := filepath.Join(dir, "flag.yml")
	writeConfig(t, fromFlag, "127.0.0.1:1", "from_flag_file")
	t.Setenv(configEnv, fromEnv)
	t.Setenv("REDIS_ADDR", srv.Addr)

	p := startExporter(t)
	var page string
	exportertest.WaitFor(t, time.Minute, "the env file's families, swept through REDIS_ADDR", func() bool {
		_, page = p.get(t, "/metrics")
		return metric(page, `slot_exporter_up`) == "1" && metric(page, `slot_family_info{family="from_env_file",kind="slotset"}`) == "1"
	})
	if !strings.Contains(p.logs.String(), `file="`+fromEnv+" ("+configEnv+`)"`) {
		t.Errorf("start-up log does not name the file and %s:\n%s", configEnv, p.logs.String())
	}

	q := startExporter(t, "--config.file="+fromFlag, "--family=locks=lock:lock:job:*")
	exportertest.WaitFor(t, time.Minute, "--family over the flag's file", func() bool {
		_, page = q.get(t, "/metrics")
		return metric(page, `slot_sets_without_ttl{family="locks"}`) == "1"
	})
	if strings.Contains(page, `family="from_flag_file"`) || strings.Contains(page, `family="from_env_file"`) {
		t.Errorf("--family should replace the file's families:\n%s", page)
	}
}

// TestBadFamilyFlag: a bad --family is refused at start with an error that
// names it and says what is wrong.
func TestBadFamilyFlag(t *testing.T) {
	noEnv(t)
	t.Setenv("REDIS_ADDR", "127.0.0.1:1")
	for _, c := range []struct{ flag, want string }{
		{"streams", `--family "streams": want name=kind:pattern`},
		{"=slotset:a:*", `want name=kind:pattern`},
		{"s=slotset", `want name=kind:pattern`},
		{"s=bucket:a:*", `--family "s=bucket:a:*": unknown kind "bucket" (slotset, counter`},
		{"s=slotset:", `--family "s=slotset:": no key pattern`},
		{"s=slotset:a:*,limit", `"limit" is not field=value`},
		{"s=slotset:a:*,kind=lock", `kind is given by name=kind:pattern`},
		{"s=slotset:a:*,limit=0", `--family "s=slotset:a:*,limit=0".limit: must be >= 1`},
		{"s=slotset:a:*,colour=red", `--family "s=slotset:a:*,colour=red": unknown field "colour"`},
		{"s=slotset:a:*,limit=3,limit=4", `--family "s=slotset:a:*,limit=3,limit=4": limit given twice`},
		{"s=slotset:a:*,Limit=4", `--family "s=slotset:a:*,Limit=4": unknown field "Limit"`},
		{"s=lock:a:*,window=1m", `--family "s=lock:a:*,window=1m".window: not used by kind lock`},
		{"s=list:nostar", `--family "s=list:nostar".match: must contain a *`},
	} {
		code, _, errs := runOnce(t, "--web.listen-address=127.0.0.1:0", "--family", c.flag)
		if code != 1 || !strings.Contains(errs, strings.ReplaceAll(c.want, `"`, `\"`)) {
			t.Errorf("--family %q: exit %d, stderr %s\nwant it to contain %s", c.flag, code, errs, c.want)
		}
	}
	code, out, errs := runOnce(t, "--config.check", "--family", "s=bucket:a:*")
	if code != 1 || !strings.Contains(errs, `unknown kind "bucket"`) || out != "" {
		t.Errorf("--config.check of a bad --family: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

// TestPasswordFileFromEnvNamed: a password file that cannot be read is
// named by the variable that gave it, at the check and at start, as the
// variables' other errors are: "redis.password_file" sent the person who
// set REDIS_PASSWORD_FILE looking for a config file.
func TestPasswordFileFromEnvNamed(t *testing.T) {
	noEnv(t)
	t.Setenv("REDIS_ADDR", "127.0.0.1:1")
	t.Setenv("REDIS_PASSWORD_FILE", filepath.Join(t.TempDir(), "missing"))
	const want = "REDIS_PASSWORD_FILE: open "
	if code, _, errs := runOnce(t, "--config.check", "--family", "x=lock:lock:*"); code != 1 || !strings.Contains(errs, want) {
		t.Errorf("--config.check: exit %d, stderr %q; want it to contain %q", code, errs, want)
	}
	if code, _, errs := runOnce(t, "--web.listen-address=127.0.0.1:0", "--family", "x=lock:lock:*"); code != 1 || !strings.Contains(errs, want) {
		t.Errorf("start: exit %d, stderr %q; want it to contain %q", code, errs, want)
	}
}

// TestPortTakenSaysOnlyThat: a port already in use is the one thing a
// failed start reports: no sweep starts, so no warning about Redis follows
// it on the way out.
func TestPortTakenSaysOnlyThat(t *testing.T) {
	noEnv(t)
	srv := redistest.Start(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cfg := filepath.Join(t.TempDir(), "c.yml")
	writeConfig(t, cfg, srv.Addr, "streams")
	code, _, errs := runOnce(t, "--config.file="+cfg, "--web.listen-address="+l.Addr().String())
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr %s", code, errs)
	}
	var problems []string
	for _, line := range strings.Split(strings.TrimSpace(errs), "\n") {
		if strings.Contains(line, "level=warn") || strings.Contains(line, "level=error") {
			problems = append(problems, line)
		}
	}
	if len(problems) != 1 || !strings.Contains(problems[0], "address already in use") {
		t.Errorf("want one error, the taken port; got %d:\n%s", len(problems), strings.Join(problems, "\n"))
	}
	if strings.Contains(errs, "INFO") {
		t.Errorf("a warning about INFO:\n%s", errs)
	}
}
