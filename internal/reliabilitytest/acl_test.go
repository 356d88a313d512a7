package reliabilitytest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/redistest"
)

// TestACLNarrowerThanTheFamily: the exporter's ACL user may read only the
// keys of users a* (%R~t:streams:{a* and %R~t:legacy:{a*), while both
// families match every user. SCAN lists every key regardless of the key
// patterns (it names no key), so the exporter sees all ten; reading the
// five it may not read is refused per key (NOPERM ... keys). Those count
// as skipped with reason no_permission, and the five it may read are
// reported: the sweep succeeds. Through the raw reader (slot sets) and
// through go-redis (counters) alike. A command the ACL refuses outright
// is another matter: the sweep fails, loudly.
func TestACLNarrowerThanTheFamily(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client()
	exportertest.Must(t, admin.Do(ctx, "ACL", "SETUSER", "exporter", "on", ">s3cret", "%R~t:streams:{a*", "%R~t:legacy:{a*",
		"resetchannels", "-@all", "+scan", "+time", "+zscan", "+zrange", "+pttl", "+zcount", "+getrange", "+info").Err())
	pw := filepath.Join(t.TempDir(), "password")
	exportertest.Must(t, os.WriteFile(pw, []byte("s3cret\n"), 0o600))
	for _, u := range []string{"a0", "a1", "a2", "a3", "a4", "b0", "b1", "b2", "b3", "b4"} {
		seedHolds(t, admin, u, 1, 2, exportertest.RedisTime(t, admin)+115_000)
		exportertest.Must(t, admin.Set(ctx, "t:legacy:{"+u+"}", 2, 0).Err())
	}

	// What SCAN gives the narrow user: every key, readable or not.
	narrow := redis.NewClient(&redis.Options{Addr: srv.Addr, Username: "exporter", Password: "s3cret", DisableIdentity: true})
	t.Cleanup(func() { _ = narrow.Close() })
	listed, _, err := narrow.Scan(ctx, 0, "t:streams:*", 1000).Result()
	exportertest.Must(t, err)
	if len(listed) != 10 {
		t.Fatalf("SCAN as the narrow user listed %d keys, want all 10: %v", len(listed), listed)
	}

	e := newExporter(t, configYAML(addrBlock(srv.Addr)+fmt.Sprintf("  username: exporter\n  password_file: %q\n", pw), quickSampling, streamsFamily+`
  - name: legacy
    kind: counter
    match: "t:legacy:*"
    user: '^t:legacy:\{([^}]+)\}$'
    limit: 3
`))
	e.sweep()
	m := e.metrics()
	exportertest.Expect(t, m, map[string]float64{
		upS:                                   1,
		`slot_sets{family="streams"}`:         5,
		liveS:                                 10,
		`slot_users_active{family="streams"}`: 5,
		`slot_exporter_keys_scanned_total{family="streams"}`:                        10,
		`slot_exporter_keys_skipped_total{family="streams",reason="no_permission"}`: 5,
		`slot_sets{family="legacy"}`:                                                5,
		`slot_users_active{family="legacy"}`:                                        5,
		`slot_exporter_keys_scanned_total{family="legacy"}`:                         10,
		`slot_exporter_keys_skipped_total{family="legacy",reason="no_permission"}`:  5,
		`slot_exporter_sweep_errors_total{family="streams"}`:                        0,
	})
	for k := range exportertest.Series(m, "slot_user_used_max") {
		if strings.Contains(k, `user="b`) {
			t.Errorf("a user the ACL hides has a series: %s", k)
		}
	}
	// Redis keeps its own record of the refusals, for the operator.
	log, err := admin.Do(ctx, "ACL", "LOG").Slice()
	exportertest.Must(t, err)
	if len(log) == 0 {
		t.Errorf("ACL LOG is empty after refused reads")
	}

	// A second sweep: the skips add up, nothing ends (a key it may not
	// read is not a hold that ended: it was never tracked).
	e.sweep()
	exportertest.Expect(t, e.metrics(), map[string]float64{
		`slot_exporter_keys_skipped_total{family="streams",reason="no_permission"}`: 10,
		`slot_holds_ended_total{family="streams",outcome="released"}`:               0,
		acquiresS: 10,
	})

	// Without ZSCAN and ZRANGE, the family's sweep fails and says why: a
	// refused ZSCAN is read again with ZRANGE, whose refusal is the last.
	exportertest.Must(t, admin.Do(ctx, "ACL", "SETUSER", "exporter", "-zscan", "-zrange").Err())
	err = e.trySweep()
	if err == nil || !strings.Contains(err.Error(), "no permissions to run the 'zrange' command") {
		t.Fatalf("sweep without ZSCAN and ZRANGE: %v, want a NOPERM for the command", err)
	}
	exportertest.Expect(t, e.metrics(), map[string]float64{
		upS: 0,
		`slot_exporter_sweep_errors_total{family="streams"}`: 1,
		`slot_exporter_sweep_errors_total{family="legacy"}`:  0,
	})
}
