package redisconn

import (
	"strings"
	"testing"

	"github.com/slotexporter/slot_exporter/config"
)

// TestCheck: the checks that need a file or the client's URL parser moved
// here from config, with their errors as they were; --config.check, the
// start and a reload give them through Check (New calls it).
func TestCheck(t *testing.T) {
	const fam = "families: [{name: a, kind: counter, match: 'a:*', limit: 1}]\n"
	for _, c := range []struct {
		name, yaml, file, want string
	}{
		{name: "TLS file missing, named as written", file: "testdata/bad-tls-missing-file.yml",
			want: `redis.tls.ca_file: "missing-ca.pem": no such file or directory`},
		{name: "URL db and db", yaml: "redis: {addr: 'redis://h:1/3', db: 4}\n" + fam,
			want: "redis.db: the database is also given in the redis.addr URL"},
		{name: "URL path", yaml: "redis: {addr: 'redis://h:1/x'}\n" + fam,
			want: `redis.addr: invalid URL: invalid database number: "x"`},
		{name: "URL db in cluster mode", yaml: "redis: {mode: cluster, addr: 'redis://h:1/2'}\n" + fam,
			want: "redis.addr: the URL names a database other than 0; a cluster has only database 0"},
		{name: "TLS file a directory", yaml: "redis: {addr: 'h:1', tls: {ca_file: testdata}}\n" + fam,
			want: `redis.tls.ca_file: "testdata": is a directory`},
		{name: "good URL", yaml: "redis: {addr: 'redis://h:1/3'}\n" + fam},
	} {
		t.Run(c.name, func(t *testing.T) {
			var cfg *config.Config
			var err error
			if c.file != "" {
				cfg, err = config.Load(c.file)
			} else {
				cfg, err = config.Parse([]byte(c.yaml))
			}
			if err != nil {
				t.Fatalf("config: %v (config no longer checks this)", err)
			}
			err = Check(&cfg.Redis)
			if c.want == "" {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				return
			}
			if err == nil || err.Error() != c.want {
				t.Fatalf("Check = %v, want %q", err, c.want)
			}
			if _, err := New(&cfg.Redis); err == nil || err.Error() != c.want {
				t.Errorf("New = %v, want the same error as Check", err)
			}
			if strings.Contains(c.want, "tls") && strings.Contains(err.Error(), "/") {
				t.Errorf("the file is named as resolved, not as written: %v", err)
			}
		})
	}
}
