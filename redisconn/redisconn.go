// Package redisconn builds the go-redis client that a config's redis
// section describes: a single server, a cluster, or a master found through
// Sentinel, with optional TLS and ACL credentials.
package redisconn

import (
	"context"
	"crypto/tls"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/config"
)

// dialRetries is low on purpose: a Redis that is down should fail the
// sweep quickly and be reported, not be retried for most of an interval.
const dialRetries = 1

// New returns a client for r. It does not connect: an unreachable Redis is
// the sweeper's to report, not a reason to refuse to start.
func New(r *config.Redis) (redis.UniversalClient, error) {
	// Read once here so that an unreadable password file, a missing TLS
	// file or a URL the client would not take refuses the config;
	// connections read the password again through credentials.
	if err := Check(r); err != nil {
		return nil, err
	}
	rc := *r
	// A password file that held a password when the config was loaded and
	// reads empty now was caught while it was rewritten (truncated, then
	// written). Taken as no password, the connection logged in as nobody,
	// the pool kept it, and every command on it was refused with NOAUTH
	// until the exporter restarted. Its dial fails instead, and the next
	// one reads the file again.
	loaded, _ := Password(r)
	credentials := func(username string) func(context.Context) (string, string, error) {
		return func(context.Context) (string, string, error) {
			p, err := Password(&rc)
			if err == nil && p == "" && loaded != "" {
				err = fmt.Errorf("redis.password_file: %s reads empty (caught while it was rewritten?); the next connection reads it again", rc.PasswordFile)
			}
			return username, p, err
		}
	}
	tlsCfg, err := TLSConfig(r)
	if err != nil {
		return nil, err
	}
	dial := r.DialTimeout
	if dial <= 0 {
		dial = 5 * time.Second
	}
	replica := r.ReadFrom == config.ReadFromReplica
	switch r.Mode {
	case config.ModeCluster:
		addrs := r.Addrs
		if len(addrs) == 0 && r.Addr != "" {
			addrs = []string{r.Addr}
		}
		return redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: hostPorts(addrs), CredentialsProviderContext: credentials(r.Username), TLSConfig: tlsCfg,
			DialTimeout: dial, ReadOnly: replica, ContextTimeoutEnabled: true, DisableIdentity: true,
			ReadTimeout: 10 * time.Second, DialerRetries: dialRetries,
		}), nil
	case config.ModeSentinel:
		o := &redis.FailoverOptions{
			MasterName: r.MasterName, SentinelAddrs: hostPorts(r.Addrs),
			CredentialsProviderContext: credentials(r.Username), DB: r.DB, TLSConfig: tlsCfg,
			DialTimeout: dial, ReplicaOnly: replica, ContextTimeoutEnabled: true, DisableIdentity: true,
			ReadTimeout: 10 * time.Second, DialerRetries: dialRetries,
		}
		return &Failover{Client: redis.NewFailoverClient(o), opt: o}, nil
	}
	opt := &redis.Options{Addr: r.Addr}
	if strings.Contains(r.Addr, "://") {
		u, err := redis.ParseURL(r.Addr)
		if err != nil {
			return nil, fmt.Errorf("redis.addr: %w", err)
		}
		opt = u
		if opt.TLSConfig != nil && tlsCfg == nil {
			tlsCfg = opt.TLSConfig
		}
	}
	if r.Username != "" {
		opt.Username = r.Username
	}
	// Every new connection reads the password afresh: a rotated
	// password_file needs no reload, and dropped connections log in with
	// the current one.
	opt.CredentialsProviderContext = credentials(opt.Username)
	if r.DB != 0 {
		opt.DB = r.DB
	}
	opt.TLSConfig = tlsCfg
	opt.DialTimeout = dial
	opt.ContextTimeoutEnabled = true
	opt.DisableIdentity = true
	opt.ReadTimeout = 10 * time.Second
	opt.DialerRetries = dialRetries
	return redis.NewClient(opt), nil
}

// Failover is the client of a Sentinel-managed Redis: go-redis's
// failover client, and the options it was made from, with which the
// topology reaches one replica for a whole sweep (topology.FailoverClient);
// go-redis's replica client dials a replica at random for each connection.
type Failover struct {
	*redis.Client
	opt *redis.FailoverOptions
}

// Failover returns the failover client and its options.
func (f *Failover) Failover() (*redis.Client, *redis.FailoverOptions) { return f.Client, f.opt }

func hostPorts(addrs []string) []string {
	out := make([]string, 0, len(addrs))
	for _, a := range addrs {
		out = append(out, strings.TrimPrefix(strings.TrimPrefix(a, "redis://"), "rediss://"))
	}
	return out
}

// TLSConfig builds the TLS settings from the tls block; nil when TLS is off.
// A rediss:// address turns TLS on with the system roots. The client
// certificate and key are read now, so that a bad file refuses the config,
// and again whenever they change on disk, so that a renewed certificate is
// used by the next connection without a reload.
func TLSConfig(r *config.Redis) (*tls.Config, error) {
	t := r.TLS
	if t == nil {
		if strings.HasPrefix(r.Addr, "rediss://") {
			return &tls.Config{MinVersion: tls.VersionTLS12}, nil
		}
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify}
	if t.CAFile != "" {
		// The CA is read once per config: a CA change is rare and comes
		// with a reload. Verifying by hand against a reloaded pool would
		// lose crypto/tls's host-name check for IP addresses.
		pool, err := loadPool(t.CAFile)
		if err != nil {
			return nil, err
		}
		c.RootCAs = pool
	}
	if t.CertFile != "" || t.KeyFile != "" {
		kp := &fileMaterial{}
		if _, err := kp.clientCert(t.CertFile, t.KeyFile); err != nil {
			return nil, err
		}
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return kp.clientCert(t.CertFile, t.KeyFile)
		}
	}
	return c, nil
}
