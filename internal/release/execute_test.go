package release

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/exportertest"
)

// TestReleaseUnanswered: a release whose answer never comes says that
// the members it sent may have been removed, rather than "failed, 0
// removed": Redis removed them, as here, once it had the request.
func TestReleaseUnanswered(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	now := f.now(t)
	key := f.slotSet(t, "u1", map[string]float64{"dead1": float64(now - 60_000), "dead2": float64(now - 60_000)})
	// The releaser's connections go through a proxy that will drop
	// Redis's answers; the script is loaded already, so that the one
	// call sent is the EVALSHA that removes.
	proxy := exportertest.StartMuteProxy(t, f.srv.Addr)
	body, err := os.ReadFile(f.cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(t.TempDir(), "proxied.yml")
	exportertest.WriteFile(t, cfgFile, strings.Replace(string(body), f.srv.Addr, proxy.Addr, 1))
	cfg, err := config.Load(cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.rel.Configure(cfg); err != nil {
		t.Fatal(err)
	}
	if err := membersScript.Load(ctx, f.admin).Err(); err != nil {
		t.Fatal(err)
	}
	p, err := f.rel.Preview(ctx, req("streams", "u1"))
	if err != nil || len(p.Keys) != 1 || len(p.Keys[0].Remove) != 2 {
		t.Fatalf("preview: %v, %+v; want two members to remove", err, p)
	}

	proxy.Mute()
	ectx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	out, err := f.rel.Execute(ectx, p, confirm("answer lost"))
	if err == nil || !strings.Contains(err.Error(), "Redis did not answer for 2 item(s), which may have been released") {
		t.Errorf("error %v, want it to say that 2 items may have been released", err)
	}
	if out.Result != ResultFailed || out.Unanswered != 2 || out.Removed != 0 || len(out.Items) != 2 {
		t.Errorf("outcome %s: unanswered %d removed %d, %d items; want failed, 2 unanswered", out.Result, out.Unanswered, out.Removed, len(out.Items))
	}
	recs := f.records(t)
	last := recs[len(recs)-1]
	if last.Result != ResultFailed || len(last.Items) != 2 || last.Items[0].Outcome != Unanswered || last.Items[1].Outcome != Unanswered {
		t.Errorf("audit outcome %+v, want failed with both members unanswered", last)
	}
	// What Redis did meanwhile: it removed both. A minute bounds the
	// wait only to fail rather than hang.
	for end := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		n, err := f.admin.ZCard(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("%d members still in Redis, want the release's script to have removed both", n)
		}
	}
}
