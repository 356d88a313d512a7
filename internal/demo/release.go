package demo

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"github.com/alicebob/miniredis/v2"
	"golang.org/x/crypto/bcrypt"
)

// Release is what the demo sets up so that the release button can be
// tried: an operator for the web pages with a generated password, an audit
// file, and a Redis user for the writes (the sampling user stays
// read-only, as in production). Every file is in Dir, a temporary folder
// left in place when the demo ends: the audit file is for reading after.
type Release struct {
	Dir           string
	WebConfigFile string // basic-auth users for --web.config.file
	AuditFile     string // for --release.audit-file
	Operator      string // the web login
	Password      string // its password, generated for this run
}

// Redis users of the demo: the sampler logs in as default, releases as
// releaseUser, each with a generated password kept in a file.
const (
	releaseUser = "slot_release"
	operator    = "demo"
)

func secret() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// setupRelease writes the files and gives the embedded Redis its users;
// it returns the release block and the sampling password's file for the
// demo config, and the sampling password for the demo's own client.
func setupRelease(mr *miniredis.Miniredis) (r *Release, samplingPW, samplingFile, releaseFile string, err error) {
	dir, err := os.MkdirTemp("", "slot_exporter-demo-")
	if err != nil {
		return nil, "", "", "", fmt.Errorf("demo release folder: %w", err)
	}
	r = &Release{Dir: dir, Operator: operator, Password: secret(),
		WebConfigFile: filepath.Join(dir, "web-config.yml"), AuditFile: filepath.Join(dir, "audit.jsonl")}
	samplingPW, releasePW := secret(), secret()
	samplingFile, releaseFile = filepath.Join(dir, "redis-password"), filepath.Join(dir, "release-password")
	hash, err := bcrypt.GenerateFromPassword([]byte(r.Password), bcrypt.DefaultCost)
	if err != nil {
		return nil, "", "", "", err
	}
	for _, f := range []struct{ path, body string }{
		{samplingFile, samplingPW + "\n"},
		{releaseFile, releasePW + "\n"},
		{r.WebConfigFile, fmt.Sprintf("basic_auth_users:\n  %s: %q\n", operator, hash)},
	} {
		if err := os.WriteFile(f.path, []byte(f.body), 0o600); err != nil {
			return nil, "", "", "", fmt.Errorf("demo release files: %w", err)
		}
	}
	mr.RequireUserAuth("default", samplingPW)
	mr.RequireUserAuth(releaseUser, releasePW)
	return r, samplingPW, samplingFile, releaseFile, nil
}
