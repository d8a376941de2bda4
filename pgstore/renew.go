package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// RenewClaim implements imv2.ClaimRenewer: it moves the end of owner's
// claim to lease from now (the server's clock, as Claim's) and reports
// whether owner held it. It is one statement on the claim's row and takes
// no advisory lock, so it does not wait for the message's own Record (which
// may hold that lock while a slow or locked table holds it). A concurrent
// takeover is decided by the row: whichever commits first, the other's
// write finds the row changed and writes nothing (Claim decides by what
// it wrote).
func (s *Store) RenewClaim(ctx context.Context, channelID, messageID, owner string, lease time.Duration) (bool, error) {
	if err := checkIDs(channelID, messageID); err != nil {
		return false, err
	}
	if owner == "" {
		return false, errors.New("pgstore: RenewClaim without an owner")
	}
	if lease <= 0 {
		return false, fmt.Errorf("pgstore: RenewClaim with lease %v; want > 0", lease)
	}
	tag, err := s.pool.Exec(ctx, renewSQL,
		[]byte(channelID), []byte(messageID), owner, lease.Nanoseconds(), s.leaseNowArg())
	if err != nil {
		return false, fmt.Errorf("pgstore: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// renewSQL is RenewClaim's statement ($5: leaseNowArg).
var renewSQL = `UPDATE imv2_claims SET until_ns = ` + leaseNow(5) + ` + $4
	WHERE channel_id = $1 AND message_id = $2 AND owner = $3`
