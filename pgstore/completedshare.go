package pgstore

import (
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Shares of a full store, as imv2's memory store and boltstore keep
// them: the table is shared by every channel of every replica, so when it
// is full a record must go for a new one, and taking simply the oldest
// would let one peer's flood of finals push out another channel's record
// while that channel's sender may still resend it (shown again). Each
// group of channels holding records (a connector_id, read from the
// Record's context: the Channel puts its Options.ConnectorID there;
// channels of none form one group) is guaranteed a share of CompletedCap
// (CompletedCap over the groups holding records), and each of its
// channels a share of that (the group's share over its channels): a peer
// opening many channels dilutes its own channels' shares, not another
// connector_id's. A channel's group is the one of the Record that made
// its count row, kept while the row lives (unlike boltstore, a channel of
// none does not move to a connector_id a later Record carries: that would
// take the old group's row too). A record younger than resendHorizon
// whose channel is within its share is protected. Room is made from, in
// order: the oldest records that are not protected (trimOldest); the
// recording channel's own oldest if it is over its share, its new record
// counted (trimOwn: a flood evicts its own records); the oldest of the
// channel most over its share, of each group's largest (trimHog).
//
// Claims do not count against CompletedCap here, so when the table is
// over the cap the channels' counts add up to more than the cap and one
// of these always has a record: no Claim has to be refused (imv2's memory
// store refuses one channel_busy only because its claims share the cap).
// What a trim cannot take without waiting (a row another transaction has
// locked) it leaves, as before: the cap holds up to the Records in
// flight. A trim that removes nothing writes nothing, not even its count
// shard's row (a row version every sum over the shards reads until it is
// pruned).
//
// Counts: imv2_completed_channels holds each channel's records and group
// (a row per channel holding some, locked only by that channel's Records
// and by trims that take its records, never waited for by a trim: SKIP
// LOCKED); imv2_completed_groups holds each group's channels, on rows per
// count shard (a channel joins on the row of its Record's shard, so no
// row is written by every Record adding a channel; a group's channels are
// the sum of its rows); the shard rows of imv2_completed_counts count the
// channel rows (channels). So the shares cost no count over the records;
// the groups holding channels are counted from the group rows, only where
// a share is needed (a full table with a young record to weigh).

// resendHorizon is how long after its recording a record may still answer
// a resend: a sender keeps a message pending that long at most (imv2's
// default PendingTTL), and its resends stop with it.
const resendHorizon = time.Hour

// trimTotals are the records, over the shards, and the groups holding
// channels (grps, read only where a share is). Parameters of trimOldest:
// $1 the expiry cutoff, $2 CompletedCap, $3 how many of the oldest
// records trimOldest looks at, $4 the count shard to take removals off,
// $5 the time at or below which a record is past the resend horizon, $6
// and $7 the record just made, never taken ($7 NULL: none, a Handover's).
const trimTotals = `tot AS (SELECT sum(n)::bigint AS n FROM imv2_completed_counts),
	grps AS (SELECT greatest(count(*), 1)::bigint AS g FROM (
		SELECT 1 FROM imv2_completed_groups GROUP BY connector_id HAVING sum(channels) > 0) x)`

// shareOf is the share, of a cap of cap, of a channel of group cid: the
// cap over the groups holding channels, over the group's channels; 0 (no
// record protected) for a group the counts do not know.
func shareOf(cap, cid string) string {
	return `coalesce((SELECT ` + cap + ` / (SELECT g FROM grps) / greatest(sum(gr.channels), 1)
		FROM imv2_completed_groups gr WHERE gr.connector_id = ` + cid + ` HAVING count(*) > 0), 0)`
}

// trimOldest removes, of the oldest $3 records by seq that no other
// transaction has locked (nor their channel's count), those expired and,
// as many as the count exceeds the cap, those not protected. It looks at
// nothing below the cap unless the oldest record expired.
var trimOldest = trimOldestOf(notJustMade(6, 7))

// trimOldestOf is trimOldest with the test that keeps the record(s) just
// made (notJustMade of $6 and $7, or notGroupMade).
func trimOldestOf(notMine string) string {
	return `WITH ` + trimTotals + `,
	cand AS (
		SELECT r.seq, r.channel_id, r.recorded_ns, ch.n AS chn, ch.connector_id AS cid FROM (
			SELECT seq, channel_id, recorded_ns FROM imv2_completed
			WHERE ((SELECT n FROM tot) > $2 OR (SELECT recorded_ns FROM imv2_completed ORDER BY seq LIMIT 1) <= $1)
				AND ` + notMine + `
			ORDER BY seq LIMIT $3 FOR UPDATE SKIP LOCKED) r
		JOIN imv2_completed_channels ch ON ch.channel_id = r.channel_id
		FOR UPDATE OF ch SKIP LOCKED),
	judged AS (
		SELECT seq, recorded_ns <= $1 AS expired, recorded_ns <= $5 OR chn > ` + shareOf("$2", "cand.cid") + ` AS unprotected
		FROM cand),
	free AS (
		SELECT seq, expired, unprotected, count(*) FILTER (WHERE unprotected) OVER (ORDER BY seq) AS i
		FROM judged),
	gone AS (
		DELETE FROM imv2_completed r USING free WHERE r.seq = free.seq
			AND (free.expired OR (free.unprotected AND free.i <= (SELECT n FROM tot) - $2))
		RETURNING r.channel_id),
	per AS (SELECT channel_id, count(*) AS k FROM gone GROUP BY channel_id),
	chs AS (UPDATE imv2_completed_channels c SET n = c.n - per.k FROM per WHERE c.channel_id = per.channel_id)
	UPDATE imv2_completed_counts SET n = n - (SELECT count(*) FROM gone) WHERE shard = $4 AND EXISTS (SELECT 1 FROM gone)`
}

// trimOwn removes the recording channel's oldest records, as many as the
// count still exceeds the cap, if the channel holds more than its share.
// $1 CompletedCap, $2 the count shard, $3 and $4 the record just made
// ($4 NULL: none).
var trimOwn = `WITH ` + trimTotals + `,
	pick AS (
		SELECT seq FROM imv2_completed
		WHERE channel_id = $3 AND message_id IS DISTINCT FROM $4::bytea AND (SELECT n FROM tot) > $1
			AND (SELECT cc.n > ` + shareOfOwn + ` FROM imv2_completed_channels cc WHERE cc.channel_id = $3)
		ORDER BY seq LIMIT greatest((SELECT n FROM tot) - $1, 0) FOR UPDATE SKIP LOCKED),
	gone AS (DELETE FROM imv2_completed r USING pick WHERE r.seq = pick.seq RETURNING 1),
	chs AS (UPDATE imv2_completed_channels SET n = n - (SELECT count(*) FROM gone)
		WHERE channel_id = $3 AND EXISTS (SELECT 1 FROM gone))
	UPDATE imv2_completed_counts SET n = n - (SELECT count(*) FROM gone) WHERE shard = $2 AND EXISTS (SELECT 1 FROM gone)`

// shareOfOwn is the share of the channel row cc, of CompletedCap $1.
var shareOfOwn = shareOf("$1", "cc.connector_id")

// hogCandidates is how many of each group's largest channels trimHog
// weighs, so a few locked by Records under way do not hide the group.
const hogCandidates = 8

// trimHog removes the oldest records of the channel most over its share
// (of each group's largest channels, those whose count no other
// transaction has locked), as many as the count still exceeds the cap.
// It reads the groups' rows and an index per group, only when the count
// is over the cap after trimOldest and trimOwn. Parameters as trimOwn's.
var trimHog = trimHogOf(notJustMade(3, 4))

// trimHogOf is trimHog with the test that keeps the record(s) just made
// (notJustMade of $3 and $4, or notGroupMade).
func trimHogOf(notMine string) string {
	return `WITH ` + trimTotals + `,
	hog AS (
		SELECT c.channel_id, c.n, h.share FROM (
			SELECT t.channel_id, t.n - s.share AS over, s.share FROM (
				SELECT connector_id, sum(channels) AS chans FROM imv2_completed_groups WHERE (SELECT n FROM tot) > $1
				GROUP BY connector_id HAVING sum(channels) > 0) gr
			CROSS JOIN LATERAL (SELECT $1 / (SELECT g FROM grps) / gr.chans AS share) s
			CROSS JOIN LATERAL (
				SELECT cc.channel_id, cc.n FROM imv2_completed_channels cc WHERE cc.connector_id = gr.connector_id
				ORDER BY cc.n DESC LIMIT ` + fmt.Sprint(hogCandidates) + `) t
			WHERE t.n > s.share) h
		JOIN imv2_completed_channels c ON c.channel_id = h.channel_id
		ORDER BY h.over DESC LIMIT 1 FOR UPDATE OF c SKIP LOCKED),
	pick AS (
		SELECT seq FROM imv2_completed
		WHERE channel_id = (SELECT channel_id FROM hog) AND (SELECT n FROM hog) > (SELECT share FROM hog)
			AND ` + notMine + `
		ORDER BY seq LIMIT greatest((SELECT n FROM tot) - $1, 0) FOR UPDATE SKIP LOCKED),
	gone AS (DELETE FROM imv2_completed r USING pick WHERE r.seq = pick.seq RETURNING 1),
	chs AS (UPDATE imv2_completed_channels SET n = n - (SELECT count(*) FROM gone)
		WHERE channel_id = (SELECT channel_id FROM hog) AND EXISTS (SELECT 1 FROM gone))
	UPDATE imv2_completed_counts SET n = n - (SELECT count(*) FROM gone) WHERE shard = $2 AND EXISTS (SELECT 1 FROM gone)`
}

// notJustMade is the trims' test that a record is not the one a Record
// just made, channel $a and message $b ($b NULL: none, a Handover's).
func notJustMade(a, b int) string {
	return fmt.Sprintf("(channel_id, message_id) IS DISTINCT FROM ($%d::bytea, $%d::bytea)", a, b)
}

// notGroupMade is the trims' test that a record is none of those a group
// of Records just made: not a row version its own transaction wrote
// (xmin), since the group's records are the only ones the transaction
// writes. The trims' SKIP LOCKED skips no row of their own transaction,
// so without it a group's trims could take its own new records. It costs
// no parameter (the group's arrays again, per trim) and no search of them
// per record weighed.
const notGroupMade = "xmin <> (SELECT pg_current_xact_id()::xid)"

// Group forms of the trims (groupcommit.go): trimOldest and trimHog
// keeping every record of the group, and trimOwnGroup. trimOldestGroup
// takes trimOldest's first five parameters, trimHogGroup trimHog's
// first two.
var (
	trimOldestGroup = trimOldestOf(notGroupMade)
	trimHogGroup    = trimHogOf(notGroupMade)
)

// trimOwnGroup is trimOwn for the channels of a group of Records ($3,
// an array): of those channels over their share, their oldest records
// other than the group's (notGroupMade), oldest first, as many as the
// count still exceeds the cap. Each channel's count row is already
// locked by the group's own records, so it waits for none.
var trimOwnGroup = `WITH ` + trimTotals + `,
	pick AS (
		SELECT p.seq FROM unnest($3::bytea[]) AS g(ch) CROSS JOIN LATERAL (
			SELECT seq FROM imv2_completed
			WHERE channel_id = g.ch AND ` + notGroupMade + ` AND (SELECT n FROM tot) > $1
				AND (SELECT cc.n > ` + shareOfOwn + ` FROM imv2_completed_channels cc WHERE cc.channel_id = g.ch)
			ORDER BY seq LIMIT greatest((SELECT n FROM tot) - $1, 0) FOR UPDATE SKIP LOCKED) p
		ORDER BY p.seq LIMIT greatest((SELECT n FROM tot) - $1, 0)),
	gone AS (DELETE FROM imv2_completed r USING pick WHERE r.seq = pick.seq RETURNING r.channel_id),
	per AS (SELECT channel_id, count(*) AS k FROM gone GROUP BY channel_id),
	chs AS (UPDATE imv2_completed_channels c SET n = c.n - per.k FROM per WHERE c.channel_id = per.channel_id)
	UPDATE imv2_completed_counts SET n = n - (SELECT count(*) FROM gone) WHERE shard = $2 AND EXISTS (SELECT 1 FROM gone)`

// dropEmptyChannels removes up to $1 count rows of channels that hold no
// record any more and that no other transaction has locked (a Record
// adding to one), and takes them off a row of their group that no other
// transaction has locked (a Record adding a channel to it) and off shard
// $2's channels. It waits for no row but the shard's, so it may come
// after any other statement of a Record.
const dropEmptyChannels = `WITH e AS (
		SELECT c.channel_id, g.connector_id, g.shard FROM imv2_completed_channels c
		CROSS JOIN LATERAL (SELECT gr.connector_id, gr.shard FROM imv2_completed_groups gr
			WHERE gr.connector_id = c.connector_id LIMIT 1 FOR UPDATE SKIP LOCKED) g
		WHERE c.n <= 0 LIMIT $1 FOR UPDATE OF c SKIP LOCKED),
	z AS (DELETE FROM imv2_completed_channels c USING e WHERE c.channel_id = e.channel_id RETURNING e.connector_id, e.shard),
	per AS (SELECT connector_id, shard, count(*) AS k FROM z GROUP BY connector_id, shard),
	gs AS (UPDATE imv2_completed_groups gr SET channels = gr.channels - per.k FROM per
		WHERE gr.connector_id = per.connector_id AND gr.shard = per.shard)
	UPDATE imv2_completed_counts SET channels = channels - (SELECT count(*) FROM z)
	WHERE shard = $2 AND EXISTS (SELECT 1 FROM z)`

// dropEmptyGroups removes the group rows counting no channel that no
// other transaction has locked; a Record adding a channel makes one again.
const dropEmptyGroups = `DELETE FROM imv2_completed_groups WHERE (connector_id, shard) IN (
	SELECT connector_id, shard FROM imv2_completed_groups WHERE channels = 0 FOR UPDATE SKIP LOCKED)`

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

// queueGroupTrim queues the trims after a group of Records to the
// channels own (each once) that looks at window of the oldest records:
// each trim once for the group, every record of the group kept, and
// trimOwn for each of its channels over its share.
func (s *Store) queueGroupTrim(b *pgx.Batch, now int64, own byteaArray, window int64, shard int) {
	cutoff := now - s.ttl.Nanoseconds()
	horizon := now - min(s.ttl, resendHorizon).Nanoseconds()
	b.Queue(trimOldestGroup, cutoff, s.completedCap, window, shard, horizon)
	b.Queue(trimOwnGroup, s.completedCap, shard, own)
	b.Queue(trimHogGroup, s.completedCap, shard)
	b.Queue(dropEmptyChannels, window, shard)
}

// countNewChannels is the tail of the statements that add records to
// channels: given a CTE ch of the channel rows they wrote (connector_id,
// added: the row is new), it adds the new channels to their groups' rows
// of the statement's count shard (shard, a parameter), in connector_id
// order. A group's channels are the sum of its rows: a Record adding a
// channel waits only on a row of the shard row it takes next anyway.
func countNewChannels(shard string) string {
	return `
	newch AS (SELECT connector_id, count(*) AS k FROM ch WHERE added GROUP BY connector_id),
	grp AS (
		INSERT INTO imv2_completed_groups (connector_id, shard, channels) SELECT connector_id, ` + shard + `, k FROM newch ORDER BY connector_id
		ON CONFLICT (connector_id, shard) DO UPDATE SET channels = imv2_completed_groups.channels + EXCLUDED.channels
		RETURNING 1)`
}

// The statements ending in countNewChannels read grp in their shard row's
// WHERE: a data-modifying WITH no one reads runs after the main
// statement, which would lock the shard row before the group row.

// countChannel is the statement that adds $2 records to channel $1's
// count, a new channel to group $4's channels (empty or NULL: none) and
// to shard $3's channels.
var countChannel = `WITH ch AS (
		INSERT INTO imv2_completed_channels (channel_id, n, connector_id) SELECT $1, $2::bigint, coalesce($4::bytea, '\x') WHERE $2::bigint > 0
		ON CONFLICT (channel_id) DO UPDATE SET n = imv2_completed_channels.n + EXCLUDED.n
		RETURNING connector_id, xmax = 0 AS added),` + countNewChannels("$3::int") + `
	UPDATE imv2_completed_counts SET channels = channels + (SELECT count(*) FROM ch WHERE added)
	WHERE shard = $3 AND (SELECT count(*) FROM grp) >= 0 AND (SELECT count(*) FROM ch WHERE added) > 0`
