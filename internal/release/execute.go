package release

import (
	"context"
	"fmt"

	"github.com/slotexporter/slot_exporter/config"
)

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
