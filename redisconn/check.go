package redisconn

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/config"
)

// Check reads every file the connection layer would read (password file,
// TLS CA, certificate and key), with the errors a connection would give,
// and parses a redis:// URL as the client does: --config.check, the start
// and a reload refuse a config whose files are unreadable or whose URL
// the client would not take. config checks only what needs neither.
func Check(r *config.Redis) error {
	if err := checkURL(r); err != nil {
		return err
	}
	if err := checkFiles(r); err != nil {
		return err
	}
	if _, err := Password(r); err != nil {
		return err
	}
	_, err := TLSConfig(r)
	return err
}

// checkURL parses redis.addr when it is a URL, and checks the database it
// names against the mode and redis.db.
func checkURL(r *config.Redis) error {
	if !strings.Contains(r.Addr, "://") {
		return nil
	}
	opts, err := redis.ParseURL(r.Addr)
	if err != nil {
		return fmt.Errorf("redis.addr: invalid URL: %s", strings.TrimPrefix(err.Error(), "redis: "))
	}
	switch {
	case opts.DB != 0 && r.Mode == config.ModeCluster:
		return errors.New("redis.addr: the URL names a database other than 0; a cluster has only database 0")
	case r.DB != 0 && opts.DB != 0:
		return errors.New("redis.db: the database is also given in the redis.addr URL")
	}
	return nil
}

// checkFiles checks that the TLS files exist and are files, naming them
// as the config file wrote them.
func checkFiles(r *config.Redis) error {
	t := r.TLS
	if t == nil {
		return nil
	}
	shown := r.TLSAsWritten
	if shown == nil {
		shown = t
	}
	for _, f := range []struct{ path, name, shown string }{
		{"redis.tls.ca_file", t.CAFile, shown.CAFile},
		{"redis.tls.cert_file", t.CertFile, shown.CertFile},
		{"redis.tls.key_file", t.KeyFile, shown.KeyFile},
	} {
		if f.name == "" {
			continue
		}
		st, err := os.Stat(f.name)
		if err != nil {
			var pe *os.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return fmt.Errorf("%s: %q: %v", f.path, f.shown, err)
		}
		if st.IsDir() {
			return fmt.Errorf("%s: %q: is a directory", f.path, f.shown)
		}
	}
	return nil
}
