package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/xagentkit/imv2"
)

// Claim implements imv2.ClaimStore. It runs in one transaction holding the
// message's advisory lock, which Record and Release of the same message
// take too, so of many concurrent claimers on any number of replicas
// exactly one acquires, and none acquires a message another's Record
// completed meanwhile. A second claim by the owner of a live claim is
// ClaimOrphaned, as the imv2.ClaimStore contract says: an owner delivers a
// message once at a time, so claiming it again means its own earlier
// attempt was interrupted. The claim is committed before Claim returns.
func (s *Store) Claim(ctx context.Context, channelID, messageID string, fp imv2.Fingerprint, owner string, lease time.Duration) (imv2.Claim, error) {
	if err := checkIDs(channelID, messageID); err != nil {
		return imv2.Claim{}, err
	}
	if owner == "" {
		return imv2.Claim{}, errors.New("pgstore: Claim without an owner")
	}
	if lease <= 0 {
		return imv2.Claim{}, fmt.Errorf("pgstore: Claim with lease %v; want > 0", lease)
	}
	ch, id := []byte(channelID), []byte(messageID)
	var out imv2.Claim
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if err := lockMessage(ctx, tx, channelID, messageID); err != nil {
			return err
		}
		now := s.nowNS()
		done, found, err := lookup(ctx, tx, ch, id, now-s.ttl.Nanoseconds())
		if err != nil {
			return err
		}
		if found {
			out = imv2.Claim{State: imv2.ClaimCompleted, Fingerprint: done}
			return nil
		}
		until := now + lease.Nanoseconds()
		var oldOwner string
		var oldUntil int64
		var oldFP []byte
		err = tx.QueryRow(ctx, "SELECT owner, until_ns, fingerprint FROM imv2_claims WHERE channel_id = $1 AND message_id = $2 FOR UPDATE", ch, id).
			Scan(&oldOwner, &oldUntil, &oldFP)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			_, err = tx.Exec(ctx, "INSERT INTO imv2_claims (channel_id, message_id, owner, until_ns, fingerprint) VALUES ($1, $2, $3, $4, $5)",
				ch, id, owner, until, fp[:])
			out = imv2.Claim{State: imv2.ClaimAcquired}
			return err
		case err != nil:
			return err
		}
		switch {
		case oldUntil > now && oldOwner != owner:
			out = imv2.Claim{State: imv2.ClaimHeld, Owner: oldOwner, Until: time.Unix(0, oldUntil)}
			return nil
		default:
			out = imv2.Claim{State: imv2.ClaimOrphaned, Owner: oldOwner}
			copy(out.Fingerprint[:], oldFP)
		}
		// A takeover changes owner and lease only: the fingerprint stays
		// the interrupted attempt's, the content that may have been posted.
		_, err = tx.Exec(ctx, "UPDATE imv2_claims SET owner = $3, until_ns = $4 WHERE channel_id = $1 AND message_id = $2",
			ch, id, owner, until)
		return err
	})
	if err != nil {
		return imv2.Claim{}, err
	}
	return out, nil
}

// Release implements imv2.ClaimStore: it drops owner's claim, and nothing
// else.
func (s *Store) Release(ctx context.Context, channelID, messageID, owner string) error {
	if err := checkIDs(channelID, messageID); err != nil {
		return err
	}
	return s.tx(ctx, func(tx pgx.Tx) error {
		if err := lockMessage(ctx, tx, channelID, messageID); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "DELETE FROM imv2_claims WHERE channel_id = $1 AND message_id = $2 AND owner = $3",
			[]byte(channelID), []byte(messageID), owner)
		return err
	})
}
