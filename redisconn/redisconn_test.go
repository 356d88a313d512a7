package redisconn

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/redisproc"
	"github.com/slotexporter/slot_exporter/internal/redistest"
	"github.com/slotexporter/slot_exporter/internal/tlstest"
)

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

func newClient(t *testing.T, r *config.Redis) redis.UniversalClient {
	t.Helper()
	if r.Mode == "" {
		r.Mode = config.ModeStandalone
	}
	c, err := New(r)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func ping(c redis.UniversalClient) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return c.Ping(ctx).Err()
}

func adminClient(t *testing.T, addr, password string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, Password: password, DisableIdentity: true})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestPasswordSources: the password reaches Redis from redis.password_file
// or REDIS_PASSWORD (which wins), and a refused one is reported without
// being echoed.
func TestPasswordSources(t *testing.T) {
	pw := redisproc.Secret()
	srv := redistest.Start(t, "--requirepass", pw)
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	writeFile(t, good, pw+"\n")
	wrongPW := redisproc.Secret()
	wrong := filepath.Join(dir, "wrong")
	writeFile(t, wrong, wrongPW)

	if err := ping(newClient(t, &config.Redis{Addr: srv.Addr, PasswordFile: good})); err != nil {
		t.Errorf("password_file with a trailing newline: %v", err)
	}

	err := ping(newClient(t, &config.Redis{Addr: srv.Addr}))
	if err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Errorf("no password: err = %v, want NOAUTH", err)
	}

	err = ping(newClient(t, &config.Redis{Addr: srv.Addr, PasswordFile: wrong}))
	if err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
		t.Errorf("wrong password: err = %v, want WRONGPASS", err)
	}
	if err != nil && (strings.Contains(err.Error(), wrongPW) || strings.Contains(err.Error(), pw)) {
		t.Errorf("the authentication error echoes a password: %v", err)
	}

	t.Setenv(config.PasswordEnv, pw)
	if err := ping(newClient(t, &config.Redis{Addr: srv.Addr, PasswordFile: wrong})); err != nil {
		t.Errorf("REDIS_PASSWORD must win over redis.password_file: %v", err)
	}
}

// TestACLUser: redis.username authenticates as that ACL user.
func TestACLUser(t *testing.T) {
	srv := redistest.Start(t)
	pw := redisproc.Secret()
	if err := srv.Client().Do(context.Background(), "ACL", "SETUSER", "exporter", "on", ">"+pw, "~*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	pf := filepath.Join(t.TempDir(), "pw")
	writeFile(t, pf, pw)
	c := newClient(t, &config.Redis{Addr: srv.Addr, Username: "exporter", PasswordFile: pf})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	who, err := c.Do(ctx, "ACL", "WHOAMI").Text()
	if err != nil || who != "exporter" {
		t.Fatalf("ACL WHOAMI = %q, %v; want exporter", who, err)
	}
}

// TestPasswordFileErrors: an unusable password file is an error that names
// redis.password_file and never shows what is in the file.
func TestPasswordFileErrors(t *testing.T) {
	dir := t.TempDir()
	pw := redisproc.Secret()
	big := filepath.Join(dir, "big")
	writeFile(t, big, strings.Repeat(pw, (64<<10)/len(pw)+1))
	for name, path := range map[string]string{
		"missing":   filepath.Join(dir, "nope"),
		"directory": dir,
		"too large": big,
	} {
		_, err := New(&config.Redis{Addr: "127.0.0.1:1", Mode: config.ModeStandalone, PasswordFile: path})
		if err == nil {
			t.Errorf("%s: New accepted it", name)
			continue
		}
		if !strings.Contains(err.Error(), "redis.password_file") {
			t.Errorf("%s: error does not name redis.password_file: %v", name, err)
		}
		if strings.Contains(err.Error(), pw) {
			t.Errorf("%s: error echoes the file's contents", name)
		}
	}
}

// TestPasswordRotation: the password file is read for every new
// connection, so rotating it (new file, new requirepass, old connections
// dropped) needs no reload or restart of the exporter.
func TestPasswordRotation(t *testing.T) {
	old, next := redisproc.Secret(), redisproc.Secret()
	srv := redistest.Start(t, "--requirepass", old)
	pf := filepath.Join(t.TempDir(), "pw")
	writeFile(t, pf, old)
	c := newClient(t, &config.Redis{Addr: srv.Addr, PasswordFile: pf})
	if err := ping(c); err != nil {
		t.Fatalf("before rotation: %v", err)
	}

	writeFile(t, pf, next)
	admin := adminClient(t, srv.Addr, old)
	ctx := context.Background()
	if err := admin.ConfigSet(ctx, "requirepass", next).Err(); err != nil {
		t.Fatal(err)
	}
	// Established connections stay authenticated; drop them so the
	// client has to log in again.
	if err := admin.ClientKillByFilter(ctx, "TYPE", "normal").Err(); err != nil && !strings.Contains(err.Error(), "EOF") {
		t.Fatal(err)
	}
	var err error
	for range 20 {
		if err = ping(c); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("after rotating the password file: %v", err)
}

// TestTLS: the tls block verifies the server against ca_file (by IP, or by
// server_name), presents the client certificate for mutual TLS, and works
// with a rediss:// address; a wrong CA or a missing client certificate
// fails with a TLS error.
func TestTLS(t *testing.T) {
	certs := tlstest.New(t)
	other := tlstest.New(t)
	srv := tlstest.StartRedis(t, certs, true)

	full := func() *config.TLS {
		return &config.TLS{CAFile: certs.CAFile, CertFile: certs.ClientCertFile, KeyFile: certs.ClientKeyFile}
	}
	ok := map[string]*config.Redis{
		"by IP":            {Addr: srv.Addr, TLS: full()},
		"server_name":      {Addr: srv.Addr, TLS: func() *config.TLS { t := full(); t.ServerName = "localhost"; return t }()},
		"rediss URL":       {Addr: "rediss://localhost:" + strconv.Itoa(srv.Port), TLS: full()},
		"rediss URL by IP": {Addr: "rediss://" + srv.Addr + "/0", TLS: full()},
		"skip verify": {Addr: srv.Addr, TLS: &config.TLS{
			CAFile: other.CAFile, CertFile: certs.ClientCertFile, KeyFile: certs.ClientKeyFile, InsecureSkipVerify: true,
		}},
	}
	for name, r := range ok {
		if err := ping(newClient(t, r)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}

	bad := map[string]struct {
		r    *config.Redis
		want string
	}{
		"wrong CA": {&config.Redis{Addr: srv.Addr, TLS: &config.TLS{
			CAFile: other.CAFile, CertFile: certs.ClientCertFile, KeyFile: certs.ClientKeyFile,
		}}, "certificate signed by unknown authority"},
		"wrong server_name": {&config.Redis{Addr: srv.Addr, TLS: func() *config.TLS {
			t := full()
			t.ServerName = "redis.example"
			return t
		}()}, "certificate is valid for"},
		// rediss:// alone verifies against the system roots, which do not
		// hold the test CA: TLS is never silently unverified.
		"rediss without ca_file": {&config.Redis{Addr: "rediss://" + srv.Addr}, "certificate signed by unknown authority"},
		// Plain TCP to a TLS port: the server drops the connection.
		"no TLS": {&config.Redis{Addr: srv.Addr}, ""},
	}
	for name, b := range bad {
		err := ping(newClient(t, b.r))
		if err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%s: err = %v, want one containing %q", name, err, b.want)
		}
	}
	// Without a client certificate the server refuses the handshake; the
	// exact error depends on TLS 1.3's late client-auth alert.
	if err := ping(newClient(t, &config.Redis{Addr: srv.Addr, TLS: &config.TLS{CAFile: certs.CAFile}})); err == nil {
		t.Error("no client certificate: accepted by a server that requires one")
	}
}

// TestTLSConfigErrors: unusable TLS files are refused with the field they
// came from, and never with key material.
func TestTLSConfigErrors(t *testing.T) {
	certs := tlstest.New(t)
	other := tlstest.New(t)
	notPEM := filepath.Join(t.TempDir(), "ca.crt")
	writeFile(t, notPEM, "not a certificate\n")
	key, err := os.ReadFile(certs.ClientKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		tls  config.TLS
		want string
	}{
		"missing CA":         {config.TLS{CAFile: filepath.Join(certs.Dir, "nope.crt")}, "redis.tls.ca_file"},
		"CA not PEM":         {config.TLS{CAFile: notPEM}, "redis.tls.ca_file: no PEM certificate"},
		"key of another":     {config.TLS{CertFile: certs.ClientCertFile, KeyFile: other.ClientKeyFile}, "redis.tls.cert_file/key_file"},
		"key as certificate": {config.TLS{CertFile: certs.ClientKeyFile, KeyFile: certs.ClientKeyFile}, "redis.tls.cert_file/key_file"},
	}
	for name, c := range cases {
		tc := c.tls
		_, err := TLSConfig(&config.Redis{Addr: "127.0.0.1:1", TLS: &tc})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", name, err, c.want)
			continue
		}
		if strings.Contains(err.Error(), "PRIVATE KEY") || strings.Contains(err.Error(), strings.TrimSpace(string(key))[40:80]) {
			t.Errorf("%s: the error shows key material: %v", name, err)
		}
	}

	if c, err := TLSConfig(&config.Redis{Addr: "127.0.0.1:1"}); c != nil || err != nil {
		t.Errorf("plain address: TLS config %v, %v; want none", c, err)
	}
	c, err := TLSConfig(&config.Redis{Addr: "rediss://127.0.0.1:1"})
	if err != nil || c == nil || c.InsecureSkipVerify || c.MinVersion < 0x0303 {
		t.Errorf("rediss:// alone: %+v, %v; want verified TLS 1.2+", c, err)
	}
}

// TestModes: cluster and sentinel configs build the matching client types
// (without connecting), so TLS and credentials go through the same code.
func TestModes(t *testing.T) {
	if _, ok := newClient(t, &config.Redis{Mode: config.ModeCluster, Addrs: []string{"127.0.0.1:1"}}).(*redis.ClusterClient); !ok {
		t.Error("cluster mode did not build a ClusterClient")
	}
	f, ok := newClient(t, &config.Redis{Mode: config.ModeSentinel, Addrs: []string{"127.0.0.1:1"}, MasterName: "m",
		ReadFrom: config.ReadFromReplica}).(*Failover)
	if !ok {
		t.Fatal("sentinel mode did not build a Failover")
	}
	// The topology reads one replica a sweep with these options.
	if c, o := f.Failover(); c == nil || o.MasterName != "m" || !o.ReplicaOnly || len(o.SentinelAddrs) != 1 {
		t.Errorf("sentinel mode: client %v, options %+v", c, o)
	}
}
func TestPassword(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name, env, file, want string
	}{
		{"nothing", "", "", ""},
		{"env", "from-env", "", "from-env"},
		{"env wins", "from-env", write("a", "from-file\n"), "from-env"},
		{"file", "", write("b", "from-file"), "from-file"},
		{"trailing newline", "", write("c", "from-file\n"), "from-file"},
		{"trailing CRLF", "", write("d", "from-file\r\n"), "from-file"},
		{"one newline only", "", write("e", "from-file\n\n"), "from-file\n"},
		{"inner spaces kept", "", write("f", " a b \n"), " a b "},
		{"empty file", "", write("g", ""), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(config.PasswordEnv, tc.env)
			got, err := Password(&config.Redis{PasswordFile: tc.file})
			if err != nil || got != tc.want {
				t.Errorf("Password() = %q, %v; want %q", got, err, tc.want)
			}
		})
	}

	t.Setenv(config.PasswordEnv, "")
	const secret = "s3cr3t-pw"
	big := write("big", strings.Repeat(secret, maxPasswordFileSize/len(secret)+1))
	for name, file := range map[string]string{
		"missing":   filepath.Join(dir, "missing"),
		"directory": dir,
		"too large": big,
	} {
		t.Run(name, func(t *testing.T) {
			got, err := Password(&config.Redis{PasswordFile: file})
			if err == nil {
				t.Fatalf("Password() = %q, want an error", got)
			}
			if !strings.HasPrefix(err.Error(), "redis.password_file: ") || !strings.Contains(err.Error(), file) {
				t.Errorf("error %q does not name redis.password_file and the file", err)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error %q echoes the file's contents", err)
			}
		})
	}
}

// TestPasswordFileCaughtEmpty: a password file caught empty while it is
// rewritten (truncated, then written) fails that connection's dial. Taken
// as no password, the connection logged in as nobody, every command on it
// was refused with NOAUTH, and the pool kept it: the exporter stayed down
// after the rotation until it was restarted.
func TestPasswordFileCaughtEmpty(t *testing.T) {
	pw := redisproc.Secret()
	srv := redistest.Start(t, "--requirepass", pw)
	pf := filepath.Join(t.TempDir(), "pw")
	writeFile(t, pf, pw+"\n")
	c := newClient(t, &config.Redis{Addr: srv.Addr, PasswordFile: pf})
	if err := ping(c); err != nil {
		t.Fatal(err)
	}
	admin := adminClient(t, srv.Addr, pw)
	drop := func() {
		t.Helper()
		if err := admin.ClientKillByFilter(context.Background(), "TYPE", "normal", "SKIPME", "yes").Err(); err != nil {
			t.Fatal(err)
		}
	}
	drop()
	writeFile(t, pf, "")
	err := ping(c)
	if err == nil || !strings.Contains(err.Error(), "redis.password_file") || strings.Contains(err.Error(), "NOAUTH") {
		t.Errorf("a dial while the password file is empty: %v; want an error naming redis.password_file", err)
	}
	writeFile(t, pf, pw+"\n")
	if err := ping(c); err != nil {
		t.Errorf("once the file holds the password again: %v", err)
	}
}
