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
