// Package token makes the random tokens the recipes write into Redis to
// tell one hold or take from the next: a lock's owner, a queue job's
// lease.
package token

import (
	"crypto/rand"
	"encoding/hex"
)

// New returns a random token: 128 bits, in hex.
func New() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}
