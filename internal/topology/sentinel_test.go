package topology

import "testing"

func TestChooseReplica(t *testing.T) {
	r := func(port, flags, link, offset string) map[string]string {
		return map[string]string{"ip": "10.0.0.1", "port": port, "flags": flags, "master-link-status": link, "slave-repl-offset": offset}
	}
	rs := []map[string]string{
		r("1", "slave", "ok", "100"),
		r("2", "slave", "ok", "300"),
		r("3", "slave,s_down", "ok", "900"),
		r("4", "slave,disconnected", "ok", "900"),
		r("5", "slave", "err", "900"),
	}
	for _, c := range []struct{ last, want string }{
		{"", "10.0.0.1:2"},           // the furthest along of the usable
		{"10.0.0.1:1", "10.0.0.1:1"}, // the last, while usable
		{"10.0.0.1:3", "10.0.0.1:2"}, // down
		{"10.0.0.1:4", "10.0.0.1:2"}, // disconnected from Sentinel
		{"10.0.0.1:5", "10.0.0.1:2"}, // its link to the master down
	} {
		if got := chooseReplica(rs, c.last); got != c.want {
			t.Errorf("last %q: picked %q, want %q", c.last, got, c.want)
		}
	}
	if got := chooseReplica(rs[2:], ""); got != "" {
		t.Errorf("no usable replica: picked %q", got)
	}
}
