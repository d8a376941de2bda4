package pgstore

import (
	"bytes"
	"context"
	"fmt"
	"hash/fnv"

	"github.com/jackc/pgx/v5"

	"github.com/xagentkit/imv2"
)

// Add implements imv2.PendingStore: the entry is committed before Add
// returns (S1). A full channel fails with code pending_full and nothing is
// dropped; a message_id already pending with other content fails with code
// message_id_conflict and with the same content changes nothing. Adds to
// one channel are serialised by an advisory lock, so the cap holds across
// replicas.
//
// Add notifies no other replica: its caller is the Channel that holds the
// connection and sends the entry itself, and a channel that opens on
// another replica lists the store (Relay.ChannelOpened). Relay.Send's
// Add, for a channel open elsewhere, notifies (relay.go): a transaction
// that notifies holds a database-wide lock through its commit, WAL flush
// included, so Adds that notify commit one at a time, never sharing a
// flush; the Channel's own messages should not pay that.
func (s *Store) Add(ctx context.Context, e imv2.PendingEntry) error {
	return s.add(ctx, e, false)
}

// add is Add, and with notify it also tells listening replicas (relay.go)
// when the entry goes in, delivered when the batch commits.
func (s *Store) add(ctx context.Context, e imv2.PendingEntry, notify bool) error {
	if err := checkIDs(e.ChannelID, e.Message.MessageID); err != nil {
		return err
	}
	fp := imv2.FingerprintOf(&e.Message)
	msg := appendPending(nil, &e)
	ch, id := []byte(e.ChannelID), []byte(e.Message.MessageID)
	var (
		old, oldMsg []byte
		sec         *int64
		nsec        *int32
		n           int
		inserted    bool
	)
	err := s.batch(ctx, func(b *pgx.Batch) {
		b.Queue("SELECT pg_advisory_xact_lock($1)", channelKey(e.ChannelID))
		// One statement under the channel's lock: the entry goes in when
		// the message_id is not pending and the channel is below the cap,
		// and its notification with it when notify ($10) asks.
		b.Queue(`WITH old AS (
				SELECT fingerprint, created_s, created_ns, message FROM imv2_pending WHERE channel_id = $1 AND message_id = $2),
			cnt AS (
				SELECT count(*) AS n FROM imv2_pending WHERE channel_id = $1),
			ins AS (
				INSERT INTO imv2_pending (channel_id, message_id, fingerprint, created_s, created_ns, message)
				SELECT $1, $2, $3, $4, $5, $6 WHERE NOT EXISTS (SELECT 1 FROM old) AND (SELECT n FROM cnt) < $7
				RETURNING 1)
			SELECT (SELECT fingerprint FROM old), (SELECT created_s FROM old), (SELECT created_ns FROM old),
				(SELECT message FROM old), (SELECT n FROM cnt), EXISTS (SELECT 1 FROM ins),
				CASE WHEN $10 AND EXISTS (SELECT 1 FROM ins) THEN pg_notify($8, $9) END`,
			ch, id, fp[:], e.Created.Unix(), e.Created.Nanosecond(), msg, s.pendingCap, pendingChannel, s.notice(e.ChannelID), notify).
			QueryRow(func(row pgx.Row) error { return row.Scan(&old, &sec, &nsec, &oldMsg, &n, &inserted, nil) })
	})
	switch {
	case err != nil:
		return err
	case old != nil && !bytes.Equal(old, fp[:]) && (sec == nil || nsec == nil || !sameStored(e.ChannelID, *sec, *nsec, oldMsg, fp)):
		return imv2.Errorf(imv2.CodeMessageIDConflict, "message_id %q is pending with other content (M2)", e.Message.MessageID)
	case old == nil && !inserted:
		return imv2.Errorf(imv2.CodePendingFull, "channel %q has %d pending messages, the cap", e.ChannelID, n)
	}
	return nil
}

// Remove implements imv2.PendingStore. Removing a message that is not
// pending is no error.
func (s *Store) Remove(ctx context.Context, channelID, messageID string) error {
	if err := checkIDs(channelID, messageID); err != nil {
		return err
	}
	_, err := s.pool.Exec(ctx, "DELETE FROM imv2_pending WHERE channel_id = $1 AND message_id = $2", []byte(channelID), []byte(messageID))
	if err != nil {
		return fmt.Errorf("pgstore: %w", err)
	}
	return nil
}

// List implements imv2.PendingStore: the channel's entries in Add order.
func (s *Store) List(ctx context.Context, channelID string) ([]imv2.PendingEntry, error) {
	if err := checkChannel(channelID); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, "SELECT created_s, created_ns, message FROM imv2_pending WHERE channel_id = $1 ORDER BY seq", []byte(channelID))
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	var out []imv2.PendingEntry
	var sec int64
	var nsec int32
	var msg []byte
	_, err = pgx.ForEachRow(rows, []any{&sec, &nsec, &msg}, func() error {
		e, err := decodePending(channelID, sec, nsec, msg)
		if err != nil {
			return fmt.Errorf("decode pending entry of channel %q: %w", channelID, err)
		}
		out = append(out, e)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	return out, nil
}

// DropPending forgets every pending entry of a permanently deleted channel
// (S7) without reporting them as failed. The channel's completed records
// are DropChannel's business (S9).
func (s *Store) DropPending(ctx context.Context, channelID string) error {
	if err := checkChannel(channelID); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, "DELETE FROM imv2_pending WHERE channel_id = $1", []byte(channelID)); err != nil {
		return fmt.Errorf("pgstore: %w", err)
	}
	return nil
}

// channelKey is the advisory lock key of one channel's pending queue.
func channelKey(channelID string) int64 {
	h := fnv.New64a()
	h.Write([]byte("imv2 pending\x00"))
	h.Write([]byte(channelID))
	return int64(h.Sum64())
}

// sameStored reports whether the entry stored as msg has the content
// fingerprint fp by the current encoding: the row's fingerprint column may
// hold an earlier encoding's (one that also hashed download_url and
// expires_at), and a message added again with the same content is no
// conflict (S6).
func sameStored(channelID string, sec int64, nsec int32, msg []byte, fp imv2.Fingerprint) bool {
	e, err := decodePending(channelID, sec, nsec, msg)
	return err == nil && imv2.FingerprintOf(&e.Message) == fp
}
