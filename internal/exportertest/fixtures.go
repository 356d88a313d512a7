package exportertest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/redistest"
)

// KindFamilies is one family of every kind, as the release and web tests
// read and release them: slot sets found by their hash-tag name, locks
// whose names the user regexp cannot be inverted into (found by the SCAN
// fallback), counters, rate counters, a queue and a stream (neither
// releasable).
const KindFamilies = `
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
  - name: events
    kind: stream
    match: "stream:events:*"
    max_hold: 5m
`

// KindKeyPatterns are the key patterns of KindFamilies' releasable kinds
// and of the queue, the keys a release user of the tests may touch.
var KindKeyPatterns = []string{"joishi:*", "legacy:*", "rl:*", "lock:*", "queue:*"}

// Release user of ReleaseServer: the name and password its config logs in
// with.
const (
	ReleaseUser     = "releaser"
	releasePassword = "rel-secret"
)

// ReleaseServer is a real Redis with a release user, and the config that
// reads KindFamilies from it and releases as that user.
type ReleaseServer struct {
	Server *redistest.Server
	// Admin is the default user's client, for the test's own reads and
	// writes.
	Admin *redis.Client
	// Dir is the test's scratch directory; it holds the password file.
	Dir string
	// YAML is the config: the redis block, the release block and
	// KindFamilies.
	YAML string
}

// StartReleaseServer starts Redis with ReleaseUser holding exactly
// aclRule (an ACL SETUSER rule list, release.ACLRule's), its password in
// a file of the config's release block.
func StartReleaseServer(t testing.TB, aclRule string) *ReleaseServer {
	t.Helper()
	srv := redistest.Start(t)
	admin := srv.Client()
	dir := t.TempDir()
	pw := filepath.Join(dir, "release.pw")
	WriteFile(t, pw, releasePassword+"\n")
	args := []any{"ACL", "SETUSER", ReleaseUser, "reset", "on", ">" + releasePassword}
	for _, r := range strings.Fields(aclRule) {
		args = append(args, r)
	}
	if err := admin.Do(context.Background(), args...).Err(); err != nil {
		t.Fatalf("ACL SETUSER: %v", err)
	}
	yaml := fmt.Sprintf("redis: {addr: %q}\nrelease: {username: %s, password_file: %q}\n%s", srv.Addr, ReleaseUser, pw, KindFamilies)
	return &ReleaseServer{Server: srv, Admin: admin, Dir: dir, YAML: yaml}
}

// WriteFile writes a file only the owner may read, failing the test on an
// error.
func WriteFile(t testing.TB, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// RedisTime is the server's TIME in ms: the clock members are classified
// by.
func RedisTime(t testing.TB, c redis.Cmdable) int64 {
	t.Helper()
	tm, err := c.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return tm.UnixMilli()
}

// JSONLines reads a file of one JSON object a line (an audit file) back.
func JSONLines[T any](t testing.TB, path string) []T {
	t.Helper()
	file, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	var out []T
	sc := bufio.NewScanner(file)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("%s: line %q: %v", filepath.Base(path), sc.Text(), err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: %v", filepath.Base(path), err)
	}
	return out
}
