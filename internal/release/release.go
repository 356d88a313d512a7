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
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/topology"
)

// Results, the label values of slot_exporter_releases_total{result}.
const (
	ResultPreviewed = "previewed"
	ResultReleased  = "released"
	ResultRefused   = "refused"
	ResultFailed    = "failed"
)

// ResultStarted is the result of a release's intent record, written and
// synced before any script runs; the outcome record follows it. It is not
// counted in slot_exporter_releases_total.
const ResultStarted = "started"

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
	// Unanswered: sent, but Redis's answer never came (a timeout, a
	// dropped connection): the script may have run.
	Unanswered = "unanswered"
)

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
	topo   *topology.Topology
	now    func() time.Time
	// beforeOutcome, for tests, runs just before a release's outcome
	// record is written.
	beforeOutcome func()
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
