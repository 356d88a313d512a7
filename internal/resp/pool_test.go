package resp_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/redistest"
	"github.com/slotexporter/slot_exporter/internal/resp"
)

// TestPoolDropsClosedConnections: an idle connection that Redis closed
// (CLIENT KILL, its timeout for idle clients) is not handed out again; a
// live one is.
func TestPoolDropsClosedConnections(t *testing.T) {
	srv := redistest.Start(t)
	cl := srv.Client()
	ctx := context.Background()
	p := resp.NewPool(false)
	t.Cleanup(p.Close)
	id := func(c *resp.Conn) int64 {
		t.Helper()
		v, err := c.Call(ctx, "CLIENT", "ID")
		if err != nil {
			t.Fatal(err)
		}
		return v.(int64)
	}
	c, err := p.Get(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	first := id(c)
	p.Put(cl, c)
	if c, err = p.Get(ctx, cl); err != nil || id(c) != first {
		t.Fatalf("a live idle connection was not reused: %v", err)
	}
	p.Put(cl, c)
	if err := cl.ClientKillByFilter(ctx, "ID", itoa(first)).Err(); err != nil {
		t.Fatal(err)
	}
	// Redis closes a killed client after answering the kill: wait until
	// it has (the client gone from CLIENT LIST).
	exportertest.WaitFor(t, time.Minute, "the killed client to be closed", func() bool {
		list, err := cl.ClientList(ctx).Result()
		return err == nil && !strings.Contains(list, "id="+itoa(first)+" ")
	})
	c, err = p.Get(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if got := id(c); got == first {
		t.Errorf("the killed connection %d was handed out again", first)
	}
	p.Put(cl, c)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
