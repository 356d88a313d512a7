// Replay: the members a change-driven sweep did not read, re-classified
// from the scores the member table keeps.

package track

// Replayed is a member Replay offers: its key (the low half of the key's
// hash, as in Carry), its identity (Slot), its last score and its state
// at the replay's time. The caller sets Keep on the members it replays.
type Replayed struct {
	Key   uint32
	Slot  uint64
	Score float64
	State MemberState
	Keep  bool
	at    int // part << 32 | position in the part
}

// replayBatch is how many members Replay offers at once: enough that the
// caller's lookups of their keys overlap in memory.
const replayBatch = 256

// Replay re-classifies at Redis time now (ms), by the score last seen,
// the members this sweep has not observed, and offers them to replay in
// batches; those it keeps are seen in this sweep, the others are left
// alone (ended by Sweep unless carried). A key not written since its last
// read needs no read: its members' states follow from their scores, and
// their scores are here. One pass over the table replays every such key
// without a second copy of its members.
func (t *MemberTracker) Replay(now int64, b *Bounds, rules *Rules, replay func([]Replayed)) {
	t.enter(now)
	if cap(t.replayed) < replayBatch {
		t.replayed = make([]Replayed, 0, replayBatch)
	}
	batch := t.replayed[:0]
	flush := func() {
		replay(batch)
		for _, m := range batch {
			if m.Keep {
				t.parts[m.at>>32].slots[uint32(m.at)].genState = packGen(t.gen, m.State)
			}
		}
		batch = batch[:0]
	}
	// Nearly every member was first seen in one of a few sweeps.
	var lastGen uint32
	var lastAt int64
	for pi := range t.parts {
		slots := t.parts[pi].slots
		for i := range slots {
			s := &slots[i]
			if s.free() || s.gen() == t.gen {
				continue
			}
			if s.first != lastGen {
				lastGen, lastAt = s.first, t.genTime[s.first]
			}
			score := t.score(s)
			batch = append(batch, Replayed{Key: s.key(), Slot: s.id(), Score: score,
				State: rules.Classify(b, score, now, lastAt), at: pi<<32 | i})
			if len(batch) == replayBatch {
				flush()
			}
		}
	}
	flush()
}

// Slot is the identity under which Replay names the member with hash h of
// the key with hash keyHash.
func Slot(h, keyHash uint64) uint64 { return slotHash(h, keyHash) }

// Has reports whether the member with slot identity slot is tracked.
func (t *MemberTracker) Has(slot uint64) bool {
	p := t.part(slot)
	return len(p.slots) > 0 && p.find(slot).id() == slot
}
