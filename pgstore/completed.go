package pgstore

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/jackc/pgx/v5"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/internal/connid"
	"github.com/xagentkit/imv2/state"
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
// CompletedCap records are held records go by the shares of
// completedshare.go; a few expired records and orphaned claims go too.
//
// Record is one round trip: its statements go as one pgx batch, which
// PostgreSQL runs as one implicit transaction, shared with concurrent
// Claims and Records of other messages (groupcommit.go, recordGroup). It
// locks the message (as Claim and Release do), one of completedShards
// count rows, chosen by the message (by the group's first), and its
// channel's count row, so Records of different channels, on any replica,
// rarely wait on a common row (see completedshare.go for the cap this
// allows).
func (s *Store) Record(ctx context.Context, channelID, messageID string, fp imv2.Fingerprint) error {
	if err := checkIDs(channelID, messageID); err != nil {
		return err
	}
	c := &groupCall{ctx: ctx, record: true, ch: channelID, id: messageID, fp: fp, conn: connid.ConnectorID(ctx)}
	s.do(c)
	return c.err
}

// RecordResult implements state.ResultStore: Record, with result kept in
// the record's row (its result column) in the same transaction, so it
// goes with the record however the record goes (a Record without a
// result sets it NULL). It runs alone, not in a group commit.
func (s *Store) RecordResult(ctx context.Context, channelID, messageID string, fp imv2.Fingerprint, result []byte) error {
	if err := checkIDs(channelID, messageID); err != nil {
		return err
	}
	if len(result) > state.MaxResultBytes {
		return imv2.Errorf(imv2.CodeInvalidPacket, "result is %d bytes; at most %d are kept", len(result), state.MaxResultBytes)
	}
	if result == nil {
		result = []byte{} // NULL is "none"
	}
	if err := s.recordOne(ctx, channelID, messageID, connid.ConnectorID(ctx), fp, result); err != nil {
		return fmt.Errorf("pgstore: %w", err)
	}
	return nil
}

// LookupResult implements state.ResultStore.
func (s *Store) LookupResult(ctx context.Context, channelID, messageID string) (imv2.Fingerprint, []byte, bool, error) {
	if err := checkIDs(channelID, messageID); err != nil {
		return imv2.Fingerprint{}, nil, false, err
	}
	var raw, result []byte
	err := s.pool.QueryRow(ctx, "SELECT fingerprint, result FROM imv2_completed WHERE channel_id = $1 AND message_id = $2 AND recorded_ns > $3",
		[]byte(channelID), []byte(messageID), s.cutoff()).Scan(&raw, &result)
	if errors.Is(err, pgx.ErrNoRows) {
		return imv2.Fingerprint{}, nil, false, nil
	}
	if err != nil {
		return imv2.Fingerprint{}, nil, false, fmt.Errorf("pgstore: %w", err)
	}
	var fp imv2.Fingerprint
	if len(raw) != len(fp) {
		return fp, nil, false, fmt.Errorf("pgstore: completed record has a %d-byte fingerprint", len(raw))
	}
	copy(fp[:], raw)
	return fp, result, true, nil
}

// recordOne is Record alone in its group: the statements of one message,
// which the server plans and runs faster than recordGroup's of one. A
// non-nil result is kept with the record (RecordResult).
func (s *Store) recordOne(ctx context.Context, channelID, messageID, connectorID string, fp imv2.Fingerprint, result []byte) error {
	ch, id := []byte(channelID), []byte(messageID)
	key := messageKey(channelID, messageID)
	shard := countShard(key)
	return s.batch(ctx, func(b *pgx.Batch) {
		now := s.nowNS()
		cutoff := now - s.ttl.Nanoseconds()
		b.Queue("SELECT pg_advisory_xact_lock($1)", key)
		// xmax = 0 marks a row the statement inserted rather than updated:
		// only a new record counts, and only a new channel. The record's
		// row, then the channel's count row, then its group's row (a new
		// channel's), then the shard row (the WITHs
		// are evaluated first) is the one lock order of every statement
		// here; the trims take others' rows only with SKIP LOCKED.
		b.Queue(`WITH up AS (
				INSERT INTO imv2_completed (channel_id, message_id, fingerprint, recorded_ns, seq)
				VALUES ($1, $2, $3, $4, nextval('imv2_completed_seq'))
				ON CONFLICT (channel_id, message_id) DO UPDATE
				SET fingerprint = EXCLUDED.fingerprint, recorded_ns = EXCLUDED.recorded_ns, seq = EXCLUDED.seq, result = NULL
				RETURNING xmax = 0 AS inserted),
			ch AS (
				INSERT INTO imv2_completed_channels (channel_id, n, connector_id)
				SELECT $1, 1, coalesce($6::bytea, '\x') WHERE (SELECT inserted FROM up)
				ON CONFLICT (channel_id) DO UPDATE SET n = imv2_completed_channels.n + 1
				RETURNING connector_id, xmax = 0 AS added),`+countNewChannels("$5::int")+`
			UPDATE imv2_completed_counts SET n = n + 1, channels = channels + (SELECT count(*) FROM ch WHERE added)
			WHERE shard = $5 AND (SELECT inserted FROM up) AND (SELECT count(*) FROM grp) >= 0`,
			ch, id, fp[:], now, shard, []byte(connectorID))
		if result != nil { // before the trims: the record's own row, locked above
			b.Queue("UPDATE imv2_completed SET result = $3 WHERE channel_id = $1 AND message_id = $2", ch, id, result)
		}
		b.Queue("DELETE FROM imv2_claims WHERE channel_id = $1 AND message_id = $2", ch, id)
		s.queueTrim(b, now, ch, id, inlineSweep, shard)
		b.Queue(sweepOrphans, cutoff, inlineSweep)
	})
}

// completedShards is the number of rows the completed count is split
// over (imv2_completed_counts): a Record adds to one, chosen by its
// message, so concurrent Records rarely wait on the same row.
const completedShards = 64

// countShard is the count row a message's or channel's changes go to.
func countShard(key int64) int { return int(uint64(key) % completedShards) }

// subCompleted takes n records off the count, in tx.
func subCompleted(ctx context.Context, tx pgx.Tx, shard int, n int64) error {
	if n == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, "UPDATE imv2_completed_counts SET n = n - $2 WHERE shard = $1", shard, n)
	return err
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
		tag, err := tx.Exec(ctx, "DELETE FROM imv2_completed WHERE channel_id = $1", ch)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "DELETE FROM imv2_claims WHERE channel_id = $1", ch); err != nil {
			return err
		}
		// By the records removed, not to zero: a concurrent Record of the
		// channel, not seen by the DELETE, keeps its count.
		shard := countShard(messageKey(channelID, ""))
		if _, err := tx.Exec(ctx, "UPDATE imv2_completed_channels SET n = n - $2 WHERE channel_id = $1", ch, tag.RowsAffected()); err != nil {
			return err
		}
		if err := subCompleted(ctx, tx, shard, tag.RowsAffected()); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, dropEmptyChannels, 1, shard)
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
		cutoff := s.cutoff()
		// The records first, then their channels' counts, then the shard
		// rows: the lock order of Record.
		if err := tx.QueryRow(ctx, `WITH gone AS (DELETE FROM imv2_completed WHERE recorded_ns <= $1 RETURNING channel_id),
				per AS (SELECT channel_id, count(*) AS k FROM gone GROUP BY channel_id),
				chs AS (UPDATE imv2_completed_channels c SET n = c.n - per.k FROM per WHERE c.channel_id = per.channel_id)
			SELECT count(*) FROM gone`, cutoff).Scan(&n); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "DELETE FROM imv2_claims WHERE until_ns <= $1", cutoff); err != nil {
			return err
		}
		if err := subCompleted(ctx, tx, 0, n); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, dropEmptyChannels, math.MaxInt32, 0); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, dropEmptyGroups)
		return err
	})
	return int(n), err
}

// cutoff is the recorded_ns at or below which a record has expired.
func (s *Store) cutoff() int64 { return s.nowNS() - s.ttl.Nanoseconds() }
