package sweep

import (
	"context"

	"github.com/slotexporter/slot_exporter/internal/changefeed"
	"github.com/slotexporter/slot_exporter/internal/topology"
)

// TakeChanges takes from the sweeper's change feed what it gathered of
// family on node n, as the next sweep would: for tests of what the feed
// holds between sweeps.
func (s *Sweeper) TakeChanges(ctx context.Context, n topology.Node, family string) (changefeed.Names, error) {
	names, _, err := s.changes.Changes(ctx, n, family)
	return names, err
}

// AfterLostCheck has fn run in every sweep between its check of the
// servers' identities (INFO) and the change feed's barrier.
func (s *Sweeper) AfterLostCheck(fn func()) { s.afterLostCheck = fn }

// AfterBatch has fn run in every sweep after each batch of keys it
// applies. The readers hold at most a few batches ahead of it (the
// channel between them, one batch in flight under the pace), so what fn
// writes reaches the keys read after those.
func (s *Sweeper) AfterBatch(fn func()) { s.afterBatch = fn }
