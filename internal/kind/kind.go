// Package kind holds one file per kind of key the exporter watches: what
// it reads per key, how it classifies what it read, what it tracks across
// sweeps and which catalog metrics it feeds. The sweeper, the reader and
// the collector know kinds only through this package's registry, the way
// node_exporter's collectors register themselves: adding a kind is adding
// a file here (and its rows to the catalog).
package kind

import (
	"errors"
	"fmt"
	"log/slog"
	"sort"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/redisread"
	"github.com/slotexporter/slot_exporter/internal/snapshot"
	"github.com/slotexporter/slot_exporter/internal/track"
)

// Sweep is what a kind sees of one sweep of its family.
type Sweep struct {
	// Now is Redis TIME at the start of the sweep, in ms.
	Now int64
	// ReadBy is the Redis time (ms, Now plus the exporter's clock since)
	// by which every key of the sweep had been read: what vanished is
	// judged at it.
	ReadBy int64
	// Floor takes each user's used value (and anomaly bits).
	Floor *track.FloorTracker
	// Carry holds the keys that could not be read in this sweep: what
	// they held is kept, not ended.
	Carry track.Carry
	// Hold is set when the family replays unwritten keys (Replayer), and
	// before Begin, which may read more of each key for it (its expiry):
	// the kind keeps what it needs of each key it applies. Without it a
	// Replayer holds nothing it would not track anyway.
	Hold bool
	// Skipped counts, by reason, what a kind skipped inside a key it
	// read (a framework's job hash that is not a hash); nil: not counted.
	Skipped *[redisread.NumSkipReasons]uint64
	// Log is the family's logger, for data a kind skips; nil: no lines.
	Log *slog.Logger
	// Unwatched is set on the sweep that ends holds first after a reload
	// changed the family's match: a hold whose key no longer matches left
	// the watch, and goes uncounted. Ended as releases, every hold of a
	// pattern reloaded away counted as released.
	Unwatched bool
}

// Key is one read key with its identity.
type Key struct {
	Read     *redisread.KeyRead
	Hash     uint64 // of the key name
	User     string
	UserHash uint64
}

// Tracker is one family's kind-specific state across sweeps. Only the
// family's own sweep goroutine calls it.
type Tracker interface {
	// Begin starts a sweep at sw.Now and returns what to read per key.
	Begin(sw *Sweep) redisread.Reads
	// Apply folds one key that was read (Status OK) into the sweep.
	Apply(sw *Sweep, k Key)
	// End finishes a sweep that read every key. lost is set when the
	// data vanished (restart, flush, failover to an empty replica):
	// whatever is gone ended as lost. deferEnds is set when the sweep
	// could not account for every key (a reshard it could not follow) or
	// could not tell what vanished (a FLUSHDB landed while it read):
	// nothing ends in it.
	End(sw *Sweep, lost, deferEnds bool) Ended
	// Publish writes what the last complete sweep found, and the
	// counters since the exporter started, into f.
	Publish(f *snapshot.Family)
	// UserExtra returns the kind's own per-user values for a user the
	// series cap picked.
	UserExtra(v track.UserView) []snapshot.Value
	// Limits says how the family's limit applies to users.
	Limits() track.Limits
	// Reconfigure takes a reloaded family's settings, keeping what is
	// tracked.
	Reconfigure(f *config.Family, s *config.Sampling)
}

// FirstSeer is a Tracker that remembers members: the on-call page shows
// when each was first seen.
type FirstSeer interface {
	// FirstSeen returns when a member of key was first seen (Redis time,
	// ms), if it is tracked; memberHash is track.MemberHash of key and
	// the member, which a reader can take of a member it never holds
	// whole.
	FirstSeen(key string, memberHash uint64) (int64, bool)
}

// Replayer is a Tracker that can fold a key it did not read in a sweep,
// from what it held of the key's last read, exactly as a full read at the
// sweep's Redis time would find it: the sweep calls Replay only for keys
// that nothing has written since they were read (internal/changefeed's
// Feed), and what changes with time alone (a member's state, a
// lease's or a key's remaining time, a queue head's wait) is computed at
// sw.Now. A key whose expiry has passed is gone, as Redis would have it.
//
// A kind whose keys change in ways that client tracking does not report
// (a stream's consumer groups) does not implement it: its keys are read
// every sweep.
type Replayer interface {
	Tracker
	// Held reports whether the kind holds what it needs to replay key h;
	// a key it cannot (an oversized set) is read every sweep.
	Held(h uint64) bool
	// Forget drops what is held of key h (gone, skipped, unusable).
	Forget(h uint64)
	// Replay folds every held key that was not applied in this sweep
	// and is not carried, and returns how many it folded.
	Replay(sw *Sweep) int
}

// Survivals is a kind whose holds are each named afresh (a slot's member,
// a lock's token), so that a hold read in two sweeps lived through what
// happened in between: a FLUSHDB of its database would have ended it.
type Survivals interface {
	// Survived is how many holds this sweep read that an earlier sweep
	// read too.
	Survived() int
	// Known reports whether k, read but not applied, holds a hold that
	// an earlier sweep read, or, with thisSweep, this one too.
	Known(k Key, thisSweep bool) bool
	// Unproven: a FLUSHDB or SWAPDB landed while this sweep read, so a
	// hold it read first may have been written after the flush. Read
	// again, such holds do not count in Survived until a sweep ends
	// holds.
	Unproven()
}

// remaining is a held expiry (Redis ms, -1: none) as a PTTL at now, and
// whether the key still exists then.
func remaining(expiry, now int64) (int64, bool) {
	if expiry < 0 {
		return -1, true
	}
	return expiry - now, expiry > now
}

// pttlUnknown is a PTTL the ACL did not let the exporter read (a kind
// that reads it only to replay its keys: counter, list). Such a key is
// not held, and so read every sweep.
const pttlUnknown = -3

// heldPTTL is the answer to a PTTL read only to hold a key (counter,
// list): one the ACL refuses is pttlUnknown rather than an error, so the
// key is read every sweep instead of failing the sweep of an ACL written
// for the kind's own commands.
func heldPTTL(cmd *redis.DurationCmd) (int64, error) {
	d, err := cmd.Result()
	switch {
	case err == nil:
		return redisread.PTTLMillis(d), nil
	case refused(err):
		return pttlUnknown, nil
	}
	return 0, err
}

// refused reports whether err is the ACL refusing a command outright
// (not one key).
func refused(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && redisread.CommandRefused(re.Error())
}

// expiryOf is a read's PTTL as a Redis time (ms), -1 without expiry.
func expiryOf(pttl, now int64) int64 {
	if pttl < 0 {
		return -1
	}
	return now + pttl
}

// Ended is what a sweep's End ended, for the lost warning.
type Ended struct {
	Lost int64
}

// Factory makes a family's tracker from its config.
type Factory func(f *config.Family, s *config.Sampling) Tracker

var factories = map[config.Kind]Factory{}

// register adds a kind; each kind's file calls it from init.
func register(k config.Kind, f Factory) {
	if _, dup := factories[k]; dup {
		panic(fmt.Sprintf("kind %s registered twice", k))
	}
	factories[k] = f
}

// New returns a tracker for a family.
func New(f *config.Family, s *config.Sampling) (Tracker, error) {
	make, ok := factories[f.Kind]
	if !ok {
		return nil, fmt.Errorf("families %s: kind %q is not implemented", f.Name, f.Kind)
	}
	return make(f, s), nil
}

// Registered lists the kinds with a tracker, sorted.
func Registered() []config.Kind {
	out := make([]config.Kind, 0, len(factories))
	for k := range factories {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// NotifyClasses are the notify-keyspace-events flags for the writes that
// create a kind's keys.
func NotifyClasses(k config.Kind) string {
	switch k {
	case config.KindSlotSet:
		return "z"
	case config.KindList:
		return "l"
	case config.KindStream:
		return "t"
	case config.KindSidekiq, config.KindRQ, config.KindCelery:
		// The set that names their queues.
		return "s"
	}
	return "$"
}

func ms(d interface{ Milliseconds() int64 }) float64 { return float64(d.Milliseconds()) }

func gauge(m *snapshot.Metric, v float64, labels ...string) snapshot.Value {
	return snapshot.Value{Metric: m, V: v, Labels: labels}
}

// The kinds that replay; stream does not (see Replayer).
var (
	_ Replayer = (*slotSet)(nil)
	_ Replayer = (*counter)(nil)
	_ Replayer = (*rateLimit)(nil)
	_ Replayer = (*lock)(nil)
	_ Replayer = (*list)(nil)
)
