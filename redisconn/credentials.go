package redisconn

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/slotexporter/slot_exporter/config"
)

// maxPasswordFileSize bounds what Password reads.
const maxPasswordFileSize = 64 << 10

// Password returns the Redis password from REDIS_PASSWORD or
// redis.password_file (trailing newline trimmed); "" when neither is set.
// An unreadable file is an error that names redis.password_file but never
// echoes file contents.
//
// Connections call it for every new connection, so a rotated password is
// picked up without a reload.
func Password(r *config.Redis) (string, error) {
	if p := os.Getenv(config.PasswordEnv); p != "" {
		return p, nil
	}
	if r.PasswordFile == "" {
		return "", nil
	}
	f, err := os.Open(r.PasswordFile)
	if err != nil {
		return "", fmt.Errorf("redis.password_file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxPasswordFileSize+1))
	if err != nil {
		return "", fmt.Errorf("redis.password_file: %w", err)
	}
	if len(b) > maxPasswordFileSize {
		return "", fmt.Errorf("redis.password_file: %s: larger than %d bytes", r.PasswordFile, maxPasswordFileSize)
	}
	s := string(b)
	if t, ok := strings.CutSuffix(s, "\r\n"); ok {
		return t, nil
	}
	return strings.TrimSuffix(s, "\n"), nil
}

// fileMaterial re-reads the client key pair when it changes on disk: certificates
// are renewed in place (cert-manager, Vault agents), and a long-running
// exporter must present the new one without a restart. A file is read
// again only when its size or modification time changed.
type fileMaterial struct {
	mu    sync.Mutex
	stamp string
	cert  *tls.Certificate
}

func stampOf(paths ...string) (string, error) {
	var b strings.Builder
	for _, p := range paths {
		if p == "" {
			continue
		}
		st, err := os.Stat(p)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "%s:%d:%d;", p, st.Size(), st.ModTime().UnixNano())
	}
	return b.String(), nil
}

// clientCert returns the key pair, reloaded if the files changed. A
// renewal caught half-written (the new certificate with the old key) keeps
// the last good pair until the files agree.
func (m *fileMaterial) clientCert(certFile, keyFile string) (*tls.Certificate, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	stamp, err := stampOf(certFile, keyFile)
	if err == nil && stamp == m.stamp && m.cert != nil {
		return m.cert, nil
	}
	cert, lerr := tls.LoadX509KeyPair(certFile, keyFile)
	if lerr != nil {
		if m.cert != nil {
			return m.cert, nil
		}
		return nil, fmt.Errorf("redis.tls.cert_file/key_file: %w", lerr)
	}
	m.cert, m.stamp = &cert, stamp
	return m.cert, nil
}

func loadPool(caFile string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("redis.tls.ca_file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("redis.tls.ca_file: no PEM certificate in %s", caFile)
	}
	return pool, nil
}
