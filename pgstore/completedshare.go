package pgstore

import (
	"bytes"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// Shares of a full store, as imv2's memory store keeps them: the table is
// shared by every channel of every replica, so when it is full a record
// must go for a new one, and taking simply the oldest would let one peer's
// flood of finals push out another channel's record while that channel's
// sender may still resend it (shown again). Each channel holding records
// is guaranteed a share of CompletedCap (CompletedCap over the channels
// holding records), and a record younger than resendHorizon whose channel
// is within its share is protected. Room is made from, in order: the
// oldest records that are not protected (trimOldest); the recording
// channel's own oldest if it is over its share, its new record counted
// (trimOwn: a flood evicts its own records); the oldest of the channel
// holding the most, if that is over its share (trimHog).
//
// Claims do not count against CompletedCap here, so when the table is
// over the cap the channels' counts add up to more than the cap and one
// of these always has a record: no Claim has to be refused (imv2's memory
// store refuses one channel_busy only because its claims share the cap).
// What a trim cannot take without waiting (a row another transaction has
// locked) it leaves, as before: the cap holds up to the Records in
// flight.
//
// Counts: imv2_completed_channels holds each channel's records (a row
// per channel holding some, locked only by that channel's Records and by
// trims that take its records, never waited for by a trim: SKIP LOCKED),
// and the shard rows of imv2_completed_counts also count those rows
// (channels), so the share costs no count over the table.

// The shares are per channel only: imv2's memory store shares per
// connector_id first (imv2.Options.ConnectorID), but a durable store is
// told a channel and a message ID, and its channel registry holds no
// connector_id. Per connector_id here would take the connector_id at
// Record (an exported way to read it from the store call's context, or a
// registry that maps channel to connector_id at Register) and a count
// per connector_id beside the count per channel.

// resendHorizon is how long after its recording a record may still answer
// a resend: a sender keeps a message pending that long at most (imv2's
// default PendingTTL), and its resends stop with it.
const resendHorizon = time.Hour

// trimTotals are the records and the channels holding some, over the
// shards. Parameters of trimOldest: $1 the expiry cutoff, $2
// CompletedCap, $3 how many of the oldest records trimOldest looks at, $4
// the count shard to take removals off, $5 the time at or below which a
// record is past the resend horizon, $6 and $7 the record just made,
// never taken ($7 NULL: none, a Handover's).
const trimTotals = `tot AS (SELECT sum(n)::bigint AS n, greatest(sum(channels), 1)::bigint AS c FROM imv2_completed_counts)`

// trimOldest removes, of the oldest $3 records by seq that no other
// transaction has locked (nor their channel's count), those expired and,
// as many as the count exceeds the cap, those not protected. It looks at
// nothing below the cap unless the oldest record expired.
var trimOldest = trimOldestOf(notJustMade(6, 7))

// trimOldestOf is trimOldest with the test that keeps the record(s) just
// made ($6 and $7).
func trimOldestOf(notMine string) string {
	return `WITH ` + trimTotals + `,
	cand AS (
		SELECT r.seq, r.channel_id, r.recorded_ns, ch.n AS chn FROM (
			SELECT seq, channel_id, recorded_ns FROM imv2_completed
			WHERE ((SELECT n FROM tot) > $2 OR (SELECT recorded_ns FROM imv2_completed ORDER BY seq LIMIT 1) <= $1)
				AND ` + notMine + `
			ORDER BY seq LIMIT $3 FOR UPDATE SKIP LOCKED) r
		JOIN imv2_completed_channels ch ON ch.channel_id = r.channel_id
		FOR UPDATE OF ch SKIP LOCKED),
	free AS (
		SELECT seq, recorded_ns <= $1 AS expired, recorded_ns <= $5 OR chn > $2 / (SELECT c FROM tot) AS unprotected,
			count(*) FILTER (WHERE recorded_ns <= $5 OR chn > $2 / (SELECT c FROM tot)) OVER (ORDER BY seq) AS i
		FROM cand),
	gone AS (
		DELETE FROM imv2_completed r USING free WHERE r.seq = free.seq
			AND (free.expired OR (free.unprotected AND free.i <= (SELECT n FROM tot) - $2))
		RETURNING r.channel_id),
	per AS (SELECT channel_id, count(*) AS k FROM gone GROUP BY channel_id),
	chs AS (UPDATE imv2_completed_channels c SET n = c.n - per.k FROM per WHERE c.channel_id = per.channel_id)
	UPDATE imv2_completed_counts SET n = n - (SELECT count(*) FROM gone) WHERE shard = $4`
}

// trimOwn removes the recording channel's oldest records, as many as the
// count still exceeds the cap, if the channel holds more than its share.
// $1 CompletedCap, $2 the count shard, $3 and $4 the record just made
// ($4 NULL: none).
const trimOwn = `WITH ` + trimTotals + `,
	pick AS (
		SELECT seq FROM imv2_completed
		WHERE channel_id = $3 AND message_id IS DISTINCT FROM $4::bytea AND (SELECT n FROM tot) > $1
			AND (SELECT n FROM imv2_completed_channels WHERE channel_id = $3) > $1 / (SELECT c FROM tot)
		ORDER BY seq LIMIT greatest((SELECT n FROM tot) - $1, 0) FOR UPDATE SKIP LOCKED),
	gone AS (DELETE FROM imv2_completed r USING pick WHERE r.seq = pick.seq RETURNING 1),
	chs AS (UPDATE imv2_completed_channels SET n = n - (SELECT count(*) FROM gone)
		WHERE channel_id = $3 AND EXISTS (SELECT 1 FROM gone))
	UPDATE imv2_completed_counts SET n = n - (SELECT count(*) FROM gone) WHERE shard = $2`

// trimHog removes the oldest records of the channel holding the most (of
// those whose count no other transaction has locked), as many as the
// count still exceeds the cap, if it holds more than its share.
// Parameters as trimOwn's.
var trimHog = trimHogOf(notJustMade(3, 4))

// trimHogOf is trimHog with the test that keeps the record(s) just made
// ($3 and $4).
func trimHogOf(notMine string) string {
	return `WITH ` + trimTotals + `,
	hog AS (
		SELECT channel_id, n FROM imv2_completed_channels WHERE (SELECT n FROM tot) > $1
		ORDER BY n DESC LIMIT 1 FOR UPDATE SKIP LOCKED),
	pick AS (
		SELECT seq FROM imv2_completed
		WHERE channel_id = (SELECT channel_id FROM hog) AND (SELECT n FROM hog) > $1 / (SELECT c FROM tot)
			AND ` + notMine + `
		ORDER BY seq LIMIT greatest((SELECT n FROM tot) - $1, 0) FOR UPDATE SKIP LOCKED),
	gone AS (DELETE FROM imv2_completed r USING pick WHERE r.seq = pick.seq RETURNING 1),
	chs AS (UPDATE imv2_completed_channels SET n = n - (SELECT count(*) FROM gone)
		WHERE channel_id = (SELECT channel_id FROM hog) AND EXISTS (SELECT 1 FROM gone))
	UPDATE imv2_completed_counts SET n = n - (SELECT count(*) FROM gone) WHERE shard = $2`
}

// notJustMade is the trims' test that a record is not the one a Record
// just made, channel $a and message $b ($b NULL: none, a Handover's).
func notJustMade(a, b int) string {
	return fmt.Sprintf("(channel_id, message_id) IS DISTINCT FROM ($%d::bytea, $%d::bytea)", a, b)
}

// notGroupMade is the trims' test that a record is none of those a group
// of Records just made, the arrays $a (channels) and $b (messages). The
// trims' SKIP LOCKED skips no row of their own transaction, so without it
// a group's trims could take its own new records.
func notGroupMade(a, b int) string {
	return fmt.Sprintf("NOT EXISTS (SELECT 1 FROM unnest($%d::bytea[], $%d::bytea[]) AS m(ch, id) WHERE m.ch = channel_id AND m.id = message_id)", a, b)
}

// Group forms of the trims (groupcommit.go): trimOldest and trimHog
// keeping every record of the group, and trimOwnGroup.
var (
	trimOldestGroup = trimOldestOf(notGroupMade(6, 7))
	trimHogGroup    = trimHogOf(notGroupMade(3, 4))
)

// trimOwnGroup is trimOwn for the channels of a group of Records ($3,
// an array): of those channels over their share, their oldest records
// other than the group's ($4 and $5 as notGroupMade's), oldest first, as
// many as the count still exceeds the cap. Each channel's count row is
// already locked by the group's own records, so it waits for none.
var trimOwnGroup = `WITH ` + trimTotals + `,
	pick AS (
		SELECT p.seq FROM unnest($3::bytea[]) AS g(ch) CROSS JOIN LATERAL (
			SELECT seq FROM imv2_completed
			WHERE channel_id = g.ch AND ` + notGroupMade(4, 5) + ` AND (SELECT n FROM tot) > $1
				AND (SELECT cc.n FROM imv2_completed_channels cc WHERE cc.channel_id = g.ch) > $1 / (SELECT c FROM tot)
			ORDER BY seq LIMIT greatest((SELECT n FROM tot) - $1, 0) FOR UPDATE SKIP LOCKED) p
		ORDER BY p.seq LIMIT greatest((SELECT n FROM tot) - $1, 0)),
	gone AS (DELETE FROM imv2_completed r USING pick WHERE r.seq = pick.seq RETURNING r.channel_id),
	per AS (SELECT channel_id, count(*) AS k FROM gone GROUP BY channel_id),
	chs AS (UPDATE imv2_completed_channels c SET n = c.n - per.k FROM per WHERE c.channel_id = per.channel_id)
	UPDATE imv2_completed_counts SET n = n - (SELECT count(*) FROM gone) WHERE shard = $2`

// dropEmptyChannels removes up to $1 count rows of channels that hold no
// record any more and that no other transaction has locked (a Record
// adding to one), and takes them off shard $2's channels.
const dropEmptyChannels = `WITH z AS (
		DELETE FROM imv2_completed_channels WHERE channel_id IN (
			SELECT channel_id FROM imv2_completed_channels WHERE n <= 0 LIMIT $1 FOR UPDATE SKIP LOCKED)
		RETURNING 1)
	UPDATE imv2_completed_counts SET channels = channels - (SELECT count(*) FROM z) WHERE shard = $2 AND EXISTS (SELECT 1 FROM z)`

// queueTrim queues the trims after a Record of (ch, id) or a Handover to
// ch (id nil) that looks at window of the oldest records.
func (s *Store) queueTrim(b *pgx.Batch, now int64, ch, id []byte, window int64, shard int) {
	cutoff := now - s.ttl.Nanoseconds()
	horizon := now - min(s.ttl, resendHorizon).Nanoseconds()
	b.Queue(trimOldest, cutoff, s.completedCap, window, shard, horizon, ch, id)
	b.Queue(trimOwn, s.completedCap, shard, ch, id)
	b.Queue(trimHog, s.completedCap, shard, ch, id)
	b.Queue(dropEmptyChannels, window, shard)
}

// queueGroupTrim queues the trims after a group of Records of the
// messages (chs[i], ids[i]) that looks at window of the oldest records:
// each trim once for the group, every record of the group kept, and
// trimOwn for each of its channels over its share.
func (s *Store) queueGroupTrim(b *pgx.Batch, now int64, chs, ids [][]byte, window int64, shard int) {
	cutoff := now - s.ttl.Nanoseconds()
	horizon := now - min(s.ttl, resendHorizon).Nanoseconds()
	own := slices.Clone(chs)
	slices.SortFunc(own, bytes.Compare)
	own = slices.CompactFunc(own, bytes.Equal)
	b.Queue(trimOldestGroup, cutoff, s.completedCap, window, shard, horizon, chs, ids)
	b.Queue(trimOwnGroup, s.completedCap, shard, own, chs, ids)
	b.Queue(trimHogGroup, s.completedCap, shard, chs, ids)
	b.Queue(dropEmptyChannels, window, shard)
}

// countChannel is the statement that adds $2 records to channel $1's
// count, and a new channel to shard $3's channels.
const countChannel = `WITH c AS (
		INSERT INTO imv2_completed_channels (channel_id, n) SELECT $1, $2::bigint WHERE $2::bigint > 0
		ON CONFLICT (channel_id) DO UPDATE SET n = imv2_completed_channels.n + EXCLUDED.n
		RETURNING xmax = 0 AS added)
	UPDATE imv2_completed_counts SET channels = channels + 1 WHERE shard = $3 AND (SELECT added FROM c)`
