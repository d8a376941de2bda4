package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/state"
)

// SeenConnector implements state.ConnectorRegistry: connectorID
// connected, or lost its last connection, on some replica at t. The table
// holds at most RegistryCap connector_ids (the least recently seen go
// first) and none seen longer ago than CompletedTTL (up to 16 removed per
// call).
func (s *Store) SeenConnector(ctx context.Context, connectorID string, t time.Time) error {
	if err := checkChannel(connectorID); err != nil {
		return err
	}
	return s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO imv2_connectors (connector_id, seen_ns) VALUES ($1, $2)
			ON CONFLICT (connector_id) DO UPDATE SET seen_ns = greatest(imv2_connectors.seen_ns, EXCLUDED.seen_ns)`,
			[]byte(connectorID), t.UnixNano()); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM imv2_connectors WHERE connector_id IN
			(SELECT connector_id FROM imv2_connectors WHERE seen_ns < $1 ORDER BY seen_ns LIMIT $2)`,
			s.nowNS()-s.ttl.Nanoseconds(), inlineSweep); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM imv2_connectors WHERE connector_id IN
			(SELECT connector_id FROM imv2_connectors ORDER BY seen_ns
			 LIMIT greatest((SELECT count(*) FROM imv2_connectors) - $1, 0))`, s.registryCap)
		return err
	})
}

// ConnectorSeen implements state.ConnectorRegistry.
func (s *Store) ConnectorSeen(ctx context.Context, connectorID string) (time.Time, bool, error) {
	if connectorID == "" || len(connectorID) > imv2.MaxIDBytes {
		return time.Time{}, false, nil // not one this store could hold
	}
	var ns int64
	err := s.pool.QueryRow(ctx, "SELECT seen_ns FROM imv2_connectors WHERE connector_id = $1", []byte(connectorID)).Scan(&ns)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return time.Time{}, false, nil
	case err != nil:
		return time.Time{}, false, fmt.Errorf("pgstore: %w", err)
	}
	return time.Unix(0, ns), true, nil
}

// ForgetConnector implements state.ConnectorRegistry.
func (s *Store) ForgetConnector(ctx context.Context, connectorID string) error {
	if _, err := s.pool.Exec(ctx, "DELETE FROM imv2_connectors WHERE connector_id = $1", []byte(connectorID)); err != nil {
		return fmt.Errorf("pgstore: %w", err)
	}
	return nil
}

// Store is the shared registry of channels and connector_ids.
var _ state.ConnectorRegistry = (*Store)(nil)
