package release

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/redis/go-redis/v9"

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
	// Removed, Kept and Gone count members, tokens or values;
	// Unanswered, those sent without an answer, which may have been
	// carried out.
	Removed, Kept, Gone, Unanswered int
	// Audited: the outcome record is in the audit file.
	Audited bool
}

// ErrUnaudited wraps the failure to write a release's outcome record
// after its scripts ran: what they did is in the Outcome (and on the
// page, and on the CLI's output); the intent record written before them
// and the exporter's log say what was attempted.
var ErrUnaudited = errors.New("the outcome could not be written to the audit file")

// Execute carries out a plan. Every check that matters is made again in
// Redis, atomically per key: see the package comment. It is audited
// whatever happens; the error says why it was refused or failed.
//
// Two records: before any script runs, an intent record (result
// "started", the items as planned), synced to disk; a release whose
// intent record cannot be written is not made. Then the outcome record.
// When only the outcome record cannot be written, the release stands
// (its scripts ran): Outcome.Result says what they did, and the error
// wraps ErrUnaudited.
func (r *Releaser) Execute(ctx context.Context, p *Plan, c Confirm) (*Outcome, error) {
	o := &Outcome{Plan: p}
	rec := &Record{Action: ActionRelease, Source: p.Source, Operator: c.Operator, RemoteAddr: c.RemoteAddr,
		Family: p.Family, Kind: string(p.Kind), User: p.User, IncludeLive: p.IncludeLive, Reason: c.Reason, DryRun: c.DryRun}
	for _, k := range p.Keys {
		rec.Keys = append(rec.Keys, k.Key)
	}
	rc, err := r.check(p, c)
	if err == nil && c.DryRun {
		for _, k := range p.Keys {
			o.Items = append(o.Items, previewItemsWith(p, &k, c.NewValue)...)
		}
	}
	ran := false
	if err == nil && !c.DryRun {
		intent := *rec
		intent.Result = ResultStarted
		for _, k := range p.Keys {
			intent.Items = append(intent.Items, previewItemsWith(p, &k, c.NewValue)...)
		}
		if aerr := r.record(&intent); aerr != nil {
			err = fmt.Errorf("not made, nothing was written to Redis: the audit file cannot take its intent record: %w", aerr)
		} else {
			ran = true
			err = aclHint(r.execute(ctx, rc, p, c, o), r.username())
		}
	}
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
	if r.beforeOutcome != nil {
		r.beforeOutcome()
	}
	aerr := r.record(rec)
	o.Audited = aerr == nil
	if aerr != nil {
		if !ran {
			// Nothing was done: the failure to audit is the answer.
			o.Result = ResultFailed
			if err == nil {
				err = aerr
			}
			return o, err
		}
		return o, errors.Join(err, fmt.Errorf("%w (%v): the intent record before it and the log say what was attempted", ErrUnaudited, aerr))
	}
	return o, err
}

// check is what must hold before anything is written; it returns the
// client to release through.
func (r *Releaser) check(p *Plan, c Confirm) (redis.Cmdable, error) {
	switch {
	case c.Operator == "":
		return nil, refused("no operator: releases are made by a named person")
	case c.Operator != p.Operator:
		return nil, refused("the preview was made by %q, not %q", p.Operator, c.Operator)
	case c.Reason == "":
		return nil, refused("a reason is required")
	case p.Refusal != "":
		return nil, refused("%s", p.Refusal)
	case (p.Kind == config.KindCounter || p.Kind == config.KindRateLimit) && c.NewValue < 0:
		// A limiter that counts holders or calls lets in as many more
		// as the value is below 0.
		return nil, refused("the new value %d is below 0", c.NewValue)
	}
	cfg, topo, err := r.current()
	if err != nil {
		return nil, err
	}
	f := family(cfg, p.Family)
	if f == nil || f.Kind != p.Kind || f.Match != p.match {
		return nil, refused("the config changed since the preview; preview again")
	}
	return topo.Router(), nil
}

func (r *Releaser) execute(ctx context.Context, rc redis.Cmdable, p *Plan, c Confirm, o *Outcome) error {
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
			err = fmt.Errorf("releasing %q: %w", k.Key, err)
			if o.Unanswered > 0 {
				err = fmt.Errorf("%w; Redis did not answer for %d item(s), which may have been released: preview again to see", err, o.Unanswered)
			}
			return err
		}
	}
	return nil
}

// unanswered records items sent in a script call that failed with err.
// When the failure is not Redis's own answer (an error reply) nor a
// connection never made, the script may have run: a release whose answer
// was lost to a timeout said "failed, 0 removed" while Redis removed
// both members. Those items are recorded as Unanswered; err is returned.
func (o *Outcome) unanswered(err error, items ...Item) error {
	var reply redis.Error
	var op *net.OpError
	if errors.As(err, &reply) || errors.Is(err, redis.ErrPoolTimeout) || (errors.As(err, &op) && op.Op == "dial") {
		return err
	}
	for _, it := range items {
		it.Outcome = Unanswered
		o.Items = append(o.Items, it)
		o.Unanswered++
	}
	return err
}
