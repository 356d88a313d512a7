package reliabilitytest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/tlstest"
)

// TestRenewedClientCertificate: the exporter talks to a Redis that
// requires client certificates. The certificate is renewed in place (the
// files rewritten, as cert-manager or a Vault agent does), by one from a
// new CA, and Redis is switched to trust only that CA. Redis itself is the
// judge of what a connection presents: with the old certificate a new
// connection is refused (the control), and once the files hold the new one
// the next sweep's new connections are accepted, with no reload and no
// restart.
func TestRenewedClientCertificate(t *testing.T) {
	oldCA, newCA := tlstest.New(t), tlstest.New(t)
	srv := tlstest.StartRedis(t, oldCA, true)
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr, TLSConfig: oldCA.ClientConfig(), PoolSize: 1, DisableIdentity: true})
	t.Cleanup(func() { _ = admin.Close() })
	seedHolds(t, admin, "u", 3, 1, exportertest.RedisTime(t, admin)+115_000)

	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key")
	install := func(c *tlstest.Certs) {
		t.Helper()
		for src, dst := range map[string]string{c.ClientCertFile: certFile, c.ClientKeyFile: keyFile} {
			b, err := os.ReadFile(src)
			exportertest.Must(t, err)
			exportertest.Must(t, os.WriteFile(dst, b, 0o600))
		}
	}
	install(oldCA)
	e := newExporter(t, configYAML(addrBlock(srv.Addr)+fmt.Sprintf(
		"  tls:\n    ca_file: %q\n    cert_file: %q\n    key_file: %q\n    server_name: localhost\n",
		oldCA.CAFile, certFile, keyFile), quickSampling, streamsFamily))
	e.sweep()

	// Redis now trusts only the new CA, for new connections; the
	// exporter's current ones are dropped.
	exportertest.Must(t, admin.ConfigSet(ctx, "tls-ca-cert-file", newCA.CAFile).Err())
	exportertest.Must(t, admin.ClientKillByFilter(ctx, "TYPE", "normal", "SKIPME", "yes").Err())
	if err := e.trySweep(); err == nil {
		t.Fatal("a sweep with the old client certificate succeeded: Redis does not check it, the test proves nothing")
	}

	install(newCA)
	exportertest.WaitFor(t, 2*time.Minute, "a sweep with the renewed certificate", func() bool { return e.trySweep() == nil })
	exportertest.Expect(t, e.metrics(), map[string]float64{upS: 1, liveS: 3, lostS: 0})
}
