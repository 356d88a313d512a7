package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/redisproc"
	"github.com/slotexporter/slot_exporter/internal/redistest"
	"github.com/slotexporter/slot_exporter/internal/release"
)

// TestLargeStringValuesStayOutOfMemory runs the real binary with
// GOMEMLIMIT=256MiB against 64 MB values under every string kind (counter,
// ratelimit, lock) beside ordinary keys: each sweep skips them as
// value_too_large while the ordinary keys are still reported, the
// process's own RSS and heap (process_resident_memory_bytes,
// go_memstats_heap_inuse_bytes) stay far below what reading one value
// whole would take, and the user pages, which read through the release
// readers, stay small and say why the value is not shown.
func TestLargeStringValuesStayOutOfMemory(t *testing.T) {
	const size = 64 << 20
	rs := exportertest.StartReleaseServer(t, release.ACLRule(exportertest.KindKeyPatterns...))
	ctx := context.Background()
	big := strings.Repeat("7", size) // digits: an integer but for its length
	for _, k := range []string{"legacy:big", "rl:api:big", "lock:job:eu-big"} {
		if err := rs.Admin.Set(ctx, k, big, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
	}
	rs.Admin.Set(ctx, "legacy:ok", 2, 0)
	rs.Admin.Set(ctx, "rl:api:ok", 5, time.Hour)
	rs.Admin.Set(ctx, "lock:job:eu-ok", "tok", time.Hour) // future: a lease longer than ttl

	// SLOT_EXPORTER_BIN runs an already built exporter (another
	// version's, to compare).
	bin := os.Getenv("SLOT_EXPORTER_BIN")
	if bin == "" {
		bins, err := redisproc.BuildBinaries(ctx, t.TempDir(), ".")
		if err != nil {
			t.Fatal(err)
		}
		bin = bins[0]
	}
	cfg := filepath.Join(rs.Dir, "slot_exporter.yml")
	exportertest.WriteFile(t, cfg, rs.YAML+"sampling:\n  interval: 200ms\n")
	port := redistest.FreePort(t)
	cmd := exec.Command(bin, "--config.file="+cfg, fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port))
	cmd.Env = append(os.Environ(), "GOMEMLIMIT=256MiB")
	logs := &exportertest.Buffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("exporter log:\n%s", logs.String())
		}
	})
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	scrape := func() map[string]float64 {
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			return nil
		}
		defer resp.Body.Close()
		out := map[string]float64{}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if i := strings.LastIndexByte(line, ' '); i > 0 && !strings.HasPrefix(line, "#") {
				if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
					out[line[:i]] = v
				}
			}
		}
		return out
	}
	skipped := func(m map[string]float64, fam string) float64 {
		return m[fmt.Sprintf(`slot_exporter_keys_skipped_total{family=%q,reason="value_too_large"}`, fam)]
	}
	const sweeps = 10
	var rss, heap float64
	var last map[string]float64
	exportertest.WaitFor(t, 5*time.Minute, fmt.Sprintf("%d sweeps skipping each large value", sweeps), func() bool {
		m := scrape()
		if m == nil {
			return false
		}
		last = m
		rss = max(rss, m["process_resident_memory_bytes"])
		heap = max(heap, m["go_memstats_heap_inuse_bytes"])
		return skipped(m, "legacy") >= sweeps && skipped(m, "api") >= sweeps && skipped(m, "jobs") >= sweeps
	})
	t.Logf("over %d sweeps of three %d MB values: peak RSS %.1f MiB, peak heap in use %.1f MiB (GOMEMLIMIT 256 MiB)",
		sweeps, size>>20, rss/(1<<20), heap/(1<<20))
	// One value read whole is 64 MiB of heap, and go-redis copies it
	// again into a string: the old reads went past 256 MiB.
	if rss >= 96<<20 || heap >= 32<<20 {
		t.Errorf("peak RSS %.1f MiB, heap %.1f MiB: a large value was read whole", rss/(1<<20), heap/(1<<20))
	}
	for _, s := range []string{
		`slot_users_active{family="legacy"}`, `slot_users_active{family="api"}`, `slot_members{family="jobs",state="future"}`,
	} {
		if last[s] != 1 {
			t.Errorf("%s = %v, want 1: the ordinary key beside the large one is still reported", s, last[s])
		}
	}
	for _, page := range []string{"/leaks/legacy/big", "/leaks/api/big", "/leaks/jobs/big"} {
		resp, err := http.Get(base + page)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Logf("%s: %d, %d bytes", page, resp.StatusCode, len(body))
		if resp.StatusCode != http.StatusOK || len(body) > 64<<10 || !strings.Contains(string(body), "longer than 512 bytes") {
			t.Errorf("%s: %d, %d bytes; want a small page that says the value is longer than 512 bytes", page, resp.StatusCode, len(body))
		}
	}
}
