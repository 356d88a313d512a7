package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// validateRedis checks the redis block's shape. What needs a file or the
// client library (the TLS files, a URL's database) is redisconn.Check's.
func validateRedis(r *Redis) error {
	switch r.Mode {
	case ModeStandalone:
		if len(r.Addrs) > 0 {
			return errors.New("redis.addrs: only used in cluster and sentinel modes; use redis.addr")
		}
		if r.Addr == "" {
			return errors.New("redis.addr: required in standalone mode")
		}
	case ModeCluster:
		if r.Addr == "" && len(r.Addrs) == 0 {
			return errors.New("redis.addrs: required in cluster mode")
		}
		if r.Addr != "" && len(r.Addrs) > 0 {
			return errors.New("redis.addr: set redis.addr or redis.addrs, not both")
		}
	case ModeSentinel:
		if r.Addr != "" {
			return errors.New("redis.addr: not used in sentinel mode; list the sentinels in redis.addrs")
		}
		if len(r.Addrs) == 0 {
			return errors.New("redis.addrs: required in sentinel mode")
		}
		if r.MasterName == "" {
			return errors.New("redis.master_name: required in sentinel mode")
		}
	default:
		return fmt.Errorf("redis.mode: unknown mode %q (want standalone, cluster or sentinel)", r.Mode)
	}
	if r.MasterName != "" && r.Mode != ModeSentinel {
		return errors.New("redis.master_name: only used in sentinel mode")
	}

	if r.Addr != "" {
		if err := checkAddr("redis.addr", r.Addr, true); err != nil {
			return err
		}
	}
	for i, a := range r.Addrs {
		if err := checkAddr(fmt.Sprintf("redis.addrs[%d]", i), a, false); err != nil {
			return err
		}
	}

	switch {
	case r.DB < 0:
		return errors.New("redis.db: must be >= 0")
	case r.DB != 0 && r.Mode == ModeCluster:
		return errors.New("redis.db: must be 0 in cluster mode (a cluster has only database 0)")
	}

	switch r.ReadFrom {
	case ReadFromPrimary:
	case ReadFromReplica:
		if r.Mode == ModeStandalone {
			return errors.New("redis.read_from: replica needs mode cluster or sentinel; in standalone mode there is only the server at redis.addr")
		}
	default:
		return fmt.Errorf("redis.read_from: unknown value %q (want primary or replica)", r.ReadFrom)
	}

	if r.DialTimeout <= 0 {
		return errors.New("redis.dial_timeout: must be > 0")
	}

	if t := r.TLS; t != nil {
		if t.CertFile != "" && t.KeyFile == "" {
			return errors.New("redis.tls.key_file: required when cert_file is set")
		}
		if t.KeyFile != "" && t.CertFile == "" {
			return errors.New("redis.tls.cert_file: required when key_file is set")
		}
	}
	return nil
}

// checkAddr checks a host:port, or (if urlOK) a redis:// or rediss:// URL,
// by their shape. A password in it is refused, and no error echoes it.
func checkAddr(path, addr string, urlOK bool) error {
	scheme, rest, isURL := strings.Cut(addr, "://")
	if !isURL {
		rest = addr
	}
	// Whatever sits before the last @ is userinfo, or a mangled URL that
	// url.Parse would misread. redis-cli reads a lone "secret@" as a
	// password, so any userinfo is refused, and never echoed: the user
	// name goes in redis.username.
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		return fmt.Errorf("%s: %s", path, errPasswordInConfig)
	}
	if !isURL {
		host, port, err := net.SplitHostPort(addr)
		if err == nil && host != "" && !strings.ContainsAny(host, "@/ ") && validPort(port) {
			return nil
		}
		if urlOK {
			return fmt.Errorf("%s: invalid address %q (want host:port, or a redis:// or rediss:// URL)", path, addr)
		}
		return fmt.Errorf("%s: invalid address %q (want host:port)", path, addr)
	}
	if !urlOK {
		return fmt.Errorf("%s: invalid address %q (want host:port; URLs only go in redis.addr)", path, addr)
	}
	if scheme != "redis" && scheme != "rediss" {
		return fmt.Errorf("%s: unsupported URL scheme %q (want redis or rediss)", path, scheme)
	}
	u, err := url.Parse(addr)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("%s: invalid URL: %v", path, err)
	}
	if _, ok := u.User.Password(); ok {
		return fmt.Errorf("%s: %s", path, errPasswordInConfig)
	}
	return nil
}

func validPort(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n > 0 && n < 65536
}
