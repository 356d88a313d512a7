package exportertest

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
)

// Record is one log record a Logs kept, with the logger's attributes and
// the record's own flattened into Attrs.
type Record struct {
	Level slog.Level
	Msg   string
	Attrs map[string]string
}

// Logs is a slog handler that keeps every record, so that a test can check
// what was reported, in which words, and how often.
type Logs struct {
	mu    *sync.Mutex
	recs  *[]Record
	text  *bytes.Buffer
	attrs []slog.Attr
}

// NewLogs returns an empty Logs.
func NewLogs() *Logs {
	return &Logs{mu: &sync.Mutex{}, recs: &[]Record{}, text: &bytes.Buffer{}}
}

// Logger is a logger writing to l.
func (l *Logs) Logger() *slog.Logger { return slog.New(l) }

// Enabled implements slog.Handler: every level is kept.
func (l *Logs) Enabled(context.Context, slog.Level) bool { return true }

// Handle implements slog.Handler.
func (l *Logs) Handle(ctx context.Context, r slog.Record) error {
	rec := Record{Level: r.Level, Msg: r.Message, Attrs: map[string]string{}}
	for _, a := range l.attrs {
		rec.Attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool {
		rec.Attrs[a.Key] = a.Value.String()
		return true
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	*l.recs = append(*l.recs, rec)
	// The text form is what an operator reads, for String and Lines.
	return slog.NewTextHandler(l.text, nil).WithAttrs(l.attrs).Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (l *Logs) WithAttrs(as []slog.Attr) slog.Handler {
	c := *l
	c.attrs = append(append([]slog.Attr(nil), l.attrs...), as...)
	return &c
}

// WithGroup implements slog.Handler; groups are not kept apart.
func (l *Logs) WithGroup(string) slog.Handler { return l }

// Take returns the records so far and forgets them.
func (l *Logs) Take() []Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := *l.recs
	*l.recs = nil
	return out
}

// String is every line logged so far, in slog's text format.
func (l *Logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.text.String()
}

// Lines returns the text lines that contain every one of parts.
func (l *Logs) Lines(parts ...string) []string {
	var out []string
	for _, line := range strings.Split(l.String(), "\n") {
		ok := line != ""
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok {
			out = append(out, line)
		}
	}
	return out
}

// Buffer collects what a program under test writes (its log) from any
// number of goroutines.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write implements io.Writer.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String is everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
