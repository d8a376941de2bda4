package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/state"
)

// The xAgent side's state.ChannelStore (dataplane.ClientConfig.Store):
// the connector_id of the last hello.ack and the channel IDs to reopen,
// in the order added (imv2_xagent_connector, imv2_xagent_channels), so
// an xAgent restarted on the same database reopens its channels and,
// with the same Store as imv2.Options.Pending, resends the finals they
// still owed (S10). The channel IDs are the Connector's, remote input:
// at most state.DefaultChannelStoreCap (1,000, the Client's default
// MaxChannels) are held, as boltstore holds; AddChannel beyond that
// fails with code connector_channel_unavailable. They have no TTL: they
// are the Client's, removed by its CloseChannel. One database holds the
// channels of one Client, as one boltstore file does.
var _ state.ChannelStore = (*Store)(nil)

// xagentChannelsLock serialises AddChannel's cap check across processes.
const xagentChannelsLock = 0x696d76325f786368 // "imv2_xch"

// ConnectorID implements state.ChannelStore: "" before the first
// SetConnectorID.
func (s *Store) ConnectorID(ctx context.Context) (string, error) {
	var id []byte
	err := s.pool.QueryRow(ctx, "SELECT connector_id FROM imv2_xagent_connector WHERE id = 1").Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("pgstore: %w", err)
	}
	return string(id), nil
}

// SetConnectorID implements state.ChannelStore; committed when it
// returns. It replaces the one held (one row, so a Connector issuing
// new connector_ids grows nothing).
func (s *Store) SetConnectorID(ctx context.Context, id string) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO imv2_xagent_connector (id, connector_id) VALUES (1, $1)
		ON CONFLICT (id) DO UPDATE SET connector_id = EXCLUDED.connector_id`, []byte(id))
	if err != nil {
		return fmt.Errorf("pgstore: %w", err)
	}
	return nil
}

// ChannelIDs implements state.ChannelStore: the channels to reopen, in
// the order added.
func (s *Store) ChannelIDs(ctx context.Context) ([]string, error) {
	return s.channelIDs(ctx, "SELECT channel_id FROM imv2_xagent_channels ORDER BY seq")
}

// channelIDs runs query, which selects one bytea column of channel IDs.
func (s *Store) channelIDs(ctx context.Context, query string, args ...any) ([]string, error) {
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	ids, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var id []byte
		err := r.Scan(&id)
		return string(id), err
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	return ids, nil
}

// AddChannel implements state.ChannelStore; committed when it returns.
// Adding a held ID is a no-op that keeps its place. The ID must be 1 to
// imv2.MaxIDBytes bytes without 0x00, as for the pending store, which
// must hold the channel's finals too.
func (s *Store) AddChannel(ctx context.Context, id string) error {
	if err := checkChannel(id); err != nil {
		return err
	}
	ch := []byte(id)
	// Every reconnect adds every reopened channel again: a held one costs
	// one read, not a turn at the lock.
	var held bool
	if err := s.pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM imv2_xagent_channels WHERE channel_id = $1)", ch).Scan(&held); err != nil {
		return fmt.Errorf("pgstore: %w", err)
	}
	if held {
		return nil
	}
	return s.tx(ctx, func(tx pgx.Tx) error {
		// The lock orders new IDs, so racing Adds count each other and
		// the cap holds across processes; the second look sees an ID a
		// racing Add of the same one committed meanwhile.
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(xagentChannelsLock)); err != nil {
			return err
		}
		var n int
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM imv2_xagent_channels WHERE channel_id = $1),
			(SELECT count(*) FROM imv2_xagent_channels)`, ch).Scan(&held, &n); err != nil {
			return err
		}
		if held {
			return nil
		}
		if n >= state.DefaultChannelStoreCap {
			return imv2.Errorf(imv2.CodeChannelUnavailable, "pgstore: %d channel IDs held, the cap", n)
		}
		_, err := tx.Exec(ctx, "INSERT INTO imv2_xagent_channels (channel_id) VALUES ($1)", ch)
		return err
	})
}

// RemoveChannel implements state.ChannelStore; removing an ID not held
// is a no-op.
func (s *Store) RemoveChannel(ctx context.Context, id string) error {
	if err := checkChannel(id); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, "DELETE FROM imv2_xagent_channels WHERE channel_id = $1", []byte(id)); err != nil {
		return fmt.Errorf("pgstore: %w", err)
	}
	return nil
}
