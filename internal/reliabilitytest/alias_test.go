package reliabilitytest

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/redistest"
)

// TestReloadToAnAliasLosesNothing: a reload that names the same server
// another way (localhost for 127.0.0.1) reads the same data; the holds
// that end after it are releases, because the server's run_id is one the
// family read before.
func TestReloadToAnAliasLosesNothing(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client()
	seedHolds(t, admin, "u", 10, 2, exportertest.RedisTime(t, admin)+115_000)
	e := newExporter(t, configYAML(addrBlock(srv.Addr), quickSampling, streamsFamily))
	e.sweep()
	for u := range 10 {
		exportertest.Must(t, admin.Del(ctx, streamKey(fmt.Sprintf("u%d", u))).Err())
	}
	alias := strings.Replace(srv.Addr, "127.0.0.1", "localhost", 1)
	if err := e.reload(configYAML(addrBlock(alias), quickSampling, streamsFamily)); err != nil {
		t.Fatal(err)
	}
	e.sweep()
	exportertest.Expect(t, e.metrics(), map[string]float64{releasedS: 20, lostS: 0})
	if w := e.records(slog.LevelWarn, "holds lost"); len(w) != 0 {
		t.Errorf("a reload to the same server under another name logged %+v", w)
	}
}
