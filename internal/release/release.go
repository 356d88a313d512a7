// Package release is the on-call loop's write side, shared by the web
// page's release button and the `slot_exporter release` command: it reads
// one user's keys live (Read), previews what a release would remove and
// why (Preview), carries it out with checks at execution time (Execute),
// and appends every preview and release to an audit file.
//
// A release never trusts the preview's picture of Redis. Slot-set members
// are removed by one Lua script that re-reads each member's score and
// keeps any that moved since the preview (a heartbeat arrived: the holder
// is alive). A lock is deleted only while it holds the previewed token.
// A counter is set only while it holds the previewed value. Writes go
// through their own client, logged in as release.username, so that the
// sampling user stays read-only.
package release

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/redisread"
	"github.com/slotexporter/slot_exporter/internal/track"
	"github.com/slotexporter/slot_exporter/redisconn"
)

// Results, the label values of slot_exporter_releases_total{result}.
const (
	ResultPreviewed = "previewed"
	ResultReleased  = "released"
	ResultRefused   = "refused"
	ResultFailed    = "failed"
)

var results = []string{ResultPreviewed, ResultReleased, ResultRefused, ResultFailed}

// Actions recorded in the audit file.
const (
	ActionPreview = "preview"
	ActionRelease = "release"
)

// Outcomes of one item.
const (
	WouldRemove = "would_remove"
	WouldSet    = "would_set"
	Removed     = "removed"
	KeptMoved   = "kept_moved"
	Gone        = "gone"
	Set         = "set"
	Changed     = "changed"
)

var (
	//go:embed scripts/members.lua
	membersSrc string
	//go:embed scripts/lock.lua
	lockSrc string
	//go:embed scripts/value.lua
	valueSrc string

	membersScript = redis.NewScript(membersSrc)
	lockScript    = redis.NewScript(lockSrc)
	valueScript   = redis.NewScript(valueSrc)
)

// pairsPerCall bounds one run of the members script: it blocks Redis
// while it runs.
const pairsPerCall = 500

// Releasable reports whether a kind's keys can be released, and if not,
// why.
func Releasable(k config.Kind) (bool, string) {
	switch k {
	case config.KindSlotSet, config.KindLock, config.KindCounter, config.KindRateLimit:
		return true, ""
	case config.KindList:
		return false, "a queue's elements are work, not slots: nothing here can release them"
	case config.KindStream:
		return false, "pending stream entries are acknowledged or claimed by consumers (XACK, XAUTOCLAIM), not released"
	}
	return false, fmt.Sprintf("kind %q cannot be released", k)
}

// ErrRefused wraps the reason a request was refused (as opposed to a
// failure of Redis or of the audit file).
var ErrRefused = errors.New("refused")

func refused(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrRefused, fmt.Sprintf(format, args...))
}

// Releaser previews and carries out releases, and audits them.
type Releaser struct {
	audit     *Audit
	logger    *slog.Logger
	firstSeen atomic.Pointer[FirstSeenFunc]
	counts    [4]atomic.Uint64

	mu     sync.Mutex
	cfg    *config.Config
	client redis.UniversalClient
	topo   *redisread.Topology
	now    func() time.Time
}

// New returns a releaser that audits to auditFile. It writes nothing to
// Redis until Configure gives it a config with a release block.
func New(auditFile string, logger *slog.Logger) (*Releaser, error) {
	a, err := OpenAudit(auditFile)
	if err != nil {
		return nil, err
	}
	return &Releaser{audit: a, logger: logger, now: time.Now}, nil
}

// AuditFile is the audit file's name.
func (r *Releaser) AuditFile() string { return r.audit.Path() }

// SetFirstSeen supplies first-seen times from the sweeper's trackers;
// without it every member is "not tracked".
func (r *Releaser) SetFirstSeen(f FirstSeenFunc) { r.firstSeen.Store(&f) }

func (r *Releaser) readOptions() ReadOptions {
	var o ReadOptions
	if f := r.firstSeen.Load(); f != nil {
		o.FirstSeen = *f
	}
	return o
}

// WriteConfig is the redis section the release client uses: the sampling
// one with the release user's credentials, and always the primary.
func WriteConfig(cfg *config.Config) (config.Redis, error) {
	if cfg.Release == nil || cfg.Release.Username == "" {
		return config.Redis{}, errors.New("release: the config file has no release block; releases write as their own Redis user (release.username, release.password_file)")
	}
	if os.Getenv(config.PasswordEnv) != "" && cfg.Release.PasswordFile != "" {
		// The connection layer lets the variable win over any password
		// file: the release user would log in with the sampling password.
		return config.Redis{}, fmt.Errorf("release: %s is set and would override release.password_file; give the sampling password in redis.password_file instead", config.PasswordEnv)
	}
	rc := cfg.Redis
	rc.Username = cfg.Release.Username
	rc.PasswordFile = cfg.Release.PasswordFile
	rc.ReadFrom = config.ReadFromPrimary
	if rc.PasswordFile != "" {
		f, err := os.Open(rc.PasswordFile)
		if err != nil {
			return config.Redis{}, fmt.Errorf("release.password_file: %w", err)
		}
		_ = f.Close()
	}
	return rc, nil
}

// Configure takes a (re)loaded config. The write client is rebuilt when
// the redis or release section changed.
func (r *Releaser) Configure(cfg *config.Config) error {
	rc, err := WriteConfig(cfg)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.client != nil && r.cfg != nil && reflect.DeepEqual(r.cfg.Redis, cfg.Redis) && reflect.DeepEqual(r.cfg.Release, cfg.Release) {
		r.cfg = cfg
		return nil
	}
	c, err := redisconn.New(&rc)
	if err != nil {
		return fmt.Errorf("release client: %w", err)
	}
	if r.client != nil {
		_ = r.client.Close()
	}
	r.cfg, r.client, r.topo = cfg, c, redisread.NewTopology(c, false)
	return nil
}

// Close closes the write client.
func (r *Releaser) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.client != nil {
		_ = r.client.Close()
		r.client = nil
	}
}

// Counts are the releases by result since start, for
// slot_exporter_releases_total.
func (r *Releaser) Counts() map[string]uint64 {
	out := make(map[string]uint64, len(results))
	for i, name := range results {
		out[name] = r.counts[i].Load()
	}
	return out
}

func (r *Releaser) count(result string) {
	for i, name := range results {
		if name == result {
			r.counts[i].Add(1)
		}
	}
}

// current returns the config and the write side to use for one request.
func (r *Releaser) current() (*config.Config, *redisread.Topology, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cfg == nil || r.topo == nil {
		return nil, nil, errors.New("release is not configured")
	}
	return r.cfg, r.topo, nil
}

// Request names who asks to release what.
type Request struct {
	Source     string // web or cli
	Operator   string
	RemoteAddr string
	Family     string
	User       string
	// IncludeLive also releases members that look alive.
	IncludeLive bool
}

// Plan is a preview: what a release would do, and why.
type Plan struct {
	Request
	Kind config.Kind
	// Now is Redis TIME at the preview, ms; Created is the exporter's
	// clock.
	Now     int64
	Created time.Time
	// Holdings is the live read the plan was made from.
	Holdings *Holdings
	Keys     []PlanKey
	// Refusal, when set, says why nothing can be released.
	Refusal string
	// match is the family's match pattern at preview: a reload that
	// points the family elsewhere voids the plan.
	match string
}

// PlanKey is what a release would do to one key.
type PlanKey struct {
	Key string
	// Remove are the members (or the lock's token) to remove; Keep the
	// ones left alone, with their states.
	Remove []Member
	Keep   []Member
	// Value is a counter's value at preview, the one the compare-and-set
	// expects.
	Value string
	// NoLease: a lock without a TTL, which never expires on its own.
	NoLease bool
}

// Empty reports whether the plan would change nothing.
func (p *Plan) Empty() bool {
	for _, k := range p.Keys {
		if len(k.Remove) > 0 || p.isValueKind() {
			return false
		}
	}
	return true
}

func (p *Plan) isValueKind() bool {
	return p.Kind == config.KindCounter || p.Kind == config.KindRateLimit
}

// Dead reports whether a member's state is one a default release removes.
func Dead(s track.MemberState) bool { return s != track.StateLive }

// Preview reads the user's keys and says what a release would remove. It
// is audited (result previewed, or refused when nothing can be released
// or the request is not acceptable).
func (r *Releaser) Preview(ctx context.Context, req Request) (*Plan, error) {
	p := &Plan{Request: req, Created: r.now()}
	rec := &Record{Action: ActionPreview, Source: req.Source, Operator: req.Operator, RemoteAddr: req.RemoteAddr,
		Family: req.Family, User: req.User, IncludeLive: req.IncludeLive}
	err := r.preview(ctx, p)
	rec.Kind = string(p.Kind)
	for _, k := range p.Keys {
		rec.Keys = append(rec.Keys, k.Key)
		rec.Items = append(rec.Items, previewItems(p, &k)...)
	}
	switch {
	case err != nil:
		rec.Result, rec.Error = resultOf(err), err.Error()
	case p.Refusal != "":
		rec.Result, rec.Error = ResultRefused, p.Refusal
	default:
		rec.Result = ResultPreviewed
	}
	if aerr := r.record(rec); aerr != nil && err == nil {
		err = aerr
	}
	return p, err
}

func resultOf(err error) string {
	if errors.Is(err, ErrRefused) {
		return ResultRefused
	}
	return ResultFailed
}

func (r *Releaser) preview(ctx context.Context, p *Plan) error {
	if p.Operator == "" {
		return refused("no operator: releases are made by a named person")
	}
	cfg, topo, err := r.current()
	if err != nil {
		return err
	}
	f := family(cfg, p.Family)
	if f == nil {
		return refused("no family %q in the config", p.Family)
	}
	p.Kind, p.match = f.Kind, f.Match
	if ok, why := Releasable(f.Kind); !ok {
		p.Refusal = why
		return nil
	}
	h, err := Read(ctx, topo, f, p.User, r.readOptions())
	if err != nil {
		return err
	}
	p.Holdings, p.Now = h, h.Now
	var problems []string
	for _, k := range h.Keys {
		if k.Problem != "" {
			problems = append(problems, fmt.Sprintf("key %q %s", k.Key, k.Problem))
			continue
		}
		pk := PlanKey{Key: k.Key, Value: k.Value, NoLease: f.Kind == config.KindLock && k.PTTL == -1}
		for _, m := range k.Members {
			if Dead(m.State) || p.IncludeLive {
				pk.Remove = append(pk.Remove, m)
			} else {
				pk.Keep = append(pk.Keep, m)
			}
		}
		p.Keys = append(p.Keys, pk)
	}
	switch {
	case len(h.Keys) == 0:
		p.Refusal = "no key of this family belongs to this user"
	case len(p.Keys) == 0:
		p.Refusal = strings.Join(problems, "; ")
	case p.Empty():
		p.Refusal = "nothing to release: every member is live (a release removes only dead members unless live ones are included)"
	}
	return nil
}

func family(cfg *config.Config, name string) *config.Family {
	for i := range cfg.Families {
		if cfg.Families[i].Name == name {
			return &cfg.Families[i]
		}
	}
	return nil
}

// Confirm is the operator's go-ahead for a plan.
type Confirm struct {
	Operator   string
	RemoteAddr string
	Reason     string
	// NewValue is what a counter or rate counter is set to (default 0:
	// a counter's true value, the number of live holders, cannot be
	// known from Redis, so the operator names it).
	NewValue int64
	// DryRun previews only: nothing is written.
	DryRun bool
}

// Outcome is what a release did.
type Outcome struct {
	Plan   *Plan
	Items  []Item
	Result string
	// Removed, Kept and Gone count members, tokens or values.
	Removed, Kept, Gone int
}

// Execute carries out a plan. Every check that matters is made again in
// Redis, atomically per key: see the package comment. It is audited
// whatever happens; the error says why it was refused or failed.
func (r *Releaser) Execute(ctx context.Context, p *Plan, c Confirm) (*Outcome, error) {
	o := &Outcome{Plan: p}
	rec := &Record{Action: ActionRelease, Source: p.Source, Operator: c.Operator, RemoteAddr: c.RemoteAddr,
		Family: p.Family, Kind: string(p.Kind), User: p.User, IncludeLive: p.IncludeLive, Reason: c.Reason, DryRun: c.DryRun}
	for _, k := range p.Keys {
		rec.Keys = append(rec.Keys, k.Key)
	}
	err := r.execute(ctx, p, c, o)
	rec.Items = o.Items
	switch {
	case err != nil:
		rec.Result, rec.Error = resultOf(err), err.Error()
	case c.DryRun:
		rec.Result = ResultPreviewed
	default:
		rec.Result = ResultReleased
	}
	o.Result = rec.Result
	if aerr := r.record(rec); aerr != nil {
		o.Result = ResultFailed
		if err == nil {
			err = aerr
		}
	}
	return o, err
}

func (r *Releaser) execute(ctx context.Context, p *Plan, c Confirm, o *Outcome) error {
	switch {
	case c.Operator == "":
		return refused("no operator: releases are made by a named person")
	case c.Operator != p.Operator:
		return refused("the preview was made by %q, not %q", p.Operator, c.Operator)
	case c.Reason == "":
		return refused("a reason is required")
	case p.Refusal != "":
		return refused("%s", p.Refusal)
	}
	cfg, topo, err := r.current()
	if err != nil {
		return err
	}
	f := family(cfg, p.Family)
	if f == nil || f.Kind != p.Kind || f.Match != p.match {
		return refused("the config changed since the preview; preview again")
	}
	if c.DryRun {
		for _, k := range p.Keys {
			o.Items = append(o.Items, previewItemsWith(p, &k, c.NewValue)...)
		}
		return nil
	}
	// The audit file must take the record before anything is written:
	// a release that cannot be audited is not made.
	if _, err := OpenAudit(r.audit.Path()); err != nil {
		return err
	}
	rc := topo.Router()
	for _, k := range p.Keys {
		var err error
		switch p.Kind {
		case config.KindSlotSet:
			err = releaseMembers(ctx, rc, &k, o)
		case config.KindLock:
			err = releaseLock(ctx, rc, &k, o)
		case config.KindCounter, config.KindRateLimit:
			err = setValue(ctx, rc, &k, c.NewValue, o)
		}
		if err != nil {
			return fmt.Errorf("releasing %q: %w", k.Key, err)
		}
	}
	return nil
}

func releaseMembers(ctx context.Context, c redis.Cmdable, k *PlanKey, o *Outcome) error {
	for start := 0; start < len(k.Remove); start += pairsPerCall {
		batch := k.Remove[start:min(start+pairsPerCall, len(k.Remove))]
		args := make([]any, 0, 2*len(batch))
		for _, m := range batch {
			args = append(args, m.Member, FormatScore(m.Score))
		}
		res, err := membersScript.Run(ctx, c, []string{k.Key}, args...).Slice()
		if err != nil {
			return err
		}
		if len(res) != 2*len(batch) {
			return fmt.Errorf("the members script answered %d values for %d members", len(res), len(batch))
		}
		for i, m := range batch {
			code, _ := res[2*i].(int64)
			now, _ := res[2*i+1].(string)
			it := memberItem(k.Key, &m)
			switch code {
			case 1:
				it.Outcome = Removed
				o.Removed++
			case 0:
				it.Outcome, it.Now = KeptMoved, now
				o.Kept++
			default:
				it.Outcome = Gone
				o.Gone++
			}
			o.Items = append(o.Items, it)
		}
	}
	return nil
}

func releaseLock(ctx context.Context, c redis.Cmdable, k *PlanKey, o *Outcome) error {
	for _, m := range k.Remove {
		res, err := lockScript.Run(ctx, c, []string{k.Key}, m.Member).Slice()
		if err != nil {
			return err
		}
		it := memberItem(k.Key, &m)
		code, now := scriptPair(res)
		switch {
		case code == 1:
			it.Outcome = Removed
			o.Removed++
		case now == "":
			it.Outcome = Gone
			o.Gone++
		default:
			it.Outcome, it.Now = Changed, now
			o.Kept++
		}
		o.Items = append(o.Items, it)
	}
	return nil
}

func setValue(ctx context.Context, c redis.Cmdable, k *PlanKey, v int64, o *Outcome) error {
	nv := strconv.FormatInt(v, 10)
	res, err := valueScript.Run(ctx, c, []string{k.Key}, k.Value, nv).Slice()
	if err != nil {
		return err
	}
	it := Item{Key: k.Key, Value: k.Value, NewValue: nv}
	code, now := scriptPair(res)
	switch {
	case code == 1:
		it.Outcome = Set
		o.Removed++
	case now == "":
		it.Outcome = Gone
		o.Gone++
	default:
		it.Outcome, it.Now = Changed, now
		o.Kept++
	}
	o.Items = append(o.Items, it)
	return nil
}

func scriptPair(res []any) (int64, string) {
	var code int64
	var now string
	if len(res) > 0 {
		code, _ = res[0].(int64)
	}
	if len(res) > 1 {
		now, _ = res[1].(string)
	}
	return code, now
}

// previewItems are a preview's items; a counter's new value is not known
// until the operator confirms.
func previewItems(p *Plan, k *PlanKey) []Item {
	items := previewItemsWith(p, k, 0)
	if p.isValueKind() {
		items[0].NewValue = ""
	}
	return items
}

func previewItemsWith(p *Plan, k *PlanKey, newValue int64) []Item {
	if p.isValueKind() {
		return []Item{{Key: k.Key, Value: k.Value, NewValue: strconv.FormatInt(newValue, 10), Outcome: WouldSet}}
	}
	var out []Item
	for _, m := range k.Remove {
		it := memberItem(k.Key, &m)
		it.Outcome = WouldRemove
		out = append(out, it)
	}
	return out
}

func memberItem(key string, m *Member) Item {
	return Item{Key: key, Member: m.Member, State: m.State.String(), Score: FormatScore(m.Score), Expiry: FormatTime(m.Expiry)}
}

// FormatScore writes a score as the scripts compare it: the shortest
// decimal that reads back as the same float, and inf for infinities as
// Redis writes them.
func FormatScore(s float64) string {
	switch {
	case math.IsInf(s, 1):
		return "inf"
	case math.IsInf(s, -1):
		return "-inf"
	}
	if math.Abs(s) < 1e21 {
		return strconv.FormatFloat(s, 'f', -1, 64)
	}
	return strconv.FormatFloat(s, 'g', -1, 64)
}

// FormatTime writes a Redis time in ms as UTC RFC 3339 with milliseconds;
// "never" for +Inf, and the raw number beyond what a date can say.
func FormatTime(ms float64) string {
	switch {
	case math.IsInf(ms, 1):
		return "never"
	case math.IsNaN(ms):
		return ""
	case math.IsInf(ms, -1):
		return "-inf"
	case ms > 253402300799999:
		return FormatScore(ms) + " ms (beyond year 9999)"
	case ms < -62135596800000:
		return FormatScore(ms) + " ms (before year 1)"
	}
	return time.UnixMilli(int64(ms)).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// Refuse audits and counts a request turned away before a preview or a
// release could start (a missing or bad CSRF token, a preview that
// expired).
func (r *Releaser) Refuse(action string, req Request, why string) error {
	return r.record(&Record{Action: action, Source: req.Source, Operator: req.Operator, RemoteAddr: req.RemoteAddr,
		Family: req.Family, User: req.User, Result: ResultRefused, Error: why})
}

// record appends, logs and counts one record.
func (r *Releaser) record(rec *Record) error {
	rec.Time = r.now().UTC()
	if rec.Keys == nil {
		rec.Keys = []string{}
	}
	if rec.Items == nil {
		rec.Items = []Item{}
	}
	err := r.audit.Append(rec)
	result := rec.Result
	if err != nil {
		result = ResultFailed
	}
	r.count(result)
	level := slog.LevelInfo
	if result == ResultRefused || result == ResultFailed {
		level = slog.LevelWarn
	}
	attrs := []any{"action", rec.Action, "result", rec.Result, "operator", rec.Operator, "source", rec.Source,
		"family", rec.Family, "user", rec.User, "keys", rec.Keys, "items", len(rec.Items)}
	if rec.RemoteAddr != "" {
		attrs = append(attrs, "remote_addr", rec.RemoteAddr)
	}
	if rec.Reason != "" {
		attrs = append(attrs, "reason", rec.Reason)
	}
	if rec.Error != "" {
		attrs = append(attrs, "err", rec.Error)
	}
	if err != nil {
		r.logger.Error("audit file write failed; the record follows in this log only", append(attrs, "audit_err", err)...)
		return err
	}
	r.logger.Log(context.Background(), level, "release audit", attrs...)
	return nil
}
