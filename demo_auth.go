package main

import (
	"crypto/subtle"
	"net/http"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"
	"golang.org/x/crypto/bcrypt"
)

// releaseAuth asks for the demo's operator on the release pages only
// (preview and release), so that the rest of the demo (the landing page
// with its login hint, /metrics, the on-call pages) opens without a login,
// as it did before the demo had release. A --web.config.file protects
// every path instead, through exporter-toolkit; the demo leaves that to
// whoever gives one.
func releaseAuth(next http.Handler, webConfigFile string) (http.Handler, error) {
	b, err := os.ReadFile(webConfigFile)
	if err != nil {
		return nil, err
	}
	var c struct {
		Users map[string]string `yaml:"basic_auth_users"`
	}
	if err := yaml.Unmarshal(b, &c); err != nil {
		return nil, err
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/leaks/") || !(strings.HasSuffix(r.URL.Path, "/preview") || strings.HasSuffix(r.URL.Path, "/release")) {
			next.ServeHTTP(w, r)
			return
		}
		user, pw, ok := r.BasicAuth()
		hash, known := c.Users[user]
		if !ok || !known || bcrypt.CompareHashAndPassword([]byte(hash), []byte(pw)) != nil {
			// Compare anyway for an unknown user, so that timing does not
			// tell which users exist.
			if !known {
				_ = subtle.ConstantTimeCompare([]byte(pw), []byte(pw))
			}
			w.Header().Set("WWW-Authenticate", `Basic realm="slot_exporter release"`)
			http.Error(w, "release pages: log in as the operator the demo logged at start", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	}), nil
}
