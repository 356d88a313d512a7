// Package tlstest makes throwaway certificates for tests: a CA, a server
// certificate for the loopback addresses and a client certificate, all
// written as PEM files into the test's temporary directory. Nothing is
// checked in, so nothing expires in the repository.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/slotexporter/slot_exporter/internal/redisproc"
	"github.com/slotexporter/slot_exporter/internal/redistest"
)

// Certs is one CA and the two leaf certificates it signed.
type Certs struct {
	Dir string
	// CAFile is the CA certificate (PEM).
	CAFile string
	// CertFile and KeyFile are the server's, valid for localhost, 127.0.0.1
	// and ::1.
	CertFile, KeyFile string
	// ClientCertFile and ClientKeyFile are a client certificate for mutual
	// TLS.
	ClientCertFile, ClientKeyFile string
	// Pool holds the CA, for clients that verify the server.
	Pool *x509.CertPool
	// Client is the client certificate, loaded.
	Client tls.Certificate
}

// New creates a fresh CA and its certificates under a new t.TempDir().
// Two calls give two unrelated CAs, which is how a test gets a "wrong CA".
func New(t testing.TB) *Certs {
	t.Helper()
	dir := t.TempDir()
	c := &Certs{
		Dir:            dir,
		CAFile:         filepath.Join(dir, "ca.crt"),
		CertFile:       filepath.Join(dir, "server.crt"),
		KeyFile:        filepath.Join(dir, "server.key"),
		ClientCertFile: filepath.Join(dir, "client.crt"),
		ClientKeyFile:  filepath.Join(dir, "client.key"),
	}
	now := time.Now()
	caKey := newKey(t)
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: "slot_exporter test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatalf("tlstest: CA: %v", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatalf("tlstest: CA: %v", err)
	}
	writePEM(t, c.CAFile, "CERTIFICATE", caDER)
	c.Pool = x509.NewCertPool()
	c.Pool.AddCert(ca)

	leaf := func(cn string, usage x509.ExtKeyUsage, certFile, keyFile string) {
		key := newKey(t)
		tmpl := &x509.Certificate{
			SerialNumber: serial(t),
			Subject:      pkix.Name{CommonName: cn},
			NotBefore:    now.Add(-time.Hour),
			NotAfter:     now.Add(24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		}
		if usage == x509.ExtKeyUsageServerAuth {
			tmpl.DNSNames = []string{"localhost"}
			tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatalf("tlstest: %s: %v", cn, err)
		}
		kder, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatalf("tlstest: %s key: %v", cn, err)
		}
		writePEM(t, certFile, "CERTIFICATE", der)
		writePEM(t, keyFile, "EC PRIVATE KEY", kder)
	}
	leaf("localhost", x509.ExtKeyUsageServerAuth, c.CertFile, c.KeyFile)
	leaf("slot_exporter test client", x509.ExtKeyUsageClientAuth, c.ClientCertFile, c.ClientKeyFile)
	if c.Client, err = tls.LoadX509KeyPair(c.ClientCertFile, c.ClientKeyFile); err != nil {
		t.Fatalf("tlstest: client pair: %v", err)
	}
	return c
}

// ClientConfig trusts the CA and presents the client certificate.
func (c *Certs) ClientConfig() *tls.Config {
	return &tls.Config{RootCAs: c.Pool, Certificates: []tls.Certificate{c.Client}, MinVersion: tls.VersionTLS12}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("tlstest: key: %v", err)
	}
	return k
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatalf("tlstest: serial: %v", err)
	}
	return n
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	// A key file should never be world-readable, even a throwaway one.
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatalf("tlstest: %v", err)
	}
}

// Redis is a redis-server that speaks only TLS.
type Redis struct {
	Addr string // 127.0.0.1:port
	Port int
	Dir  string
}

// StartRedis runs redis-server with the plain port off and TLS on a free
// port, using c's server certificate. With mutual, clients must present a
// certificate signed by c's CA. It is stopped when the test ends.
func StartRedis(t testing.TB, c *Certs, mutual bool, extra ...string) *Redis {
	t.Helper()
	auth := "no"
	if mutual {
		auth = "yes"
	}
	s := redistest.StartWith(t, redisproc.Options{
		TLS: true, TLSConfig: c.ClientConfig(),
		Args: append([]string{
			"--tls-cert-file", c.CertFile,
			"--tls-key-file", c.KeyFile,
			"--tls-ca-cert-file", c.CAFile,
			"--tls-auth-clients", auth,
		}, extra...),
	})
	return &Redis{Addr: s.Addr, Port: s.Port, Dir: s.Dir}
}
