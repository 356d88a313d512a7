package sweep

import (
	"context"

	"github.com/cespare/xxhash/v2"

	"github.com/slotexporter/slot_exporter/internal/redisread"
	"github.com/slotexporter/slot_exporter/internal/topology"
)

// slotView returns the view of slot ownership a sweep starts from; nil
// for a single server, or when it cannot be read (then settle cannot bound
// what moved).
func (f *family) slotView(ctx context.Context) *topology.SlotView {
	v, err := f.s.topo.View(ctx)
	if err != nil {
		if f.s.viewWarned.CompareAndSwap(false, true) {
			f.log().Warn("cannot read CLUSTER NODES from the masters; a sweep overlapping a reshard may miss moved keys", "err", err)
		}
		return nil
	}
	return v
}

// settle runs once a sweep has read every node. In a cluster it finds the
// slots that were migrating or changed shards while the nodes were read,
// lists their keys where they are now, and reads again, through the
// cluster client, those not read yet together with the keys a node
// redirected. Should that not account for every key that may have moved
// (a node that could not be asked, an unreadable view), it returns true:
// no hold ends in this sweep, the next one ends what is really gone, with
// hold durations still taken from when each was last seen.
func (f *family) settle(ctx context.Context, st *sweepRun, start *topology.SlotView) (deferEnds bool) {
	if !f.s.topo.IsCluster() {
		if len(st.moved) > 0 {
			f.rereadMoved(ctx, st)
		}
		return false
	}
	bounded := false
	var slots []int
	if start != nil {
		if end, err := f.s.topo.View(ctx); err == nil && end != nil {
			bounded = true
			if slots = topology.Unsettled(start, end); len(slots) > 0 {
				keys, complete := end.KeysIn(ctx, slots, f.cfg.MatchRegexp)
				bounded = complete
				for _, k := range keys {
					if !st.seenKeys.Has(xxhash.Sum64String(k)) {
						st.moved = append(st.moved, k)
					}
				}
			}
		}
	}
	if len(st.moved) > 0 {
		f.rereadMoved(ctx, st)
	}
	if bounded || start == nil && len(st.moved) == 0 {
		return false
	}
	f.state.floor.KeepUnseen()
	f.log().Warn("cluster changed mid-sweep beyond key-by-key accounting", "unsettled_slots", len(slots), "action", "no holds end this sweep")
	return true
}

// rereadMoved reads again the keys a node redirected (MOVED, ASK) or told
// to retry (TRYAGAIN): they changed nodes while the sweep ran, by a reshard
// or a failover. The cluster client routes each key to its current node
// and follows redirections, ASKING included, so a key of a slot being
// migrated is read wherever it is by now. A key already read on another
// node is not read again. What still cannot be read is carried: its
// members are not ended and its user keeps its last used value, and the
// sweep says how many keys it missed.
func (f *family) rereadMoved(ctx context.Context, st *sweepRun) {
	uniq := map[string]struct{}{}
	var keys []string
	for _, k := range st.moved {
		if _, dup := uniq[k]; dup {
			continue
		}
		uniq[k] = struct{}{}
		if st.seenKeys != nil {
			if st.seenKeys.Has(xxhash.Sum64String(k)) {
				continue
			}
		}
		keys = append(keys, k)
	}
	step := int(st.plan.ScanCount)
	if step < 1 {
		step = 1000
	}
	rc := f.s.topo.Router()
	var err, mastersErr error
	st.rereading = true
	for i := 0; i < len(keys); i += step {
		batch := keys[i:min(i+step, len(keys))]
		var reads []redisread.KeyRead
		if err == nil {
			reads, err = f.s.reader.ReadBatch(ctx, rc, st.plan, batch)
		}
		if err != nil {
			reads = make([]redisread.KeyRead, len(batch))
			for j, k := range batch {
				reads[j] = redisread.KeyRead{Key: k, Status: redisread.Missed}
			}
		}
		if err == nil && f.s.topo.ReadsReplicas() {
			if merr := f.askMasters(ctx, st, reads); merr != nil {
				mastersErr = merr
			}
		}
		for j := range reads {
			f.apply(st, &reads[j])
		}
	}
	st.rereading = false
	args := []any{"keys", len(uniq), "read_elsewhere", len(uniq) - len(keys), "reread", len(keys) - st.missed, "missed", st.missed}
	if st.missed == 0 {
		f.log().Info("keys moved between cluster nodes mid-sweep; all reread", args...)
		return
	}
	if err != nil {
		args = append(args, "err", err)
	}
	if mastersErr != nil {
		// The replicas answered, their masters did not: the ACL of
		// read_from: replica is the masters' too.
		args = append(args, "masters_err", mastersErr)
	}
	f.log().Warn("keys moved between cluster nodes mid-sweep; some unreadable, carried", args...)
}

// askMasters reads again from their masters the moved keys that replicas
// read as gone. A replica does not know that a slot is being migrated, and
// answers "no such key" for a key that has left its master, or that its
// new master has not yet replicated to it. A master's answer, ASK
// followed, is the truth: a key deleted or expired on the source before
// it could move is gone from both (TestClusterKeyGoneMidMigration). Taken
// as "could not be read" instead, such a key kept its user one sweep too
// long once the migration was over (TestClusterReplicaKeyGoneBeforeItsSlotMoved),
// and for as long as the migration lasted before that. What the masters
// cannot answer either is carried, and why is returned.
func (f *family) askMasters(ctx context.Context, st *sweepRun, reads []redisread.KeyRead) error {
	var gone []string
	var at []int
	for j := range reads {
		if reads[j].Status == redisread.Gone {
			gone = append(gone, reads[j].Key)
			at = append(at, j)
		}
	}
	if len(gone) == 0 {
		return nil
	}
	again, err := f.s.reader.ReadBatch(ctx, f.s.topo.Masters(), st.plan, gone)
	for i, j := range at {
		if err != nil {
			reads[j].Status = redisread.Missed
			continue
		}
		reads[j] = again[i]
	}
	return err
}
