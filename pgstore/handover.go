package pgstore

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/internal/connid"
)

// Handover implements imv2.CompletedStore: the newest live records of
// channel from, at most imv2.MaxHandoverRecords, are copied to channel to
// with their age kept, replacing a record to already had for the same
// message_id with other content or age, so a resend the sender moved to
// the new channel ID is answered duplicate (dedup follows the message, not
// the ID); a record to holds as it is stays, so a repeated handover
// changes nothing. from's claims not yet due for Sweep are copied with the
// same row values (owner, lease, fingerprint), at most as many, except
// where to has a claim of its own. from keeps its records and claims; an
// unknown from copies nothing. The cap holds afterwards: records go by the
// shares, as in Record.
func (s *Store) Handover(ctx context.Context, from, to string) error {
	if err := checkChannel(from); err != nil {
		return err
	}
	if err := checkChannel(to); err != nil {
		return err
	}
	if from == to {
		return nil
	}
	return s.tx(ctx, func(tx pgx.Tx) error {
		var count int64 // records added
		// xmax = 0 marks a row this statement inserted rather than updated.
		// The newest first chosen, then inserted oldest first: seq keeps
		// the eviction order.
		rows, err := tx.Query(ctx, `INSERT INTO imv2_completed (channel_id, message_id, fingerprint, recorded_ns, seq, result)
			SELECT $2, message_id, fingerprint, recorded_ns, nextval('imv2_completed_seq'), result
			FROM (SELECT message_id, fingerprint, recorded_ns, seq, result FROM imv2_completed
				WHERE channel_id = $1 AND recorded_ns > $3 ORDER BY seq DESC LIMIT $4) newest
			ORDER BY seq
			ON CONFLICT (channel_id, message_id) DO UPDATE
			SET fingerprint = EXCLUDED.fingerprint, recorded_ns = EXCLUDED.recorded_ns, seq = EXCLUDED.seq, result = EXCLUDED.result
			WHERE imv2_completed.fingerprint <> EXCLUDED.fingerprint OR imv2_completed.recorded_ns <> EXCLUDED.recorded_ns
			RETURNING xmax = 0`, []byte(from), []byte(to), s.cutoff(), imv2.MaxHandoverRecords)
		if err != nil {
			return err
		}
		for rows.Next() {
			var inserted bool
			if err := rows.Scan(&inserted); err != nil {
				rows.Close()
				return err
			}
			if inserted {
				count++
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		// Claims as they are; Sweep's cutoff decides which are still due.
		if _, err := tx.Exec(ctx, `INSERT INTO imv2_claims (channel_id, message_id, owner, until_ns, fingerprint)
			SELECT $2, message_id, owner, until_ns, fingerprint FROM imv2_claims
			WHERE channel_id = $1 AND until_ns > $3 ORDER BY until_ns DESC LIMIT $4
			ON CONFLICT (channel_id, message_id) DO NOTHING`, []byte(from), []byte(to), s.cutoff(), imv2.MaxHandoverRecords); err != nil {
			return err
		}
		// The copies count, then the cap holds as after a Record
		// (completedshare.go), with room to evict as many as were copied.
		shard := countShard(messageKey(to, ""))
		b := &pgx.Batch{}
		b.Queue(countChannel, []byte(to), count, shard, []byte(connid.ConnectorID(ctx)))
		b.Queue("UPDATE imv2_completed_counts SET n = n + $2 WHERE shard = $1", shard, count)
		s.queueTrim(b, s.nowNS(), []byte(to), nil, count+inlineSweep, shard)
		return tx.SendBatch(ctx, b).Close()
	})
}
