package discovery

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/redistest"
	"github.com/slotexporter/slot_exporter/internal/topology"
)

// TestNotifyCheckTellsSilenceFromRefusal: CheckNotify's error wraps
// ErrNoAnswer only when Redis did not answer, which the exporter starts
// through; a Redis that answers without the events, or refuses CONFIG GET,
// is a refusal, as it was.
func TestNotifyCheckTellsSilenceFromRefusal(t *testing.T) {
	ctx := context.Background()
	fams := []Family{{Name: "s", Match: "s:*", Re: regexp.MustCompile(`^s:.*$`), Classes: "z"}}
	check := func(addr, user string) error {
		o := &redis.Options{Addr: addr, DisableIdentity: true, MaxRetries: -1}
		if user != "" {
			o.Username, o.Password = user, "any" // nopass takes any
		}
		c := redis.NewClient(o)
		defer c.Close()
		return CheckNotify(ctx, topology.New(c, false), fams)
	}

	down := fmt.Sprintf("127.0.0.1:%d", redistest.FreePort(t))
	if err := check(down, ""); !errors.Is(err, ErrNoAnswer) {
		t.Errorf("Redis down: %v, want ErrNoAnswer", err)
	}

	srv := redistest.Start(t)
	err := check(srv.Addr, "")
	if err == nil || errors.Is(err, ErrNoAnswer) || !strings.Contains(err.Error(), "CONFIG SET notify-keyspace-events Kgxez") {
		t.Errorf("events off: %v, want a refusal that says what to set", err)
	}

	rc := srv.Client()
	if err := rc.Do(ctx, "ACL", "SETUSER", "noconfig", "on", "nopass", "~*", "&*", "+@all", "-config").Err(); err != nil {
		t.Fatal(err)
	}
	err = check(srv.Addr, "noconfig")
	if err == nil || errors.Is(err, ErrNoAnswer) || !strings.Contains(err.Error(), "NOPERM") {
		t.Errorf("CONFIG GET refused: %v, want a refusal (NOPERM)", err)
	}

	if err := rc.ConfigSet(ctx, "notify-keyspace-events", "Kgxez").Err(); err != nil {
		t.Fatal(err)
	}
	if err := check(srv.Addr, ""); err != nil {
		t.Errorf("events on: %v", err)
	}
}
