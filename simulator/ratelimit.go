package simulator

import (
	"math/rand/v2"
	"sync"
	"time"

	"github.com/slotexporter/slot_exporter/recipe/ratelimit"
)

// ModeHealthy is the mode of actors that use their recipe as intended, in
// every kind.
const ModeHealthy = "healthy"

// Rate-limit caller modes, besides ModeHealthy.
const (
	// RateNoExpire: INCR, then PEXPIRE when it returned 1, as two commands;
	// the caller crashes between them on its very first hit, so the
	// counter never gets a TTL. It carries on with the same code.
	RateNoExpire = "no_expire"
	// RateExpireEveryHit: INCR, then PEXPIRE window on every hit.
	RateExpireEveryHit = "expire_every_hit"
	// RateSecondsAsMillis: the recipe, given the window's value in seconds
	// as milliseconds: a window 1000 times too short (at least 1ms).
	RateSecondsAsMillis = "seconds_as_millis"
	// RateMillisAsSeconds: the recipe, given the window's value in
	// milliseconds as seconds: a window 1000 times too long.
	RateMillisAsSeconds = "millis_as_seconds"
)

// Rate-limit workload defaults.
const (
	DefaultRatePrefix = "rl:api:"
	DefaultRateLimit  = 10
	DefaultRateWindow = 10 * time.Second
)

// RateLimitWorkload drives fixed-window rate limits (package
// recipe/ratelimit): callers, one per user, each hitting its own counter
// Prefix+"{"+user+"}" every HitInterval. The counts say how many callers
// run in each mode; all zero (the default) turns the workload off.
type RateLimitWorkload struct {
	// Prefix prefixes the counters (default "rl:api:").
	Prefix string
	// Limit is the hits allowed per window (default 10).
	Limit int64
	// Window is the window the callers mean to use (default 10s).
	Window time.Duration
	// HitInterval is the time between two hits of one caller. The default,
	// Window / (2 × Limit), is twice the allowed rate: callers reach the
	// limit halfway through each window.
	HitInterval time.Duration

	Healthy         int // callers using the recipe as intended
	NoExpire        int // RateNoExpire callers
	ExpireEveryHit  int // RateExpireEveryHit callers
	SecondsAsMillis int // RateSecondsAsMillis callers
	MillisAsSeconds int // RateMillisAsSeconds callers
}

func (w *RateLimitWorkload) counts() map[string]int {
	return map[string]int{
		"Healthy": w.Healthy, "NoExpire": w.NoExpire, "ExpireEveryHit": w.ExpireEveryHit,
		"SecondsAsMillis": w.SecondsAsMillis, "MillisAsSeconds": w.MillisAsSeconds,
	}
}

func (w *RateLimitWorkload) validate(users int) error {
	total, err := checkCounts("RateLimits", users, w.counts())
	if err != nil {
		return err
	}
	if err := checkDurations("RateLimits", map[string]time.Duration{"Window": w.Window, "HitInterval": w.HitInterval}); err != nil {
		return err
	}
	if w.Limit < 0 {
		return errorf("RateLimits.Limit %d must not be negative", w.Limit)
	}
	if total == 0 {
		return nil
	}
	w.Prefix = orDefault(w.Prefix, DefaultRatePrefix)
	w.Limit = orDefault(w.Limit, DefaultRateLimit)
	w.Window = orDefault(w.Window, DefaultRateWindow)
	if w.Window < time.Millisecond {
		return errorf("RateLimits.Window %v must be at least 1ms", w.Window)
	}
	w.HitInterval = orDefault(w.HitInterval, max(w.Window/time.Duration(2*w.Limit), time.Millisecond))
	return nil
}

// RateLimitTruth is the rate-limit workload's ground truth. Gauges describe
// the counters present in Redis at Truth.At; per-user maps hold the
// counter's value.
type RateLimitTruth struct {
	Limit         int64   `json:"limit"`
	WindowSeconds float64 `json:"window_seconds"`
	// Users maps each caller's user to its mode.
	Users map[string]string `json:"users"`

	Hits    int64 `json:"hits"`    // hits sent and answered
	Allowed int64 `json:"allowed"` // hits whose count was within Limit
	Refused int64 `json:"refused"` // hits over Limit

	// Keys counts the counters present: hit at least once, TTL not run out.
	Keys int64 `json:"keys"`
	// KeysWithoutTTL counts present counters with no expiry (PTTL -1).
	KeysWithoutTTL int64 `json:"keys_without_ttl"`
	// KeysTTLBeyondWindow counts present counters whose remaining TTL
	// exceeds Window.
	KeysTTLBeyondWindow int64 `json:"keys_ttl_beyond_window"`
	// CallersAtLimit counts present counters whose value is >= Limit: the
	// caller is refused right now.
	CallersAtLimit int64 `json:"callers_at_limit"`
	// CallersLockedOut counts counters at or over Limit that will not
	// restart by themselves: no TTL, or the current window opened (the
	// hit whose INCR returned 1) more than 2 × Window ago.
	CallersLockedOut int64 `json:"callers_locked_out"`

	// Used is every present counter's value, by user.
	Used map[string]int64 `json:"used"`
	// WindowAgeSeconds is, by user of a present counter, the time since its
	// current window opened: since the counter last restarted.
	WindowAgeSeconds     map[string]float64 `json:"window_age_seconds"`
	NoTTLUsers           map[string]int64   `json:"no_ttl_users"`
	TTLBeyondWindowUsers map[string]int64   `json:"ttl_beyond_window_users"`
	LockedOutUsers       map[string]int64   `json:"locked_out_users"`
}

type rateWorkload struct {
	s *Sim
	o RateLimitWorkload

	mu      sync.Mutex
	callers []*rateCaller
	hits    int64
	allowed int64
	refused int64
	errors  int64
}

type rateCaller struct {
	user, key, mode string
	lim             *ratelimit.Limiter // recipe modes
	rng             *rand.Rand

	// Guarded by rateWorkload.mu.
	crashed bool      // RateNoExpire: its one crash has happened
	hit     bool      // at least one hit landed
	value   int64     // the count the last hit returned
	opened  time.Time // the hit whose count was 1
	expires time.Time // zero: no TTL
}

func newRateWorkload(s *Sim) *rateWorkload {
	o := s.o.RateLimits
	modes := modeList(map[string]int{
		ModeHealthy: o.Healthy, RateNoExpire: o.NoExpire, RateExpireEveryHit: o.ExpireEveryHit,
		RateSecondsAsMillis: o.SecondsAsMillis, RateMillisAsSeconds: o.MillisAsSeconds,
	}, []string{ModeHealthy, RateNoExpire, RateExpireEveryHit, RateSecondsAsMillis, RateMillisAsSeconds})
	if len(modes) == 0 {
		return nil
	}
	w := &rateWorkload{s: s, o: o}
	users := s.pickUsers(saltRateUsers, len(modes))
	for i, mode := range modes {
		c := &rateCaller{user: users[i], key: s.RateKey(users[i]), mode: mode, rng: s.actorRng(saltRateUsers, i)}
		window := o.Window
		switch mode {
		case RateSecondsAsMillis:
			window = max(time.Duration(o.Window.Seconds()*float64(time.Millisecond)), time.Millisecond)
		case RateMillisAsSeconds:
			window = time.Duration(o.Window.Milliseconds()) * time.Second
		}
		// Options were validated: New cannot fail.
		c.lim, _ = ratelimit.New(s.c, ratelimit.Options{Limit: o.Limit, Window: window})
		w.callers = append(w.callers, c)
	}
	return w
}

// RateKey returns user's rate counter ("" when the workload is off).
func (s *Sim) RateKey(user string) string {
	if s.o.RateLimits.Prefix == "" {
		return ""
	}
	return s.o.RateLimits.Prefix + "{" + user + "}"
}

func (w *rateWorkload) start() {
	for _, c := range w.callers {
		w.s.wg.Add(1)
		go w.run(c)
	}
}

func (w *rateWorkload) run(c *rateCaller) {
	defer w.s.wg.Done()
	s := w.s
	// The workload owns its keys: what a previous run left is not its truth.
	if !s.step(func() { w.check(s.c.Del(s.rctx, c.key).Err()) }) {
		return
	}
	if !s.sleep(time.Duration(c.rng.Float64() * float64(w.o.HitInterval))) {
		return
	}
	next := time.Now()
	for {
		if !s.step(func() { w.hit(c) }) {
			return
		}
		next = next.Add(w.o.HitInterval)
		if time.Until(next) < -w.o.HitInterval {
			next = time.Now() // far behind (a pause, a slow Redis): no burst to catch up
		}
		if !s.sleep(time.Until(next)) {
			return
		}
	}
}

func (w *rateWorkload) hit(c *rateCaller) {
	ctx, rc := w.s.rctx, w.s.c
	sent := time.Now()
	switch c.mode {
	case RateNoExpire:
		n, err := rc.Incr(ctx, c.key).Result()
		if !w.check(err) {
			return
		}
		w.mu.Lock()
		crashed := c.crashed
		c.crashed = true
		w.mu.Unlock()
		if n == 1 && crashed {
			// Only the first window's EXPIRE was lost to the crash; a counter
			// that vanished since (data loss) gets one again.
			if !w.check(rc.PExpire(ctx, c.key, w.o.Window).Err()) {
				return
			}
			w.record(c, sent, n, sent.Add(w.o.Window), true)
			return
		}
		w.record(c, sent, n, time.Time{}, false)
	case RateExpireEveryHit:
		pipe := rc.Pipeline()
		incr := pipe.Incr(ctx, c.key)
		pipe.PExpire(ctx, c.key, w.o.Window)
		if _, err := pipe.Exec(ctx); !w.check(err) {
			return
		}
		w.record(c, sent, incr.Val(), sent.Add(w.o.Window), true)
	default:
		r, err := c.lim.Allow(ctx, c.key)
		if !w.check(err) {
			return
		}
		w.record(c, sent, r.Count, sent.Add(r.TTL), true)
	}
}

func (w *rateWorkload) record(c *rateCaller, at time.Time, count int64, expires time.Time, setExpiry bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	c.hit = true
	c.value = count
	if count == 1 {
		c.opened = at
	}
	if setExpiry {
		c.expires = expires
	}
	w.hits++
	if count <= w.o.Limit {
		w.allowed++
	} else {
		w.refused++
	}
}

// check counts err; it reports whether there was none.
func (w *rateWorkload) check(err error) bool {
	if err == nil {
		return true
	}
	w.mu.Lock()
	w.errors++
	w.mu.Unlock()
	return false
}

func (w *rateWorkload) fill(t *Truth, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	rt := &RateLimitTruth{
		Limit: w.o.Limit, WindowSeconds: w.o.Window.Seconds(), Users: map[string]string{},
		Hits: w.hits, Allowed: w.allowed, Refused: w.refused,
		Used: map[string]int64{}, WindowAgeSeconds: map[string]float64{},
		NoTTLUsers: map[string]int64{}, TTLBeyondWindowUsers: map[string]int64{}, LockedOutUsers: map[string]int64{},
	}
	for _, c := range w.callers {
		rt.Users[c.user] = c.mode
		noTTL := c.expires.IsZero()
		if !c.hit || (!noTTL && !c.expires.After(now)) {
			continue
		}
		rt.Keys++
		rt.Used[c.user] = c.value
		rt.WindowAgeSeconds[c.user] = now.Sub(c.opened).Seconds()
		switch {
		case noTTL:
			rt.KeysWithoutTTL++
			rt.NoTTLUsers[c.user] = c.value
		case c.expires.Sub(now) > w.o.Window:
			rt.KeysTTLBeyondWindow++
			rt.TTLBeyondWindowUsers[c.user] = c.value
		}
		if c.value >= w.o.Limit {
			rt.CallersAtLimit++
			if noTTL || now.Sub(c.opened) > 2*w.o.Window {
				rt.CallersLockedOut++
				rt.LockedOutUsers[c.user] = c.value
			}
		}
	}
	t.RateLimits = rt
	t.Errors += w.errors
}
