package release

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"
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
	// gone, set, changed, unanswered (release).
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
	f, err := openAuditFile(path)
	if err != nil {
		return nil, fmt.Errorf("audit file: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("audit file: %w", err)
	}
	return &Audit{path: path}, nil
}

// openAuditFile opens path for appending, creating it, and refuses what
// would not keep a record. O_NONBLOCK: a named pipe put in the file's
// place blocked the open, and every release queued behind Append's lock,
// until something read the pipe; opened without blocking it is refused
// at once. O_RDWR: appendLine reads the file's last byte.
func openAuditFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE|syscall.O_NONBLOCK, 0o600)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	// A device is written as a file is (/dev/full stands for a full
	// disk in the tests); a pipe or a socket keeps nothing.
	if m := fi.Mode(); !m.IsRegular() && m&os.ModeDevice == 0 {
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file (mode %s): a record written to it is not kept", path, m.Type())
	}
	return f, nil
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
	f, err := openAuditFile(a.path)
	if err != nil {
		return fmt.Errorf("audit file: %w", err)
	}
	err = appendLine(f, b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("audit file: %w", err)
	}
	return nil
}

// appendLine appends b, one record and its newline, so that every line of
// a regular file stays one whole record whatever fails. A write or sync
// that fails is rolled back to the file's size before it: a record cut
// off by a file size limit was left as it was, the next record was
// appended onto its end, and a line reader lost both. A file whose last
// line is cut off all the same (a crash in the write, a roll-back that
// failed) gets a newline before the record. The file lock keeps the
// web's and a release command's records from interleaving, and a
// roll-back from cutting the other's record.
func appendLine(f *os.File, b []byte) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		if _, err := f.Write(b); err != nil {
			return err
		}
		return f.Sync()
	}
	unlock, err := lockFile(f)
	if err != nil {
		return err
	}
	defer unlock()
	if fi, err = f.Stat(); err != nil {
		return err
	}
	size := fi.Size()
	if size > 0 {
		last := []byte{0}
		if _, err := f.ReadAt(last, size-1); err != nil {
			return err
		}
		if last[0] != '\n' {
			b = append([]byte{'\n'}, b...)
		}
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		if terr := f.Truncate(size); terr != nil {
			return errors.Join(err, fmt.Errorf("the cut-off record stays: %w", terr))
		}
	}
	return err
}

// Ids in the audit (users, keys, members, tokens, values) are bytes, and
// json.Marshal would write every byte that is not UTF-8 as U+FFFD: two
// different ids would read the same, and the key a release changed could
// not be named afterwards. An id that is not valid UTF-8 is written
// escaped instead (each invalid byte as \xNN, a backslash doubled, so
// that distinct ids stay distinct and readable), with its exact bytes in
// base64 beside it: "user_b64", "keys_b64" (one entry per key, "" for a
// key that is valid UTF-8), "key_b64", "member_b64", "value_b64",
// "new_value_b64", "now_b64".

// faithful returns s as written in the audit, and its base64 when s is
// not valid UTF-8 ("" otherwise).
func faithful(s string) (string, string) {
	if utf8.ValidString(s) {
		return s, ""
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\\':
			b.WriteString(`\\`)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String(), base64.StdEncoding.EncodeToString([]byte(s))
}

// MarshalJSON writes the record with its ids faithful (see faithful).
func (r Record) MarshalJSON() ([]byte, error) {
	type plain Record
	out := struct {
		plain
		UserB64 string   `json:"user_b64,omitempty"`
		KeysB64 []string `json:"keys_b64,omitempty"`
	}{plain: plain(r)}
	out.User, out.UserB64 = faithful(r.User)
	out.Keys = make([]string, len(r.Keys))
	for i, k := range r.Keys {
		var b string
		out.Keys[i], b = faithful(k)
		if b != "" && out.KeysB64 == nil {
			out.KeysB64 = make([]string, len(r.Keys))
		}
		if b != "" {
			out.KeysB64[i] = b
		}
	}
	return json.Marshal(out)
}

// MarshalJSON writes the item with its ids faithful (see faithful).
func (it Item) MarshalJSON() ([]byte, error) {
	type plain Item
	out := struct {
		plain
		KeyB64      string `json:"key_b64,omitempty"`
		MemberB64   string `json:"member_b64,omitempty"`
		ValueB64    string `json:"value_b64,omitempty"`
		NewValueB64 string `json:"new_value_b64,omitempty"`
		NowB64      string `json:"now_b64,omitempty"`
	}{plain: plain(it)}
	out.Key, out.KeyB64 = faithful(it.Key)
	out.Member, out.MemberB64 = faithful(it.Member)
	out.Value, out.ValueB64 = faithful(it.Value)
	out.NewValue, out.NewValueB64 = faithful(it.NewValue)
	out.Now, out.NowB64 = faithful(it.Now)
	return json.Marshal(out)
}
