package topology

import "testing"

// TestUnsyncedFromInfo: the fields unsynced weighs, as a Redis 7.0 replica
// showed them (TestUnsyncedReplica makes each state on real servers), and
// as a server before 7.0 says that the link was never up: down since the
// epoch.
func TestUnsyncedFromInfo(t *testing.T) {
	cases := []struct {
		name, repl, server string
		want               bool
	}{
		{"synced", "role:slave\r\nmaster_link_status:up\r\nmaster_sync_in_progress:0\r\nmaster_repl_offset:1840\r\n",
			"uptime_in_seconds:9\r\n", false},
		{"restarted empty, its master stopped",
			"role:slave\r\nmaster_link_status:down\r\nmaster_sync_in_progress:0\r\nmaster_link_down_since_seconds:-1\r\nmaster_repl_offset:0\r\n",
			"uptime_in_seconds:0\r\n", true},
		{"restarted empty, in its first sync",
			"role:slave\r\nmaster_link_status:down\r\nmaster_sync_in_progress:1\r\nmaster_link_down_since_seconds:-1\r\nmaster_repl_offset:0\r\n",
			"uptime_in_seconds:0\r\n", true},
		{"synced, in a full resync",
			"role:slave\r\nmaster_link_status:down\r\nmaster_sync_in_progress:1\r\nmaster_link_down_since_seconds:0\r\nmaster_repl_offset:1840\r\n",
			"uptime_in_seconds:0\r\n", false},
		{"synced, its master dead",
			"role:slave\r\nmaster_link_status:down\r\nmaster_sync_in_progress:0\r\nmaster_link_down_since_seconds:4\r\nmaster_repl_offset:67411\r\n",
			"uptime_in_seconds:30\r\n", false},
		{"restarted from the RDB file of its last sync, its master stopped",
			"role:slave\r\nmaster_link_status:down\r\nmaster_sync_in_progress:0\r\nmaster_link_down_since_seconds:-1\r\nmaster_repl_offset:3107\r\n",
			"uptime_in_seconds:2\r\n", false},
		// Its master had taken no write since the replica attached, and
		// died before its first PING (every 10 s) went down the link.
		{"synced at offset 0, its master dead",
			"role:slave\r\nmaster_link_status:down\r\nmaster_sync_in_progress:0\r\nmaster_link_down_since_seconds:3\r\nmaster_repl_offset:0\r\n",
			"uptime_in_seconds:30\r\n", false},
		{"before 7.0: never up",
			"role:slave\r\nmaster_link_status:down\r\nmaster_sync_in_progress:0\r\nmaster_link_down_since_seconds:1796571231\r\nmaster_repl_offset:0\r\n",
			"uptime_in_seconds:5\r\n", true},
		{"a master", "role:master\r\nmaster_repl_offset:0\r\n", "uptime_in_seconds:0\r\n", false},
	}
	for _, c := range cases {
		if got := unsynced(c.repl, c.server); got != c.want {
			t.Errorf("%s: unsynced %v, want %v", c.name, got, c.want)
		}
	}
}
