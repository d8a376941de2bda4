package pgstore

import (
	"context"
	"fmt"
)

// Stats are the Store's counts across every channel and replica, for a
// soak or failover test and for an operator's dashboard.
type Stats struct {
	Pending   int // pending entries
	Completed int // completed records, expired ones not yet swept included
	Claims    int // claims of deliveries running or orphaned
}

// Stats counts the rows of the Store's tables (one query; a full count,
// so call it seldom on a large database).
func (s *Store) Stats(ctx context.Context) (Stats, error) {
	var st Stats
	err := s.pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM imv2_pending),
		(SELECT sum(n) FROM imv2_completed_counts),
		(SELECT count(*) FROM imv2_claims)`).Scan(&st.Pending, &st.Completed, &st.Claims)
	if err != nil {
		return Stats{}, fmt.Errorf("pgstore: %w", err)
	}
	return st, nil
}
