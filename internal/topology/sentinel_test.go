package topology

import (
	"testing"

	"github.com/redis/go-redis/v9"
)

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

// TestRouterForReadsTheSweepsServer: through Sentinel with read_from:
// replica, a family's keys read every sweep go to the server its own sweep
// listed, not to the one another family's sweep picked after it.
func TestRouterForReadsTheSweepsServer(t *testing.T) {
	base := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer base.Close()
	topo := &Topology{single: base, sentinel: newSentinelReplicas(base, &redis.FailoverOptions{MasterName: "m"})}
	defer topo.Close()
	mine := redis.NewClient(&redis.Options{Addr: "127.0.0.1:2"})
	defer mine.Close()
	// Another family's sweep picked 127.0.0.1:3 after this one listed
	// its server.
	other := redis.NewClient(&redis.Options{Addr: "127.0.0.1:3"})
	topo.sentinel.clients["127.0.0.1:3"], topo.sentinel.last = other, "127.0.0.1:3"
	nodes := []Node{{Addr: "127.0.0.1:2", C: mine, Group: topo.sentinel.group()}}
	if got := topo.RouterFor(nodes); got != redis.Cmdable(mine) {
		t.Fatalf("RouterFor the sweep's nodes = %v, want its own server 127.0.0.1:2", got)
	}
	if got := topo.Router(); got != redis.Cmdable(other) {
		t.Fatalf("Router = %v, want the server picked last, 127.0.0.1:3", got)
	}

	// Elsewhere RouterFor is Router: a standalone server, whatever the
	// nodes say.
	plain := New(base, false)
	if got := plain.RouterFor(nodes); got != redis.Cmdable(base) {
		t.Fatalf("standalone RouterFor = %v, want the client itself", got)
	}
}
