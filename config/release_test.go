package config

import (
	"os"
	"path/filepath"
	"testing"
)

func TestReleaseBlock(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yml")
	body := "redis: {addr: 'h:1', username: exporter}\n" +
		"release: {username: releaser, password_file: release.pw}\n" +
		"families: [{name: a, kind: counter, match: 'a:*', limit: 1}]\n"
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.Release == nil || c.Release.Username != "releaser" {
		t.Fatalf("Release = %+v, want username releaser", c.Release)
	}
	// Relative to the config file, as redis.password_file is.
	if want := filepath.Join(dir, "release.pw"); c.Release.PasswordFile != want {
		t.Errorf("release.password_file = %q, want %q", c.Release.PasswordFile, want)
	}

	c, err = Parse([]byte("redis: {addr: 'h:1'}\nfamilies: [{name: a, kind: counter, match: 'a:*', limit: 1}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Release != nil {
		t.Errorf("no release block, yet Release = %+v", c.Release)
	}
	// The default user samples when redis.username is empty.
	_, err = Parse([]byte("redis: {addr: 'h:1'}\nrelease: {username: default}\nfamilies: [{name: a, kind: counter, match: 'a:*', limit: 1}]\n"))
	if want := `release.username: must differ from the sampling user "default", which stays read-only`; err == nil || err.Error() != want {
		t.Errorf("release as the default user: %v, want %q", err, want)
	}
}
