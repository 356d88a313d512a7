package sweep

import (
	"fmt"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/slotexporter/slot_exporter/internal/kind"
	"github.com/slotexporter/slot_exporter/internal/redisread"
)

// Folding one key's read into a sweep: what every kind shares (duplicates,
// counts, skips, the user, the books of what can be replayed), then the
// kind's own Apply.

// apply folds one key's read into the sweep: the parts every kind shares
// (duplicates across nodes, counts, skips, the user), then the kind's.
func (f *family) apply(run *sweepRun, kr *redisread.KeyRead) {
	st := f.state
	kh := xxhash.Sum64String(kr.Key)
	if kr.Status == redisread.Missed {
		// Not read here: it counts as scanned where it is read.
		if !run.rereading {
			run.moved = append(run.moved, kr.Key)
			return
		}
		run.missed++
		run.Carry[uint32(kh)] = struct{}{}
		if run.replayer != nil {
			// The feed has named it already (a replica mid-migration
			// reads it as gone on the node it left, and is redirected
			// on the other): read it every sweep until it is read.
			st.readEverySweep(kr.Key)
		}
		if user, ok := f.cfg.UserOf(kr.Key); ok {
			st.floor.Keep(f.userID(kr.Key, kh, user), user)
		}
		return
	}
	if run.seenKeys != nil {
		// A key that changed nodes mid-sweep can be read on both. One
		// probe of the set: a key read is added as it is looked up.
		var dup bool
		if kr.Status == redisread.Gone {
			dup = run.seenKeys.Has(kh)
		} else {
			dup = !run.seenKeys.Add(kh)
		}
		if dup {
			// Nor is it tracked twice: the node it left may read it
			// as gone (a replica, which knows nothing of a migration),
			// which must not make the kind forget it.
			f.keepShared(run, kr)
			return
		}
	}
	if run.readFirst != nil {
		// Read every key after probes that found no hold survived a
		// flush: what was read before is not applied twice.
		if run.changed != nil {
			run.readFirst.Add(kh)
		} else if run.readFirst.Has(kh) {
			f.keepShared(run, kr)
			return
		}
	}
	if run.replayer != nil {
		defer f.track(run, kr)
	}
	st.keysScanned++
	switch kr.Status {
	case redisread.Gone:
		st.keepProbe(kr.Key, kh, false)
		return
	case redisread.Skipped:
		st.keepProbe(kr.Key, kh, false)
		f.skip(kr.Skip, kr.Key)
		return
	}
	user, ok := f.cfg.UserOf(kr.Key)
	if !ok {
		st.keepProbe(kr.Key, kh, false)
		f.skip(redisread.SkipBadUser, kr.Key)
		return
	}
	if kr.Oversized {
		f.skip(redisread.SkipOversized, kr.Key)
	}
	run.sets++
	st.tracker.Apply(&run.Sweep, kind.Key{Read: kr, Hash: kh, User: user, UserHash: f.userID(kr.Key, kh, user)})
	st.keepProbe(kr.Key, kh, !kr.Oversized) // an oversized set's members are not tracked one by one
}

// keepShared hands the kind what a read it drops carries of keys shared
// by the family's keys (celery's unacked messages): read once a sweep
// with one key's read, it is in no other.
func (f *family) keepShared(run *sweepRun, kr *redisread.KeyRead) {
	if k, ok := f.state.tracker.(kind.SharedKeeper); ok && kr.Status == redisread.OK {
		k.KeepShared(&run.Sweep, kr)
	}
}

// skip counts a key skipped for reason, and names one in the log the
// first time a reason comes up in skipLogEvery: the counter says that keys
// were skipped, and whoever is on call needs one to look at. Info, not a
// warning: it is the application's data, which the exporter handles.
func (f *family) skip(reason redisread.SkipReason, key string) {
	st := f.state
	st.skipped[reason]++
	if now := time.Now(); now.Sub(st.skipLogged[reason]) >= skipLogEvery {
		st.skipLogged[reason] = now
		if len(key) > maxLoggedKey {
			// Whoever writes a key chooses its name: 5 MB made a log
			// line of 5 MB.
			key = fmt.Sprintf("%s... (%d bytes)", key[:maxLoggedKey], len(key))
		}
		f.log().Info("key skipped (counted in slot_exporter_keys_skipped_total; one key a reason is named every 10m)",
			"reason", reason.String(), "key", key, "skipped_total", st.skipped[reason])
	}
}

const (
	skipLogEvery = 10 * time.Minute
	maxLoggedKey = 256
)

// userID is the hash the family's trackers know a user by: the hash of
// its canonical key (config.Family.UserKey), so that for a key read
// under that name, nearly every key, the key's hash is its user's too,
// and a kind that holds keys between sweeps need not keep both (8 MB at
// a million slot sets, kind/slotset.go); where the user regexp has no
// canonical key, the hash of the user's name.
func (f *family) userID(key string, kh uint64, user string) uint64 {
	prefix, suffix, ok := f.cfg.UserKey()
	if !ok {
		return xxhash.Sum64String(user)
	}
	if len(key) == len(prefix)+len(user)+len(suffix) && strings.HasPrefix(key, prefix) &&
		strings.HasSuffix(key, suffix) && key[len(prefix):len(key)-len(suffix)] == user {
		return kh
	}
	return xxhash.Sum64String(prefix + user + suffix)
}

// track keeps the family's books on which keys the kind can replay: a
// key it holds is not read again until it changes; one it cannot hold
// (an oversized set, a skipped key) is read every sweep; one gone is
// forgotten.
func (f *family) track(run *sweepRun, kr *redisread.KeyRead) {
	st := f.state
	kh := xxhash.Sum64String(kr.Key)
	switch kr.Status {
	case redisread.Missed:
		return
	case redisread.Gone:
		run.replayer.Forget(kh)
		delete(st.volatile, kr.Key)
		return
	}
	if kr.Status == redisread.OK && run.replayer.Held(kh) {
		delete(st.volatile, kr.Key)
		return
	}
	run.replayer.Forget(kh)
	st.readEverySweep(kr.Key)
}
