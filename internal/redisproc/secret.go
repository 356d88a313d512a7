package redisproc

import (
	"crypto/rand"
	"encoding/hex"
)

// SecretPrefix starts every Secret, so that a test can grep any output
// (a log, an error, a page) for a secret that leaked.
const SecretPrefix = "s3cr3t-"

// Secret is a fresh random password for a server or an ACL user.
func Secret() string {
	b := make([]byte, 12)
	// crypto/rand.Read never fails: it crashes the program instead.
	_, _ = rand.Read(b)
	return SecretPrefix + hex.EncodeToString(b)
}
