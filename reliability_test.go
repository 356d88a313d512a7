package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slotexporter/slot_exporter/internal/redistest"
	"github.com/slotexporter/slot_exporter/internal/tlstest"
)

// runOnce runs the program to its end and returns the exit code, stdout
// and stderr (the log).
func runOnce(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	code := run(ctx, args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestConfigCheckReadsEveryFile: --config.check refuses a config whose
// password file or TLS files cannot be read, with the error the exporter
// gives when it refuses to start with that config, and passes the same
// config once the files are there.
func TestConfigCheckReadsEveryFile(t *testing.T) {
	dir := t.TempDir()
	certs := tlstest.New(t)
	missing := filepath.Join(dir, "missing")
	pw := filepath.Join(dir, "password")
	if err := os.WriteFile(pw, []byte("pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tlsBlock := func(ca, cert, key string) string {
		return fmt.Sprintf("  tls:\n    ca_file: %q\n    cert_file: %q\n    key_file: %q\n", ca, cert, key)
	}
	cases := []struct {
		name, extra, want string
	}{
		{"password_file", fmt.Sprintf("  password_file: %q\n", missing), "redis.password_file: open " + missing + ": no such file or directory"},
		{"tls ca_file", tlsBlock(missing, certs.ClientCertFile, certs.ClientKeyFile), fmt.Sprintf("redis.tls.ca_file: %q: no such file or directory", missing)},
		{"tls cert_file", tlsBlock(certs.CAFile, missing, certs.ClientKeyFile), fmt.Sprintf("redis.tls.cert_file: %q: no such file or directory", missing)},
		{"tls key_file", tlsBlock(certs.CAFile, certs.ClientCertFile, missing), fmt.Sprintf("redis.tls.key_file: %q: no such file or directory", missing)},
		// A key that is not the certificate's.
		{"tls key of another certificate", tlsBlock(certs.CAFile, certs.ClientCertFile, certs.KeyFile), "redis.tls.cert_file/key_file: tls: private key does not match public key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := filepath.Join(t.TempDir(), "slot_exporter.yml")
			writeConfig(t, cfg, "127.0.0.1:1", "streams")
			body, err := os.ReadFile(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(cfg, []byte(strings.Replace(string(body), "redis:\n", "redis:\n"+c.extra, 1)), 0o600); err != nil {
				t.Fatal(err)
			}
			code, out, errs := runOnce(t, "--config.file="+cfg, "--config.check")
			if code != 1 || !strings.Contains(errs, c.want) || strings.Contains(out, "OK") {
				t.Errorf("--config.check: exit %d, stdout %q, stderr %q; want 1 and %q", code, out, errs, c.want)
			}
			// Started with it, the exporter refuses with the same words.
			code, _, errs = runOnce(t, "--config.file="+cfg, fmt.Sprintf("--web.listen-address=127.0.0.1:%d", redistest.FreePort(t)))
			errs = strings.ReplaceAll(errs, `\"`, `"`) // logfmt quotes the error
			if code != 1 || !strings.Contains(errs, "refusing to start") || !strings.Contains(errs, c.want) {
				t.Errorf("start: exit %d, log %q; want 1, refusing to start, %q", code, errs, c.want)
			}
		})
	}
	t.Run("every file readable", func(t *testing.T) {
		cfg := filepath.Join(t.TempDir(), "slot_exporter.yml")
		writeConfig(t, cfg, "127.0.0.1:1", "streams")
		body, _ := os.ReadFile(cfg)
		extra := fmt.Sprintf("  password_file: %q\n", pw) + tlsBlock(certs.CAFile, certs.ClientCertFile, certs.ClientKeyFile)
		if err := os.WriteFile(cfg, []byte(strings.Replace(string(body), "redis:\n", "redis:\n"+extra, 1)), 0o600); err != nil {
			t.Fatal(err)
		}
		if code, out, errs := runOnce(t, "--config.file="+cfg, "--config.check"); code != 0 || !strings.Contains(out, "OK") {
			t.Errorf("exit %d, stdout %q, stderr %q", code, out, errs)
		}
	})
}

// needFlag skips the test until main.go has the flag.
func needFlag(t *testing.T, flag, what string) {
	t.Helper()
	_, _, errs := runOnce(t, "--"+flag+"=1", "--config.check", "--config.file="+filepath.Join(t.TempDir(), "none.yml"))
	if strings.Contains(errs, "unknown long flag '--"+flag+"'") {
		t.Skip("waiting for main.go: --" + flag + " (" + what + ")")
	}
}

// TestMetricsInFlightCap: --web.max-requests caps the /metrics requests
// in flight (0: no cap). Requests over the cap get 503, each counted in
// promhttp_metric_handler_requests_total{code="503"}, and the refusals
// are logged at WARN, naming the flag.
func TestMetricsInFlightCap(t *testing.T) {
	needFlag(t, "web.max-requests", "the /metrics in-flight cap")
	srv := redistest.Start(t)
	seed(t, srv.Client())
	cfg := filepath.Join(t.TempDir(), "slot_exporter.yml")
	writeConfig(t, cfg, srv.Addr, "streams")

	// scrape fires n scrapes at once and returns the status codes.
	scrape := func(p *exporterProc, n int) map[int]int {
		var mu sync.Mutex
		codes := map[int]int{}
		var wg sync.WaitGroup
		tr := &http.Transport{MaxIdleConnsPerHost: n}
		defer tr.CloseIdleConnections()
		c := &http.Client{Transport: tr, Timeout: 5 * time.Minute}
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				code := 0
				if resp, err := c.Get(p.base + "/metrics"); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					code = resp.StatusCode
				}
				mu.Lock()
				codes[code]++
				mu.Unlock()
			}()
		}
		wg.Wait()
		return codes
	}

	t.Run("no cap", func(t *testing.T) {
		p := startExporter(t, "--config.file="+cfg, "--web.max-requests=0")
		if codes := scrape(p, 200); codes[200] != 200 {
			t.Errorf("200 parallel scrapes without a cap: %v", codes)
		}
	})
	t.Run("cap of 1", func(t *testing.T) {
		p := startExporter(t, "--config.file="+cfg, "--web.max-requests=1")
		refused := 0
		for round := 0; round < 20 && refused == 0; round++ {
			codes := scrape(p, 100)
			if codes[0] > 0 || codes[200]+codes[503] != 100 {
				t.Fatalf("round %d: %v", round, codes)
			}
			refused += codes[503]
		}
		if refused == 0 {
			t.Fatal("100 parallel scrapes, 20 times, never went over a cap of 1")
		}
		_, page := p.get(t, "/metrics")
		if got := metric(page, `promhttp_metric_handler_requests_total{code="503"}`); got != strconv.Itoa(refused) {
			t.Errorf(`promhttp_metric_handler_requests_total{code="503"} = %q, want %d`, got, refused)
		}
		var warned bool
		for _, l := range strings.Split(p.logs.String(), "\n") {
			warned = warned || strings.Contains(l, "level=warn") && strings.Contains(l, "web.max-requests")
		}
		if !warned {
			t.Errorf("no WARN naming --web.max-requests in the log:\n%s", p.logs.String())
		}
	})
}

// TestIdleKeepAliveClosed: a keep-alive connection left idle is closed by
// the server after --web.idle-timeout.
func TestIdleKeepAliveClosed(t *testing.T) {
	needFlag(t, "web.idle-timeout", "the HTTP server's IdleTimeout")
	srv := redistest.Start(t)
	cfg := filepath.Join(t.TempDir(), "slot_exporter.yml")
	writeConfig(t, cfg, srv.Addr, "streams")
	p := startExporter(t, "--config.file="+cfg, "--web.idle-timeout=1s")
	conn, err := net.Dial("tcp", strings.TrimPrefix(p.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rd := bufio.NewReader(conn)
	if _, err := fmt.Fprintf(conn, "GET /-/healthy HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(rd, nil)
	if err != nil || resp.StatusCode != 200 || resp.Close {
		t.Fatalf("keep-alive request: %v %+v", err, resp)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	idle := time.Now()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := rd.ReadByte(); err != io.EOF {
		t.Fatalf("idle connection: read %v, want EOF (closed by the server)", err)
	}
	if d := time.Since(idle); d < 900*time.Millisecond || d > 5*time.Second {
		t.Errorf("idle connection closed after %s, want about 1s", d)
	}
}
