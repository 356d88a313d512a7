package web

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/slotexporter/slot_exporter/internal/release"
)

// A preview is kept on the server until it is confirmed or expires; the
// form carries only its id and a CSRF token. The token is an HMAC, under a
// random key made at start, of the operator, family, user, preview id and
// expiry: a page on another site cannot make one, a token of one operator
// or preview does not fit another, and a restart voids every token.
const (
	planTTL  = 10 * time.Minute
	maxPlans = 1000
)

type storedPlan struct {
	plan    *release.Plan
	expires time.Time
}

type planStore struct {
	key []byte
	now func() time.Time

	mu    sync.Mutex
	plans map[string]storedPlan
}

func newPlanStore() (*planStore, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	return &planStore{key: key, now: time.Now, plans: map[string]storedPlan{}}, nil
}

// put keeps a plan and returns its id and the CSRF token for it.
func (s *planStore) put(p *release.Plan) (id, token string, err error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", "", err
	}
	id = hex.EncodeToString(b)
	now := s.now()
	exp := now.Add(planTTL)
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, sp := range s.plans {
		if now.After(sp.expires) {
			delete(s.plans, k)
		}
	}
	if len(s.plans) >= maxPlans {
		// Drop the oldest: a flood of previews must not grow the heap.
		var oldest string
		for k, sp := range s.plans {
			if oldest == "" || sp.expires.Before(s.plans[oldest].expires) {
				oldest = k
			}
		}
		delete(s.plans, oldest)
	}
	s.plans[id] = storedPlan{plan: p, expires: exp}
	return id, s.token(p.Operator, p.Family, p.User, id, exp.Unix()), nil
}

func (s *planStore) mac(operator, family, user, id string, exp int64) []byte {
	m := hmac.New(sha256.New, s.key)
	for _, part := range []string{operator, family, user, id, strconv.FormatInt(exp, 10)} {
		// Length-prefixed, so that no two field lists hash alike.
		m.Write([]byte(strconv.Itoa(len(part)) + ":" + part))
	}
	return m.Sum(nil)
}

func (s *planStore) token(operator, family, user, id string, exp int64) string {
	return strconv.FormatInt(exp, 10) + "." + base64.RawURLEncoding.EncodeToString(s.mac(operator, family, user, id, exp))
}

var (
	errNoToken  = errors.New("missing CSRF token: confirm the release from its preview page")
	errBadToken = errors.New("invalid CSRF token: it does not belong to this operator, user and preview, or it expired")
)

// check verifies a token for the request's operator, family, user and
// preview id.
func (s *planStore) check(token, operator, family, user, id string) error {
	if token == "" {
		return errNoToken
	}
	expS, sig, ok := strings.Cut(token, ".")
	exp, err := strconv.ParseInt(expS, 10, 64)
	if !ok || err != nil {
		return errBadToken
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		return errBadToken
	}
	want := s.mac(operator, family, user, id, exp)
	if subtle.ConstantTimeCompare(got, want) != 1 || s.now().Unix() > exp {
		return errBadToken
	}
	return nil
}

// take removes and returns a plan: a preview is confirmed once.
func (s *planStore) take(id string) *release.Plan {
	s.mu.Lock()
	defer s.mu.Unlock()
	sp, ok := s.plans[id]
	if !ok {
		return nil
	}
	delete(s.plans, id)
	if s.now().After(sp.expires) {
		return nil
	}
	return sp.plan
}
