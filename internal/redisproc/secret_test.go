package redisproc

import (
	"strings"
	"testing"
)

// TestSecret: every secret is fresh and greppable.
func TestSecret(t *testing.T) {
	a, b := Secret(), Secret()
	if a == b {
		t.Errorf("two secrets are the same: %s", a)
	}
	for _, s := range []string{a, b} {
		if !strings.HasPrefix(s, SecretPrefix) || len(s) != len(SecretPrefix)+24 {
			t.Errorf("secret %q: want %s and 24 hex digits", s, SecretPrefix)
		}
	}
}
