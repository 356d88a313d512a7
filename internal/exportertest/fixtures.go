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
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/redisproc"
	"github.com/slotexporter/slot_exporter/internal/redistest"
)

// KindFamilies is one family of every kind, as the release and web tests
// read and release them: the common slot sets (found by their hash-tag
// name), locks whose names the user regexp cannot be inverted into (found
// by the SCAN fallback), counters, rate counters, a queue and a stream
// (neither releasable).
func KindFamilies() []redisproc.Family {
	return []redisproc.Family{
		redisproc.Slots(),
		{Name: "legacy", Kind: "counter", Match: "legacy:*", Limit: 3},
		{Name: "api", Kind: "ratelimit", Match: "rl:api:*", Limit: 100, Extra: []string{"window: 1m"}},
		{Name: "jobs", Kind: "lock", Match: "lock:job:*", User: `^lock:job:[a-z]+-(.+)$`, TTL: 30 * time.Second, MaxHold: 10 * time.Minute},
		{Name: "mail", Kind: "list", Match: "queue:mail:*", Extra: []string{"max_wait: 5m"}},
		{Name: "events", Kind: "stream", Match: "stream:events:*", MaxHold: 5 * time.Minute},
	}
}

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
	// YAML is the config: the redis block, KindFamilies and the release
	// block.
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
	yaml := redisproc.Config{Addr: srv.Addr, Families: KindFamilies()}.YAML() +
		fmt.Sprintf("release:\n  username: %s\n  password_file: %q\n", ReleaseUser, pw)
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
