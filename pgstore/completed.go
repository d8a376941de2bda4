package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/xagentkit/imv2"
)

// Lookup implements imv2.CompletedStore. A record is visible while it is
// younger than CompletedTTL, swept or not.
func (s *Store) Lookup(ctx context.Context, channelID, messageID string) (imv2.Fingerprint, bool, error) {
	if err := checkIDs(channelID, messageID); err != nil {
		return imv2.Fingerprint{}, false, err
	}
	fp, found, err := lookup(ctx, s.pool, []byte(channelID), []byte(messageID), s.cutoff())
	if err != nil {
		return imv2.Fingerprint{}, false, fmt.Errorf("pgstore: %w", err)
	}
	return fp, found, nil
}

// querier is a pool or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func lookup(ctx context.Context, q querier, ch, id []byte, cutoff int64) (imv2.Fingerprint, bool, error) {
	var raw []byte
	err := q.QueryRow(ctx, "SELECT fingerprint FROM imv2_completed WHERE channel_id = $1 AND message_id = $2 AND recorded_ns > $3", ch, id, cutoff).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return imv2.Fingerprint{}, false, nil
	}
	if err != nil {
		return imv2.Fingerprint{}, false, err
	}
	var fp imv2.Fingerprint
	if len(raw) != len(fp) {
		return fp, false, fmt.Errorf("completed record has a %d-byte fingerprint", len(raw))
	}
	copy(fp[:], raw)
	return fp, true, nil
}

// Record implements imv2.CompletedStore. The record is committed before
// Record returns, so the accepted ack that follows it survives a crash
// (S8), and it ends the message's claim, whoever held it. Recording a
// message again replaces its fingerprint and restarts its TTL. When
// CompletedCap records are held the oldest goes; a few expired records
// and orphaned claims go too.
//
// Every Record locks the one row holding the completed count, so Records
// of all replicas commit one after another: the cap is exact, at the cost
// of one commit at a time for the whole database.
func (s *Store) Record(ctx context.Context, channelID, messageID string, fp imv2.Fingerprint) error {
	if err := checkIDs(channelID, messageID); err != nil {
		return err
	}
	ch, id := []byte(channelID), []byte(messageID)
	return s.tx(ctx, func(tx pgx.Tx) error {
		// Lock order, kept everywhere: the count row, then a message.
		var count int64
		if err := tx.QueryRow(ctx, "SELECT n FROM imv2_completed_count WHERE id = 1 FOR UPDATE").Scan(&count); err != nil {
			return err
		}
		if err := lockMessage(ctx, tx, channelID, messageID); err != nil {
			return err
		}
		now := s.nowNS()
		tag, err := tx.Exec(ctx, `UPDATE imv2_completed SET fingerprint = $3, recorded_ns = $4, seq = nextval('imv2_completed_seq')
			WHERE channel_id = $1 AND message_id = $2`, ch, id, fp[:], now)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			if _, err := tx.Exec(ctx, `INSERT INTO imv2_completed (channel_id, message_id, fingerprint, recorded_ns, seq)
				VALUES ($1, $2, $3, $4, nextval('imv2_completed_seq'))`, ch, id, fp[:], now); err != nil {
				return err
			}
			count++
		}
		if _, err := tx.Exec(ctx, "DELETE FROM imv2_claims WHERE channel_id = $1 AND message_id = $2", ch, id); err != nil {
			return err
		}
		cutoff := now - s.ttl.Nanoseconds()
		// Only the oldest few by seq are looked at, expired or not, so a
		// Record never scans the table for expired records that are not
		// there; seq order is Record order, hence time order up to the
		// replicas' clock skew. Sweep removes whatever this misses.
		tag, err = tx.Exec(ctx, `DELETE FROM imv2_completed WHERE seq IN (
			SELECT seq FROM (SELECT seq, recorded_ns FROM imv2_completed ORDER BY seq LIMIT $2) oldest
			WHERE recorded_ns <= $1)`, cutoff, inlineSweep)
		if err != nil {
			return err
		}
		count -= tag.RowsAffected()
		if over := count - s.completedCap; over > 0 {
			tag, err = tx.Exec(ctx, `DELETE FROM imv2_completed WHERE seq IN (
				SELECT seq FROM imv2_completed ORDER BY seq LIMIT $1)`, over)
			if err != nil {
				return err
			}
			count -= tag.RowsAffected()
		}
		// An orphaned claim is kept one TTL past its lease, as long as the
		// record its resend would have made.
		if _, err := tx.Exec(ctx, `DELETE FROM imv2_claims WHERE (channel_id, message_id) IN (
			SELECT channel_id, message_id FROM imv2_claims WHERE until_ns <= $1 LIMIT $2)`, cutoff, inlineSweep); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, "UPDATE imv2_completed_count SET n = $1 WHERE id = 1", max(count, 0))
		return err
	})
}

// DropChannel implements imv2.CompletedStore: it forgets every completed
// record and claim of a permanently deleted channel (S7). Pending entries
// stay (S9); DropPending removes those.
func (s *Store) DropChannel(ctx context.Context, channelID string) error {
	if err := checkChannel(channelID); err != nil {
		return err
	}
	ch := []byte(channelID)
	return s.tx(ctx, func(tx pgx.Tx) error {
		var count int64
		if err := tx.QueryRow(ctx, "SELECT n FROM imv2_completed_count WHERE id = 1 FOR UPDATE").Scan(&count); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, "DELETE FROM imv2_completed WHERE channel_id = $1", ch)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "DELETE FROM imv2_claims WHERE channel_id = $1", ch); err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return nil
		}
		_, err = tx.Exec(ctx, "UPDATE imv2_completed_count SET n = $1 WHERE id = 1", max(count-tag.RowsAffected(), 0))
		return err
	})
}

// Sweep removes every completed record older than CompletedTTL and every
// claim whose lease ended more than CompletedTTL ago, and returns how many
// records it removed. Record trims a few each time, and CompletedCap bounds
// the table either way; Sweep is for an operator's cron.
func (s *Store) Sweep(ctx context.Context) (int, error) {
	var n int64
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var count int64
		if err := tx.QueryRow(ctx, "SELECT n FROM imv2_completed_count WHERE id = 1 FOR UPDATE").Scan(&count); err != nil {
			return err
		}
		cutoff := s.cutoff()
		tag, err := tx.Exec(ctx, "DELETE FROM imv2_completed WHERE recorded_ns <= $1", cutoff)
		if err != nil {
			return err
		}
		n = tag.RowsAffected()
		if _, err := tx.Exec(ctx, "DELETE FROM imv2_claims WHERE until_ns <= $1", cutoff); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, "UPDATE imv2_completed_count SET n = $1 WHERE id = 1", max(count-n, 0))
		return err
	})
	return int(n), err
}

// cutoff is the recorded_ns at or below which a record has expired.
func (s *Store) cutoff() int64 { return s.nowNS() - s.ttl.Nanoseconds() }
