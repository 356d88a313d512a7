package release

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/track"
)

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
		return aclHint(err, r.username())
	}
	p.Holdings, p.Now = h, h.Now
	var problems []string
	cut := 0
	for _, k := range h.Keys {
		if k.Problem != "" {
			problems = append(problems, fmt.Sprintf("key %q %s", k.Key, k.Problem))
			continue
		}
		pk := PlanKey{Key: k.Key, Value: k.Value, NoLease: f.Kind == config.KindLock && k.PTTL == -1}
		for _, m := range k.Members {
			switch {
			case m.Cut:
				// Only its first bytes were read: the script could
				// not name it. Kept, it is in no audit item either.
				pk.Keep = append(pk.Keep, m)
				if Dead(m.State) || p.IncludeLive {
					cut++
				}
			case Dead(m.State) || p.IncludeLive:
				pk.Remove = append(pk.Remove, m)
			default:
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
	case p.Empty() && cut > 0:
		p.Refusal = fmt.Sprintf("nothing to release: %d %s longer than %d bytes, %s", cut, plural(cut, "member is", "members are"), MaxMemberBytes, CutRefusal)
	case p.Empty():
		p.Refusal = "nothing to release: every member is live (a release removes only dead members unless live ones are included)"
	}
	return nil
}

// CutRefusal says why a member longer than MaxMemberBytes is kept.
const CutRefusal = "which a release does not remove: only the first bytes of such a member are read, and a release would have to send it whole (remove a dead one by hand with ZREM)"

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func family(cfg *config.Config, name string) *config.Family {
	for i := range cfg.Families {
		if cfg.Families[i].Name == name {
			return &cfg.Families[i]
		}
	}
	return nil
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
