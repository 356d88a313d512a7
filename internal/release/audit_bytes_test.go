package release

import (
	"context"
	"encoding/base64"
	"slices"
	"testing"
	"time"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
)

// rawRecord is an audit line with the base64 fields of ids that are not
// UTF-8.
type rawRecord struct {
	Action, Result, User string
	Keys                 []string
	KeysB64              []string `json:"keys_b64"`
	UserB64              string   `json:"user_b64"`
	Items                []struct {
		Key       string
		KeyB64    string `json:"key_b64"`
		Member    string
		MemberB64 string `json:"member_b64"`
		Outcome   string
	}
}

// TestAuditKeepsBytes: members, a key, a user and a lock token that are
// not UTF-8 go through a real preview and release, and the audit file
// holds every one faithfully: escaped (\xNN) where JSON needs text,
// exact in base64 beside it, and two members that differ only in an
// invalid byte stay two.
func TestAuditKeepsBytes(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	now := f.now(t)
	user := "u\xff\\"
	key := f.slotSet(t, user, map[string]float64{"m\xfe": float64(now - 60_000), "m\xff": float64(now - 61_000), "ok": float64(now - 62_000)})
	token := "tok\xc3\x28"
	f.admin.Set(ctx, "lock:job:eu-bin", token, time.Hour)
	for _, fam := range []string{"streams", "jobs"} {
		u := user
		if fam == "jobs" {
			u = "bin"
		}
		p, err := f.rel.Preview(ctx, req(fam, u))
		if err != nil || p.Refusal != "" {
			t.Fatal(fam, err, p.Refusal)
		}
		if _, err := f.rel.Execute(ctx, p, confirm("bytes")); err != nil {
			t.Fatal(fam, err)
		}
	}
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	recs := exportertest.JSONLines[rawRecord](t, f.audit)
	var members, escaped []string
	sawToken := false
	for _, r := range recs {
		if r.Result != ResultReleased {
			continue
		}
		for _, it := range r.Items {
			if it.Key == `joishi:streams:{u\xff\\}` {
				if it.KeyB64 != b64(key) {
					t.Errorf("key_b64 %q, want %q", it.KeyB64, b64(key))
				}
				m := it.Member
				if it.MemberB64 != "" {
					raw, err := base64.StdEncoding.DecodeString(it.MemberB64)
					if err != nil {
						t.Fatal(err)
					}
					m = string(raw)
				}
				members = append(members, m)
				escaped = append(escaped, it.Member)
			}
			if it.Key == "lock:job:eu-bin" {
				sawToken = it.Member == `tok\xc3(` && it.MemberB64 == b64(token) && it.Outcome == Removed
			}
		}
		if r.UserB64 != "" && (r.UserB64 != b64(user) || r.User != `u\xff\\`) {
			t.Errorf("user %q, user_b64 %q", r.User, r.UserB64)
		}
		if r.User == `u\xff\\` && (len(r.KeysB64) != 1 || r.KeysB64[0] != b64(key)) {
			t.Errorf("keys_b64 %v", r.KeysB64)
		}
	}
	slices.Sort(members)
	slices.Sort(escaped)
	if !slices.Equal(members, []string{"m\xfe", "m\xff", "ok"}) || !slices.Equal(escaped, []string{`m\xfe`, `m\xff`, "ok"}) {
		t.Errorf("members %q, escaped %q", members, escaped)
	}
	if !sawToken {
		t.Errorf("the lock's token is not faithfully in the audit: %+v", recs)
	}
}
