package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/xagentkit/imv2"
)

// Claim implements imv2.ClaimStore. It holds the message's advisory lock,
// which Record and Release of the same message take too, so of many
// concurrent claimers on any number of replicas exactly one acquires, and
// none acquires a message another's Record completed meanwhile. A second
// claim by the owner of a live claim is ClaimOrphaned, as the
// imv2.ClaimStore contract says: an owner delivers a message once at a
// time, so claiming it again means its own earlier attempt was
// interrupted. The claim is committed before Claim returns.
//
// Claim is one round trip: the lock and one statement, which reads the
// record and the claim and writes the claim as they decide, go as one
// batch, one implicit transaction, shared with concurrent Claims and
// Records of other messages (groupcommit.go, claimGroup).
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
	c := &groupCall{ctx: ctx, ch: channelID, id: messageID, fp: fp, owner: owner, lease: lease}
	s.do(c)
	return c.claim, c.err
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
