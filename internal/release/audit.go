package release

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"
)

// Record is one line of the audit file: one preview or one release
// attempt, whatever its result.
type Record struct {
	Time   time.Time `json:"time"`
	Action string    `json:"action"` // preview or release
	// Source is web or cli.
	Source     string   `json:"source"`
	Operator   string   `json:"operator"`
	RemoteAddr string   `json:"remote_addr,omitempty"`
	Family     string   `json:"family"`
	Kind       string   `json:"kind,omitempty"`
	User       string   `json:"user"`
	Keys       []string `json:"keys"`
	// IncludeLive: the operator asked to release live members too.
	IncludeLive bool   `json:"include_live,omitempty"`
	DryRun      bool   `json:"dry_run,omitempty"`
	Reason      string `json:"reason,omitempty"`
	// Items are the members, tokens or values concerned, with what
	// became of each.
	Items  []Item `json:"items"`
	Result string `json:"result"`
	Error  string `json:"error,omitempty"`
}

// Item is one member (slot sets), token (locks) or value (counters) in an
// audit record.
type Item struct {
	Key string `json:"key"`
	// Member is a slot-set member or a lock's token.
	Member string `json:"member,omitempty"`
	State  string `json:"state,omitempty"`
	// Score is the score as previewed; Now is the score (or value) found
	// at release time when it differed.
	Score  string `json:"score,omitempty"`
	Expiry string `json:"expiry,omitempty"`
	// Value and NewValue: a counter's compare-and-set.
	Value    string `json:"value,omitempty"`
	NewValue string `json:"new_value,omitempty"`
	Now      string `json:"now,omitempty"`
	// Outcome: would_remove, would_set (preview); removed, kept_moved,
	// gone, set, changed (release).
	Outcome string `json:"outcome"`
}

// Audit appends records to a file, one JSON object a line, each synced to
// disk before Append returns: an answer is never sent for an action that
// is not on disk.
type Audit struct {
	path string
	mu   sync.Mutex
}

// OpenAudit checks that path can be appended to (creating it, mode 0600)
// and returns the audit log on it. The file is opened for each record, so
// that it can be rotated by renaming.
func OpenAudit(path string) (*Audit, error) {
	if path == "" {
		return nil, fmt.Errorf("no audit file given")
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit file: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("audit file: %w", err)
	}
	return &Audit{path: path}, nil
}

// Path is the audit file's name.
func (a *Audit) Path() string { return a.path }

// Append writes one record and syncs it.
func (a *Audit) Append(r *Record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("audit record: %w", err)
	}
	b = append(b, '\n')
	a.mu.Lock()
	defer a.mu.Unlock()
	f, err := os.OpenFile(a.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("audit file: %w", err)
	}
	_, werr := f.Write(b)
	serr := f.Sync()
	cerr := f.Close()
	for _, err := range []error{werr, serr, cerr} {
		if err != nil {
			return fmt.Errorf("audit file: %w", err)
		}
	}
	return nil
}
