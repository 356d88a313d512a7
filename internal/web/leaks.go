package web

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/release"
	"github.com/slotexporter/slot_exporter/internal/snapshot"
	"github.com/slotexporter/slot_exporter/internal/track"
)

type leaksPage struct {
	Families []familyView
}

type familyView struct {
	Name, Kind, Sweep, Limit, FloorWindow string
	Active, AtLimit, FloorNonzero         int
	Users                                 []userRow
	Dropped                               int
}

type userRow struct {
	Shown, Link   string
	Used, UsedMax int64
	Limit, Floor  string
	FloorOver     bool
	Anomalies     []string
}

func (h *Handler) leaks(w http.ResponseWriter, r *http.Request) {
	page := leaksPage{}
	var snap *snapshot.Snapshot
	if h.o.Source != nil {
		snap = h.o.Source.Snapshot()
	}
	now := time.Now()
	if snap != nil {
		for _, f := range snap.Families {
			fv := familyView{
				Name: f.Name, Kind: f.Kind, Sweep: sweepText(f, now), Limit: limitText(f),
				FloorWindow: "off (0)",
				Active:      f.Aggregates.Active, AtLimit: f.Aggregates.AtLimit, FloorNonzero: f.Aggregates.FloorNonzero,
				Dropped: f.SeriesDropped,
			}
			if f.FloorWindow > 0 {
				fv.FloorWindow = f.FloorWindow.String()
			}
			for _, u := range f.Users {
				fv.Users = append(fv.Users, userRow{
					Shown: shown(u.User), Link: userLink(f.Name, u.User),
					Used: u.Used, UsedMax: u.UsedMax, Limit: limitText(f),
					Floor:     fmtDuration(time.Duration(u.FloorSeconds * float64(time.Second))),
					FloorOver: f.FloorWindow > 0 && u.FloorSeconds >= f.FloorWindow.Seconds(),
					Anomalies: anomalyNames(u.Flags, f.Kind),
				})
			}
			page.Families = append(page.Families, fv)
		}
	}
	h.render(w, http.StatusOK, "leaks", "Leaks", []crumb{{Text: "Leaks"}}, page)
}

func limitText(f *snapshot.Family) string {
	if !f.HasLimit {
		return "none"
	}
	return strconv.FormatFloat(f.Limit, 'f', -1, 64)
}

func sweepText(f *snapshot.Family, now time.Time) string {
	switch {
	case f.LastSuccess.IsZero() && f.OK:
		return "not yet"
	case f.LastSuccess.IsZero():
		return "failing; no sweep has succeeded yet"
	case !f.OK:
		return fmt.Sprintf("failing; the last success was %s ago", fmtDuration(now.Sub(f.LastSuccess)))
	case !f.Fresh(now):
		return fmt.Sprintf("succeeded %s ago: stale, the numbers below are old", fmtDuration(now.Sub(f.LastSuccess)))
	}
	return fmt.Sprintf("succeeded %s ago", fmtDuration(now.Sub(f.LastSuccess)))
}

// kindAnomaly names AnomalyKind per kind.
var kindAnomaly = map[string]string{
	string(config.KindRateLimit): "window never ends",
	string(config.KindLock):      "lock without TTL",
	string(config.KindList):      "queue stalled",
	string(config.KindStream):    "stuck entries or dead consumer",
	string(config.KindBullMQ):    "orphaned, stuck or overdue jobs",
	string(config.KindSidekiq):   "orphaned, stuck or overdue jobs",
	string(config.KindRQ):        "orphaned, stuck or overdue jobs",
	string(config.KindCelery):    "orphaned, stuck or overdue jobs",
}

func anomalyNames(flags uint8, kind string) []string {
	var out []string
	for _, a := range []struct {
		bit  uint8
		name string
	}{
		{track.AnomalyOverLimit, "over limit"},
		{track.AnomalyExpired, "expired"},
		{track.AnomalyZombie, "zombie"},
		{track.AnomalyFuture, "future"},
		{track.AnomalyStale, "stale"},
		{track.AnomalyNegative, "negative counter"},
	} {
		if flags&a.bit != 0 {
			out = append(out, a.name)
		}
	}
	if flags&track.AnomalyKind != 0 {
		name := kindAnomaly[kind]
		if name == "" {
			name = kind + " anomaly"
		}
		out = append(out, name)
	}
	return out
}

// lookup sends the per-family form's user to the user's page.
func (h *Handler) lookup(w http.ResponseWriter, r *http.Request) {
	fam := r.PathValue("family")
	user := r.URL.Query().Get("user")
	if user == "" {
		h.fail(w, http.StatusBadRequest, "no user given", "/leaks")
		return
	}
	http.Redirect(w, r, userLink(fam, user), http.StatusSeeOther)
}

type userPage struct {
	Family, Kind, User, Now  string
	Keys                     []keyView
	How                      string
	Tried                    []string
	Scan                     string
	Sweep                    string
	Untracked, IsLock        bool
	ReleaseLink, ReleaseWhat string
	NotReleasable            string
}

type keyView struct {
	Shown, TTL, Problem string
	Members             []memberView
	Truncated           bool
	// Cut counts the members longer than release.MaxMemberBytes.
	Cut       int
	MaxMember int
	Value     string
	Queue     *queueView
	Stream    *streamView
}

type memberView struct {
	Shown, State, Score, Expiry, FirstSeen, Heartbeat, Why string
	// Held is how long a tracked member has been held, shown under its
	// first-seen time: on one line the two made the page wider than a
	// 1280-pixel window.
	Held string
	// Cut says why a member too long to read whole is kept.
	Cut string
}

type queueView struct {
	Length int64
	Head   string
	Cut    bool
	Max    int
	Size   int64
}

type streamView struct {
	Length    int64
	Groups    []groupView
	GroupsCut bool
}

type groupView struct {
	Name, Lag, LastDelivered string
	Pending                  int64
	Consumers                []consumerView
	ConsumersCut             bool
}

type consumerView struct {
	Name, Idle, Inactive string
	Pending              int64
}

// family finds a family of the current config, or answers 404.
func (h *Handler) family(w http.ResponseWriter, r *http.Request) (*config.Family, bool) {
	name := r.PathValue("family")
	var cfg *config.Config
	if h.o.Source != nil {
		cfg = h.o.Source.Config()
	}
	if cfg != nil {
		for i := range cfg.Families {
			if cfg.Families[i].Name == name {
				return &cfg.Families[i], true
			}
		}
	}
	h.fail(w, http.StatusNotFound, fmt.Sprintf("no family %q in the config", name), "/leaks")
	return nil, false
}

// allowLive takes a token of the live-read budget, or answers 429.
func (h *Handler) allowLive(w http.ResponseWriter) bool {
	if h.limiter.Allow() {
		return true
	}
	w.Header().Set("Retry-After", "1")
	h.fail(w, http.StatusTooManyRequests, "too many live reads of Redis: this page reads Redis and is rate-limited; try again in a second", "")
	return false
}

func (h *Handler) user(w http.ResponseWriter, r *http.Request) {
	f, ok := h.family(w, r)
	if !ok {
		return
	}
	user := r.PathValue("user")
	if f.Kind.Framework() {
		h.queue(w, f, user)
		return
	}
	if !h.allowLive(w) {
		return
	}
	topo := h.o.Source.Topology()
	if topo == nil {
		h.fail(w, http.StatusServiceUnavailable, "the exporter is not connected to Redis yet", "/leaks")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), liveReadTimeout)
	defer cancel()
	hold, err := release.Read(ctx, topo, f, user, release.ReadOptions{FirstSeen: h.o.FirstSeen})
	if err != nil {
		status := http.StatusBadGateway
		if errors.Is(err, context.DeadlineExceeded) {
			status = http.StatusGatewayTimeout
		}
		h.fail(w, status, "reading Redis: "+err.Error(), "/leaks")
		return
	}
	page := userPage{
		Family: f.Name, Kind: string(f.Kind), User: shown(user), Now: timeOfMs(hold.Now),
		How: hold.Search.How, IsLock: f.Kind == config.KindLock,
	}
	if page.How == "" {
		page.How = "no key found"
	}
	for _, k := range hold.Search.Tried {
		page.Tried = append(page.Tried, shown(k))
	}
	if hold.Search.Pattern != "" {
		page.Scan = fmt.Sprintf("MATCH %s: %d keys looked at", shown(hold.Search.Pattern), hold.Search.Scanned)
		if hold.Search.Cut {
			page.Scan += ", stopped at its bounds before the end of the keyspace: a key may exist beyond"
		}
	}
	page.Sweep = h.sweepOfUser(f.Name, user)
	for i := range hold.Keys {
		kv := keyViewOf(f, hold, &hold.Keys[i])
		for _, m := range hold.Keys[i].Members {
			page.Untracked = page.Untracked || !m.Tracked
		}
		page.Keys = append(page.Keys, kv)
	}
	if h.o.Releaser != nil {
		if ok, why := release.Releasable(f.Kind); ok {
			page.ReleaseLink = userLink(f.Name, user) + "/preview"
			page.ReleaseWhat = releaseWhat(f.Kind)
		} else {
			page.NotReleasable = "Release: " + why + "."
		}
	}
	h.render(w, http.StatusOK, "user", f.Name+": "+shown(user),
		[]crumb{{Text: "Leaks", Href: "/leaks"}, {Text: f.Name, Href: "/leaks#family-" + f.Name}, {Text: shown(user)}}, page)
}

func releaseWhat(k config.Kind) string {
	switch k {
	case config.KindLock:
		return "lock"
	case config.KindCounter, config.KindRateLimit:
		return "counter"
	}
	return "slots"
}

// sweepOfUser says what the last sweep found of a user.
func (h *Handler) sweepOfUser(family, user string) string {
	snap := h.o.Source.Snapshot()
	if snap == nil {
		return "no sweep yet"
	}
	f := snap.Family(family)
	if f == nil {
		return "no sweep yet"
	}
	for _, u := range f.Users {
		if u.User == user {
			s := fmt.Sprintf("used %d (max %d in the window), floor age %s", u.Used, u.UsedMax,
				fmtDuration(time.Duration(u.FloorSeconds*float64(time.Second))))
			if names := anomalyNames(u.Flags, f.Kind); len(names) > 0 {
				s += "; anomalies: " + joinNames(names)
			}
			return s
		}
	}
	return "not among the users the last sweep listed (nothing to report, or beyond leaks.per_user_series)"
}

func keyViewOf(f *config.Family, h *release.Holdings, k *release.KeyHolding) keyView {
	kv := keyView{Shown: shown(k.Key), TTL: fmtTTL(k.PTTL), Problem: k.Problem, Truncated: k.Truncated, MaxMember: release.MaxMemberBytes}
	if k.Problem != "" {
		return kv
	}
	for i := range k.Members {
		kv.Members = append(kv.Members, memberViewOf(f, h.Now, &k.Members[i]))
		if k.Members[i].Cut {
			kv.Cut++
		}
	}
	switch f.Kind {
	case config.KindCounter, config.KindRateLimit:
		kv.Value = shown(k.Value)
	case config.KindList:
		kv.Queue = &queueView{Length: k.Length, Head: shown(k.Head), Cut: k.HeadCut, Max: release.MaxHeadBytes, Size: k.HeadBytes}
		if k.HeadCut {
			kv.Queue.Head = shown(wholeRunes(k.Head))
		}
	case config.KindStream:
		sv := &streamView{Length: k.Length, GroupsCut: k.GroupsCut}
		for _, g := range k.Groups {
			gv := groupView{Name: shown(g.Name), Pending: g.Pending, LastDelivered: shown(g.LastDelivered), ConsumersCut: g.ConsumersCut, Lag: strconv.FormatInt(g.Lag, 10)}
			if g.Lag < 0 {
				gv.Lag = "unknown"
			}
			for _, c := range g.Consumers {
				cv := consumerView{Name: shown(c.Name), Pending: c.Pending, Idle: fmtDuration(c.Idle), Inactive: fmtDuration(c.Inactive)}
				if c.Inactive < 0 {
					cv.Inactive = "never active"
				}
				gv.Consumers = append(gv.Consumers, cv)
			}
			sv.Groups = append(sv.Groups, gv)
		}
		kv.Stream = sv
	}
	return kv
}

func memberViewOf(f *config.Family, now int64, m *release.Member) memberView {
	v := memberView{
		Shown: shown(m.Member), State: m.State.String(), Score: release.FormatScore(m.Score),
		Expiry: release.FormatTime(m.Expiry), Why: why(f.Kind, m.State),
	}
	if m.Cut {
		v.Shown = shown(wholeRunes(m.Member)) + fmt.Sprintf(" … (%d bytes)", m.Size)
		v.Cut = fmt.Sprintf("longer than %d bytes, %s", release.MaxMemberBytes, release.CutRefusal)
	}
	switch {
	case m.Tracked:
		v.FirstSeen, v.Held = timeOfMs(m.FirstSeen), "held "+fmtMs(float64(now-m.FirstSeen))
	default:
		v.FirstSeen = "not tracked"
	}
	switch age := float64(now) - m.LastHeartbeat; {
	case math.IsNaN(m.LastHeartbeat):
		v.Heartbeat = "none (a lock has a lease, not heartbeats)"
	case math.IsInf(age, 0):
		v.Heartbeat = "never (an infinite score)"
	case age < 0:
		v.Heartbeat = "ahead of Redis time by " + fmtMs(-age)
	default:
		v.Heartbeat = fmtMs(age) + " ago"
	}
	if f.Kind == config.KindLock {
		// A lock's score is its lease's end: say what is left of it.
		v.Score = "no lease"
		if !math.IsInf(m.Expiry, 1) {
			v.Score = fmtMs(m.Expiry-float64(now)) + " left"
		}
	}
	return v
}

// wholeRunes drops the end of a rune that a cut split, so that a cut
// UTF-8 text is shown as text rather than quoted.
func wholeRunes(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	for i := 1; i < utf8.UTFMax && i <= len(s); i++ {
		if t := s[:len(s)-i]; utf8.ValidString(t) {
			return t
		}
	}
	return s
}

// why says what a state means, for the preview.
func why(k config.Kind, s track.MemberState) string {
	switch s {
	case track.StateExpired:
		return "its expiry has passed; it is dead but still stored (the next acquire would prune it)"
	case track.StateFuture:
		if k == config.KindLock {
			return "its lease is longer than ttl + clock_skew_tolerance: no holder asked for it (a unit bug in PX)"
		}
		return "its expiry is further ahead than any heartbeat could set (a unit bug or a skewed clock): it never expires"
	case track.StateStale:
		return "no heartbeat for longer than stale_after: its holder most likely died"
	case track.StateZombie:
		return "held for longer than max_hold while still refreshed: a loop that outlived its work"
	}
	return "live: included because live members were asked for"
}
