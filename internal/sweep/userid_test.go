package sweep

import (
	"testing"

	"github.com/cespare/xxhash/v2"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/redisproc"
)

// TestUserID: a user is known by its canonical key's hash, the key's own
// for the key under that name, so that a held key need not keep its
// user's beside it; every key of one user gets the same ID, and a user
// regexp without a canonical key names users by the hash of the name.
func TestUserID(t *testing.T) {
	for _, tc := range []struct {
		name, match, user string
		keys              []string // all of one user
		byKey             string   // the key whose hash is the user's ID; "" by name
	}{
		{"glob", "jobs:*:slots", "", []string{"jobs:u1:slots"}, "jobs:u1:slots"},
		{"glob tail", "joishi:streams:*", "", []string{"joishi:streams:{u1}"}, "joishi:streams:{u1}"},
		{"braces", "joishi:streams:*", `^joishi:streams:\{?([^}]+)\}?$`,
			[]string{"joishi:streams:{u1}", "joishi:streams:u1", "joishi:streams:{u1", "joishi:streams:u1}"}, "joishi:streams:{u1}"},
		{"braces, only unbraced keys", "joishi:streams:*", `^joishi:streams:\{?([^}]+)\}?$`,
			[]string{"joishi:streams:u1"}, "joishi:streams:{u1}"},
		{"custom", "t:*", `^t:([a-z]+):[0-9]+$`, []string{"t:u:1", "t:u:2"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Parse([]byte(redisproc.Config{Addr: "127.0.0.1:6379", Families: []redisproc.Family{
				{Name: "f", Kind: "counter", Match: tc.match, User: tc.user, Limit: 1},
			}}.YAML()))
			if err != nil {
				t.Fatal(err)
			}
			f := &family{cfg: &cfg.Families[0]}
			var want uint64
			if tc.byKey != "" {
				want = xxhash.Sum64String(tc.byKey)
			}
			for _, k := range tc.keys {
				user, ok := f.cfg.UserOf(k)
				if !ok {
					t.Fatalf("%q: no user", k)
				}
				if tc.byKey == "" {
					want = xxhash.Sum64String(user)
				}
				if got := f.userID(k, xxhash.Sum64String(k), user); got != want {
					t.Errorf("%q (user %q): ID %x, want %x", k, user, got, want)
				}
			}
		})
	}
}
