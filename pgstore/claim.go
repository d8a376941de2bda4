package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/xagentkit/imv2"
)

var _ imv2.ClaimStarter = (*Store)(nil)

// Claim implements imv2.ClaimStore. It holds the message's advisory lock,
// which Record and Release of the same message take too, so of many
// concurrent claimers on any number of replicas exactly one acquires, and
// none acquires a message another's Record completed meanwhile. A second
// claim by the owner of a live claim is ClaimOrphaned, as the
// imv2.ClaimStore contract says: an owner delivers a message once at a
// time, so claiming it again means its own earlier attempt was
// interrupted. The claim is committed before Claim returns.
//
// A new claim's post has not begun (unposted_by names its owner) until
// Begin; an orphan whose post never began is answered with Unposted set,
// so the Channel posts its resend (imv2.ClaimStarter).
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

// claimOne is Claim alone in its group: the statement of one message,
// which the server plans and runs faster than claimGroup's of one.
func (s *Store) claimOne(ctx context.Context, channelID, messageID string, fp imv2.Fingerprint, owner string, lease time.Duration) (imv2.Claim, error) {
	ch, id := []byte(channelID), []byte(messageID)
	var (
		done, oldFP []byte
		oldOwner    *string
		oldUntil    *int64
		now         int64
		wrote       bool
		unposted    bool
	)
	err := s.batch(ctx, func(b *pgx.Batch) {
		b.Queue("SELECT pg_advisory_xact_lock($1)", messageKey(channelID, messageID))
		// The statement's snapshot is taken under the lock, so it sees
		// every committed Record and claim of the message. A claim is
		// written when there is no live record and either no claim
		// (acquired) or one whose lease ended or that is the owner's own
		// (a takeover: owner and lease change, the fingerprint stays the
		// interrupted attempt's, the content that may have been posted).
		// What it wrote decides the answer, not what it read: a renewal
		// (RenewClaim, which takes no lock) committed after the snapshot
		// makes the takeover's UPDATE find the lease live and write
		// nothing, and the claim is then held.
		b.Queue(claimSQL,
			ch, id, owner, lease.Nanoseconds(), fp[:], s.cutoff(), s.leaseNowArg()).
			QueryRow(func(row pgx.Row) error { return row.Scan(&done, &oldOwner, &oldUntil, &oldFP, &now, &wrote, &unposted) })
	})
	switch {
	case err != nil:
		return imv2.Claim{}, err
	case done != nil:
		out := imv2.Claim{State: imv2.ClaimCompleted}
		if len(done) != len(out.Fingerprint) {
			return imv2.Claim{}, fmt.Errorf("pgstore: completed record has a %d-byte fingerprint", len(done))
		}
		copy(out.Fingerprint[:], done)
		return out, nil
	case wrote && oldOwner == nil:
		return imv2.Claim{State: imv2.ClaimAcquired}, nil
	case wrote:
		out := imv2.Claim{State: imv2.ClaimOrphaned, Owner: *oldOwner, Unposted: unposted}
		copy(out.Fingerprint[:], oldFP)
		return out, nil
	case oldOwner != nil:
		return imv2.Claim{State: imv2.ClaimHeld, Owner: *oldOwner, Until: time.Unix(0, max(*oldUntil, now+1))}, nil
	default:
		return imv2.Claim{}, errors.New("pgstore: Claim wrote no claim and found none")
	}
}

// claimSQL is Claim's statement ($7: leaseNowArg).
var claimSQL = `WITH t AS (SELECT ` + leaseNow(7) + ` AS now),
	done AS (
		SELECT fingerprint FROM imv2_completed WHERE channel_id = $1 AND message_id = $2 AND recorded_ns > $6),
	old AS (
		SELECT owner, until_ns, fingerprint FROM imv2_claims WHERE channel_id = $1 AND message_id = $2),
	ins AS (
		INSERT INTO imv2_claims (channel_id, message_id, owner, until_ns, fingerprint, unposted_by)
		SELECT $1, $2, $3, t.now + $4, $5, $3 FROM t WHERE NOT EXISTS (SELECT 1 FROM done) AND NOT EXISTS (SELECT 1 FROM old)
		RETURNING 1),
	upd AS (
		UPDATE imv2_claims SET owner = $3, until_ns = (SELECT now FROM t) + $4, ` + takeUnposted("imv2_claims", "$3") + `
		WHERE channel_id = $1 AND message_id = $2 AND NOT EXISTS (SELECT 1 FROM done)
			AND (until_ns <= (SELECT now FROM t) OR owner = $3)
		RETURNING unposted_by IS NOT NULL AS unposted)
	SELECT (SELECT fingerprint FROM done), (SELECT owner FROM old), (SELECT until_ns FROM old), (SELECT fingerprint FROM old),
		(SELECT now FROM t), EXISTS (SELECT 1 FROM ins) OR EXISTS (SELECT 1 FROM upd), coalesce((SELECT unposted FROM upd), false)`

// takeUnposted is the SET clause of a takeover of row by owner (SQL): a claim
// whose post had not begun stays so, now owner's to begin; one that began
// (or whose unposted_by names an owner before the last, who took it over
// without knowing the column: a replica of schema version 7) stays begun.
// Both statements decide by the row they updated, the latest version, so a
// Begin committed while they waited for the row counts.
func takeUnposted(row, owner string) string {
	return "unposted_by = CASE WHEN " + row + ".unposted_by = " + row + ".owner THEN " + owner + " END"
}

// leaseNow is the SQL of the time leases are measured by, in Unix
// nanoseconds: the database server's clock_timestamp() (the time of the
// statement, not of its transaction's start, which may have waited for
// the message's lock), so every replica measures leases by the same
// clock and their skew does not matter; or the Store's Options.Clock when
// one was given, passed as parameter $n (leaseNowArg).
func leaseNow(n int) string {
	return fmt.Sprintf("COALESCE($%d::bigint, (extract(epoch FROM clock_timestamp()) * 1000000000)::bigint)", n)
}

// leaseNowArg is the parameter of leaseNow: nil for the server's clock.
func (s *Store) leaseNowArg() *int64 {
	if s.leaseClock == nil {
		return nil
	}
	now := s.leaseClock.Now().UnixNano()
	return &now
}

// Begin implements imv2.ClaimStarter: owner's claim's post begins. It
// changes nothing when owner does not hold the claim, or its post began
// already. It is committed before Begin returns, in a group commit shared
// with concurrent Claims, Records and Begins of other messages
// (groupcommit.go): one round trip.
func (s *Store) Begin(ctx context.Context, channelID, messageID, owner string) error {
	if err := checkIDs(channelID, messageID); err != nil {
		return err
	}
	if owner == "" {
		return errors.New("pgstore: Begin without an owner")
	}
	c := &groupCall{ctx: ctx, begin: true, ch: channelID, id: messageID, owner: owner}
	s.do(c)
	return c.err
}

// beginSQL is Begin's statement, one per Begin in a group too: an index
// lookup of the row, decided on the row's latest version (a RenewClaim or
// a takeover committed meanwhile is waited for and seen), where a row
// address taken under FOR UPDATE (claimGroup's way) would name a version
// the statement's snapshot does not see after a concurrent renewal, and
// the Begin would be lost.
const beginSQL = `UPDATE imv2_claims SET unposted_by = NULL
	WHERE channel_id = $1 AND message_id = $2 AND owner = $3 AND unposted_by IS NOT NULL`

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
