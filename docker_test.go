package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/redistest"
)

// image is what the Dockerfile's default (last) stage puts in the image.
type image struct {
	binaries   []string          // files copied into /bin
	copies     map[string]string // destination -> source, from the build context
	env        map[string]string
	entrypoint []string
	cmd        bool
}

func readDockerfile(t *testing.T) image {
	t.Helper()
	b, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var last []string
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "FROM ") {
			last = nil
		}
		if line != "" && !strings.HasPrefix(line, "#") {
			last = append(last, line)
		}
	}
	im := image{copies: map[string]string{}, env: map[string]string{}}
	for _, line := range last {
		word, rest, _ := strings.Cut(line, " ")
		switch word {
		case "COPY":
			f := strings.Fields(rest)
			src, dst := f[len(f)-2], f[len(f)-1]
			if strings.HasPrefix(dst, "/bin/") {
				im.binaries = append(im.binaries, dst)
			}
			if !strings.HasPrefix(f[0], "--from=") {
				im.copies[dst] = src
			}
		case "ENV":
			k, v, _ := strings.Cut(rest, "=")
			im.env[k] = v
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(rest), &im.entrypoint); err != nil {
				t.Fatalf("ENTRYPOINT %s: %v", rest, err)
			}
		case "CMD":
			im.cmd = true
		}
	}
	return im
}

// TestDockerImage: the image holds one binary, the exporter, and starts
// it with the env-driven default: REDIS_ADDR required, with a clear error
// without it, and metrics with it. Docker is not needed: the test runs the
// binary with the image's entrypoint arguments and environment, the config
// file taken from the build context.
func TestDockerImage(t *testing.T) {
	im := readDockerfile(t)
	if len(im.binaries) != 1 || im.binaries[0] != "/bin/slot_exporter" {
		t.Errorf("binaries in the image: %v, want only /bin/slot_exporter", im.binaries)
	}
	if len(im.entrypoint) != 1 || im.entrypoint[0] != "/bin/slot_exporter" || im.cmd {
		t.Errorf("ENTRYPOINT %v (CMD given: %v), want [/bin/slot_exporter] and no CMD: the default is the env-driven config", im.entrypoint, im.cmd)
	}
	cfgPath := im.env[configEnv]
	src, ok := im.copies[cfgPath]
	if cfgPath == "" || !ok {
		t.Fatalf("ENV %s=%q is not a file the Dockerfile copies in (copies: %v)", configEnv, cfgPath, im.copies)
	}

	src, err := filepath.Abs(src)
	if err != nil {
		t.Fatal(err)
	}
	noEnv(t)
	t.Setenv(configEnv, src)
	code, _, errs := runOnce(t, "--web.listen-address=127.0.0.1:0")
	if code != 1 || !strings.Contains(errs, "redis.addr: required") || !strings.Contains(errs, "REDIS_ADDR") {
		t.Errorf("without REDIS_ADDR: exit %d, want 1 and an error naming REDIS_ADDR; stderr:\n%s", code, errs)
	}

	srv := redistest.Start(t)
	srv.Client().Set(context.Background(), "lock:job:{a}", "token", 0)
	t.Setenv("REDIS_ADDR", srv.Addr)
	p := startExporter(t)
	exportertest.WaitFor(t, time.Minute, "the default families swept", func() bool {
		_, page := p.get(t, "/metrics")
		return metric(page, "slot_exporter_up") == "1" && metric(page, `slot_sets_without_ttl{family="jobs_lock"}`) == "1"
	})
}
