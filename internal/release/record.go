package release

import (
	"context"
	"errors"
	"log/slog"
)

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

func resultOf(err error) string {
	if errors.Is(err, ErrRefused) {
		return ResultRefused
	}
	return ResultFailed
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
	if rec.Result != ResultStarted {
		// An intent record is not an attempt's result: its outcome
		// record, or the failure to write it, counts.
		r.count(result)
	}
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
