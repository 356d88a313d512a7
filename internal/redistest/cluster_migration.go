package redistest

import (
	"context"
	"fmt"
)

// The slot migration steps of this file are what `redis-cli --cluster reshard`
// does, split up so that a test can stop in the middle of a migration or
// run sweeps while one is under way.

// BeginMigration marks slot as importing on to and migrating on from.
func (c *Cluster) BeginMigration(ctx context.Context, slot int, from, to *Server) error {
	fromID, toID := c.ID(from), c.ID(to)
	if err := c.NodeClient(to).Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", fromID).Err(); err != nil {
		return fmt.Errorf("SETSLOT %d IMPORTING on %s: %w", slot, to.Addr, err)
	}
	if err := c.NodeClient(from).Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", toID).Err(); err != nil {
		return fmt.Errorf("SETSLOT %d MIGRATING on %s: %w", slot, from.Addr, err)
	}
	return nil
}

// MoveKeys MIGRATEs up to max keys (all when max <= 0) of slot from from
// to to, batch keys per MIGRATE, and returns how many it moved.
func (c *Cluster) MoveKeys(ctx context.Context, slot int, from, to *Server, batch, max int) (int, error) {
	if batch <= 0 {
		batch = 100
	}
	moved := 0
	for max <= 0 || moved < max {
		n := batch
		if max > 0 {
			n = min(n, max-moved)
		}
		keys, err := c.NodeClient(from).ClusterGetKeysInSlot(ctx, slot, n).Result()
		if err != nil {
			return moved, fmt.Errorf("GETKEYSINSLOT %d on %s: %w", slot, from.Addr, err)
		}
		if len(keys) == 0 {
			return moved, nil
		}
		args := []any{"MIGRATE", "127.0.0.1", to.Port, "", 0, 5000, "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		if err := c.NodeClient(from).Do(ctx, args...).Err(); err != nil {
			return moved, fmt.Errorf("MIGRATE %d keys of slot %d from %s to %s: %w", len(keys), slot, from.Addr, to.Addr, err)
		}
		moved += len(keys)
	}
	return moved, nil
}

// FinishMigration hands slot to to: the importing side first, then the
// migrating side, as the Redis docs prescribe. The other nodes learn it
// by gossip (the config epoch of to goes up); WaitHealthy waits for that.
func (c *Cluster) FinishMigration(ctx context.Context, slot int, from, to *Server) error {
	toID := c.ID(to)
	for _, s := range []*Server{to, from} {
		if err := c.NodeClient(s).Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", toID).Err(); err != nil {
			return fmt.Errorf("SETSLOT %d NODE on %s: %w", slot, s.Addr, err)
		}
	}
	return nil
}

// MigrateSlot moves slot and all its keys from from to to.
func (c *Cluster) MigrateSlot(ctx context.Context, slot int, from, to *Server) error {
	if err := c.BeginMigration(ctx, slot, from, to); err != nil {
		return err
	}
	if _, err := c.MoveKeys(ctx, slot, from, to, 100, 0); err != nil {
		return err
	}
	return c.FinishMigration(ctx, slot, from, to)
}
