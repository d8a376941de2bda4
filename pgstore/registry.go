package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/xagentkit/imv2"
)

// registryLock serialises Register's cap check across replicas.
const registryLock = 0x696d76325f726567 // "imv2_reg"

// Known reports whether channelID was registered (state.ChannelRegistry),
// by any replica.
func (s *Store) Known(ctx context.Context, channelID string) (bool, error) {
	if err := checkChannel(channelID); err != nil {
		return false, err
	}
	var known bool
	if err := s.pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM imv2_channels WHERE channel_id = $1)", []byte(channelID)).Scan(&known); err != nil {
		return false, fmt.Errorf("pgstore: %w", err)
	}
	return known, nil
}

// Register records a channel ID the Connector issued; it is committed when
// Register returns. Beyond RegistryCap IDs it fails with code
// connector_channel_unavailable; registering a known ID is a no-op.
func (s *Store) Register(ctx context.Context, channelID string) error {
	if err := checkChannel(channelID); err != nil {
		return err
	}
	ch := []byte(channelID)
	return s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(registryLock)); err != nil {
			return err
		}
		var known bool
		var n int
		if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM imv2_channels WHERE channel_id = $1), (SELECT count(*) FROM imv2_channels)", ch).Scan(&known, &n); err != nil {
			return err
		}
		if known {
			return nil
		}
		if n >= s.registryCap {
			return imv2.Errorf(imv2.CodeChannelUnavailable, "channel registry holds %d IDs, its cap", s.registryCap)
		}
		_, err := tx.Exec(ctx, "INSERT INTO imv2_channels (channel_id) VALUES ($1)", ch)
		return err
	})
}

// Forget removes a channel ID the Connector dropped for good, with the
// channel's pending entries (S7); its completed records and claims stay.
func (s *Store) Forget(ctx context.Context, channelID string) error {
	if err := checkChannel(channelID); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, "DELETE FROM imv2_channels WHERE channel_id = $1", []byte(channelID)); err != nil {
		return fmt.Errorf("pgstore: %w", err)
	}
	// Completed records stay until the TTL or the cap takes them, so a
	// resend under the ID that replaces this one is still answered
	// duplicate (see imv2.Channel.Drop and Handover).
	return s.DropPending(ctx, channelID)
}
