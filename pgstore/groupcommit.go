package pgstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/xagentkit/imv2"
)

// maxGroup bounds the calls that share one transaction, so one commit's
// work (and the wait of the calls queued behind it) stays short, and so
// do the advisory locks it holds (one per call) in the server's shared
// lock table (max_locks_per_transaction × max_connections slots).
const maxGroup = 128

// maxGroupsInFlight is how many groups run at once, each on its own
// pooled connection: while one waits for its WAL flush, the next is
// executed, and PostgreSQL flushes their commits together.
const maxGroupsInFlight = 2

// groupCommit lets concurrent Claims, Records and Begins of different
// messages share one transaction: one round trip, one multi-row statement per kind
// (one statement per Begin, beginSQL),
// one commit and WAL flush. There is no timer: a call that finds fewer
// than maxGroupsInFlight groups running runs at once, alone; calls that
// arrive while they run queue, and the first of them leads the next group
// for all of them (at most maxGroup, one call per message). So one
// channel's calls pay what they paid before, and under load a call waits
// at most for the groups under way plus its own. Every call returns after
// the commit that holds its write.
//
// A group takes the advisory locks of all its messages, in key order (so
// two groups, on any replica, cannot deadlock on them), before its
// statements take their snapshots: as with one call, each message's
// Claim, Record and Release are serialised across replicas and each sees
// the others' committed result, never a half. Calls of one message never
// share a group (the later waits for the next), so each row of a
// statement is one message, decided as the single-call statement decided
// it. Row outcomes are per call: a claim held by another, a completed
// record and an acquisition are all answers, not failures; only a failure
// of the statement itself (the database away, a deadlock with a Sweep,
// retried) fails the group's calls.
type groupCommit struct {
	mu      sync.Mutex
	queue   []*groupCall // calls not yet in a group, oldest first
	running int          // groups under way; maxGroupsInFlight whenever queue is not empty
	commits atomic.Int64 // groups committed, for the tests
}

// groupCall is one Claim, Record or Begin: its arguments, and its outcome
// once its group is done.
type groupCall struct {
	ctx    context.Context
	record bool // a Record
	begin  bool // a Begin; neither: a Claim
	ch, id string
	conn   string // Record: the connector_id on its context (its group)
	key    int64
	fp     imv2.Fingerprint
	owner  string        // Claim, Begin
	lease  time.Duration // Claim

	claim imv2.Claim
	err   error
	// lead receives true when this call is to run the next group (group),
	// false when its group is done and claim and err are its outcome.
	lead  chan bool
	group []*groupCall
}

// do runs c in a group and returns when the group's transaction is
// committed (or failed).
func (s *Store) do(c *groupCall) {
	g := &s.group
	c.key = messageKey(c.ch, c.id)
	c.lead = leadChans.Get().(chan bool)
	// Each lead receives one value at most (a call is in one group), so
	// once c has its answer, or runs its group, nothing sends on it.
	defer leadChans.Put(c.lead)
	g.mu.Lock()
	g.queue = append(g.queue, c)
	var group []*groupCall
	if g.running < maxGroupsInFlight {
		// Calls queue only while every group slot is taken: c is alone.
		g.running++
		group = g.take()
	}
	g.mu.Unlock()
	if group == nil {
		if !<-c.lead {
			return
		}
		group = c.group
	}

	// Whatever happens, even a panic, the next group gets a leader and
	// the others of this one their outcome.
	defer func() {
		g.mu.Lock()
		if len(g.queue) > 0 {
			next := g.take()
			next[0].group = next
			next[0].lead <- true
		} else {
			g.running--
			g.queue = nil // let the old backing array go
		}
		g.mu.Unlock()
		for _, o := range group[1:] {
			o.lead <- false
		}
	}()
	for _, o := range group {
		o.err = errGroupAbandoned
	}
	s.runGroup(group)
}

// leadChans are groupCall.lead channels (buffered, 1) that no one sends
// on any more: making one per call was 13% of do's CPU time in the
// profile of BenchmarkConnectorMessages/receive/postgres/ch-100.
var leadChans = sync.Pool{New: func() any { return make(chan bool, 1) }}

// take removes the next group from the queue and returns it: the oldest
// call, and the calls after it up to maxGroup, except those of a message
// already in the group, which stay queued in order. g.mu is held.
func (g *groupCommit) take() []*groupCall {
	group := make([]*groupCall, 0, min(len(g.queue), maxGroup))
	var keys map[int64]bool
	if len(g.queue) > 1 {
		keys = make(map[int64]bool, len(g.queue))
	}
	rest := g.queue[:0]
	for _, o := range g.queue {
		if len(group) < maxGroup && !keys[o.key] {
			if keys != nil {
				keys[o.key] = true
			}
			group = append(group, o)
		} else {
			rest = append(rest, o)
		}
	}
	clear(g.queue[len(rest):])
	g.queue = rest
	return group
}

// errGroupAbandoned is the outcome of the calls whose group never
// finished (a panic in its leader).
var errGroupAbandoned = fmt.Errorf("pgstore: the transaction shared with this call was abandoned")

// runGroup runs group's calls in one transaction and sets each call's
// outcome. Its context ends when every call's has: one caller giving up
// does not fail the others. A call alone runs the single-message
// statements (claimOne, recordOne), which decide as the group's do.
func (s *Store) runGroup(group []*groupCall) {
	if len(group) == 1 {
		c := group[0]
		switch {
		case c.record:
			c.err = s.recordOne(c.ctx, c.ch, c.id, c.conn, c.fp, nil)
		case c.begin:
			c.err = s.batch(c.ctx, func(b *pgx.Batch) { queueBegin(b, c) })
		default:
			c.claim, c.err = s.claimOne(c.ctx, c.ch, c.id, c.fp, c.owner, c.lease)
		}
		if c.err == nil {
			s.group.commits.Add(1)
		}
		return
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(group[0].ctx))
	defer cancel()
	var live atomic.Int64
	live.Store(int64(len(group)))
	for _, c := range group {
		stop := context.AfterFunc(c.ctx, func() {
			if live.Add(-1) == 0 {
				cancel()
			}
		})
		defer stop()
	}
	var claims, records, begins []*groupCall
	keys := make([]int64, len(group))
	for i, c := range group {
		keys[i] = c.key
		switch {
		case c.record:
			records = append(records, c)
		case c.begin:
			begins = append(begins, c)
		default:
			claims = append(claims, c)
		}
	}
	slices.Sort(keys)
	var found []claimRow
	err := s.batch(ctx, func(b *pgx.Batch) {
		// unnest yields the array in order: the locks are taken in key
		// order.
		b.Queue("SELECT pg_advisory_xact_lock(k) FROM unnest($1::bigint[]) AS k", keys)
		if len(claims) > 0 {
			found = found[:0]
			s.queueClaims(b, claims, &found)
		}
		if len(records) > 0 {
			now := s.nowNS()
			s.queueRecords(b, records, now, now-s.ttl.Nanoseconds())
		}
		for _, c := range begins {
			queueBegin(b, c)
		}
	})
	if err != nil {
		for _, c := range group {
			c.err = err
		}
		return
	}
	s.group.commits.Add(1)
	for _, c := range records {
		c.err = nil
	}
	for _, c := range begins {
		c.err = nil
	}
	for _, c := range claims {
		c.err = errNoOutcome // until its row says otherwise
	}
	for _, r := range found {
		if r.i < 1 || int(r.i) > len(claims) {
			continue
		}
		c := claims[r.i-1]
		c.claim, c.err = r.outcome()
	}
	for _, c := range claims {
		if c.err == errNoOutcome {
			c.err = fmt.Errorf("pgstore: Claim: no outcome for message %q", c.id)
		}
	}
}

// errNoOutcome marks a claim of a group its statement has not answered
// yet; one the statement never answers gets an error naming its message.
var errNoOutcome = errors.New("pgstore: Claim: no outcome")

// claimRow is what the claim statement found for one message: its live
// completed record's fingerprint, the claim there was before, and whether
// the statement wrote the call's claim.
type claimRow struct {
	i           int64 // 1-based, the call's place in the claims
	now         int64 // the lease clock's time (leaseNow)
	done, oldFP []byte
	oldOwner    *string
	oldUntil    *int64
	wrote       bool
	unposted    bool // the claim taken over had not begun its post
}

// claimGroup decides and writes the claims of many messages in one
// statement, row by row as claimSQL (Claim's) does. Its snapshot is taken
// after the group's advisory locks, so it sees every committed Record and
// claim of its messages. A claim is written when there is no live record
// and either no claim (acquired) or one whose lease ended or that is the
// owner's own (a takeover: owner and lease change, the fingerprint stays
// the interrupted attempt's). Parameters: the arrays $1 channel, $2
// message, $3 owner, $4 lease length in ns, $5 fingerprint; $6 the record
// cutoff (now - TTL), $7 leaseNowArg.
//
// What it wrote decides the answer, not what it read: a takeover locks
// the claim's row (FOR UPDATE), which waits for a RenewClaim under way and
// then rechecks the lease on the row as renewed, so a renewal committed
// after the snapshot leaves nothing to take over and the claim is held;
// a renewal after the lock finds the owner changed.
//
// Every row is found by a subquery per message, an index lookup, and the
// claims taken over are updated by their row address (a TID scan): as
// joins, the planner hashes the input and scans the whole table once the
// table's statistics say it is small, a cost that grows with it.
var claimGroup = `WITH t AS (SELECT ` + leaseNow(7) + ` AS now),
	input AS MATERIALIZED (
		SELECT g.*,
			(SELECT c.fingerprint FROM imv2_completed c
				WHERE c.channel_id = g.ch AND c.message_id = g.id AND c.recorded_ns > $6) AS done,
			(SELECT c FROM imv2_claims c WHERE c.channel_id = g.ch AND c.message_id = g.id) AS old
		FROM unnest($1::bytea[], $2::bytea[], $3::text[], $4::bigint[], $5::bytea[])
			WITH ORDINALITY AS g(ch, id, owner, lease, fp, i)),
	takeover AS MATERIALIZED (
		SELECT i, owner, lease,
			(SELECT c.ctid FROM imv2_claims c WHERE c.channel_id = input.ch AND c.message_id = input.id
				AND (c.until_ns <= (SELECT now FROM t) OR c.owner = input.owner) FOR UPDATE) AS row
		FROM input
		WHERE done IS NULL AND (old).owner IS NOT NULL),
	ins AS (
		INSERT INTO imv2_claims (channel_id, message_id, owner, until_ns, fingerprint, unposted_by)
		SELECT ch, id, owner, (SELECT now FROM t) + lease, fp, owner FROM input WHERE done IS NULL AND (old).owner IS NULL
		RETURNING channel_id, message_id),
	upd AS (
		UPDATE imv2_claims c SET owner = takeover.owner, until_ns = (SELECT now FROM t) + takeover.lease,
			` + takeUnposted("c", "takeover.owner") + ` FROM takeover
		WHERE c.ctid = ANY (ARRAY(SELECT row FROM takeover WHERE row IS NOT NULL)) AND c.ctid = takeover.row
		RETURNING takeover.i, c.unposted_by IS NOT NULL AS unposted)
	SELECT i, done, (old).owner, (old).until_ns, (old).fingerprint, (SELECT now FROM t),
		i IN (SELECT i FROM upd) OR (ch, id) IN (SELECT channel_id, message_id FROM ins),
		coalesce((SELECT unposted FROM upd WHERE upd.i = input.i), false)
	FROM input`

func (s *Store) queueClaims(b *pgx.Batch, claims []*groupCall, found *[]claimRow) {
	n := len(claims)
	chs, ids, fps := make(byteaArray, n), make(byteaArray, n), make(byteaArray, n)
	owners, leases := make([]string, n), make([]int64, n)
	for i, c := range claims {
		chs[i], ids[i], fps[i] = []byte(c.ch), []byte(c.id), c.fp[:]
		owners[i], leases[i] = c.owner, c.lease.Nanoseconds()
	}
	b.Queue(claimGroup, chs, ids, owners, leases, fps, s.cutoff(), s.leaseNowArg()).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var r claimRow
			if err := rows.Scan(&r.i, &r.done, &r.oldOwner, &r.oldUntil, &r.oldFP, &r.now, &r.wrote, &r.unposted); err != nil {
				return err
			}
			*found = append(*found, r)
		}
		return rows.Err()
	})
}

// outcome is the Claim this row means, as claimOne answers.
func (r claimRow) outcome() (imv2.Claim, error) {
	switch {
	case r.done != nil:
		out := imv2.Claim{State: imv2.ClaimCompleted}
		if len(r.done) != len(out.Fingerprint) {
			return imv2.Claim{}, fmt.Errorf("pgstore: completed record has a %d-byte fingerprint", len(r.done))
		}
		copy(out.Fingerprint[:], r.done)
		return out, nil
	case r.wrote && r.oldOwner == nil:
		return imv2.Claim{State: imv2.ClaimAcquired}, nil
	case r.wrote:
		out := imv2.Claim{State: imv2.ClaimOrphaned, Owner: *r.oldOwner, Unposted: r.unposted}
		copy(out.Fingerprint[:], r.oldFP)
		return out, nil
	case r.oldOwner != nil && r.oldUntil != nil:
		return imv2.Claim{State: imv2.ClaimHeld, Owner: *r.oldOwner, Until: time.Unix(0, max(*r.oldUntil, r.now+1))}, nil
	default:
		return imv2.Claim{}, errors.New("pgstore: Claim wrote no claim and found none")
	}
}

// recordGroup writes the completed records of many messages in one
// statement, as Record's statement does each: a new record (xmax = 0
// marks a row inserted rather than updated) counts on its channel's count
// row and on count shard $5, a new channel (in the group of its
// connector_id: $7 are the group's channels, each once, and $6 their
// connector_ids, each channel's least of its Records') on its group's
// row and the shard's channels. The
// records, then the channels' count rows in channel_id order, then their
// groups' rows in connector_id order, then the shard row (the WITHs are
// evaluated first): the lock order of Record, and two groups take their
// channel rows in one order, so they cannot deadlock on them; a group
// updates one shard row. Last (a WITH no one reads runs after the main
// statement) it ends the messages' claims, found by index lookups and
// deleted by row address, as in claimGroup: one statement fewer per
// group than a DELETE of its own.
var recordGroup = `WITH up AS (
		INSERT INTO imv2_completed (channel_id, message_id, fingerprint, recorded_ns, seq)
		SELECT ch, id, fp, $4, nextval('imv2_completed_seq')
		FROM unnest($1::bytea[], $2::bytea[], $3::bytea[]) WITH ORDINALITY AS t(ch, id, fp, i) ORDER BY i
		ON CONFLICT (channel_id, message_id) DO UPDATE
		SET fingerprint = EXCLUDED.fingerprint, recorded_ns = EXCLUDED.recorded_ns, seq = EXCLUDED.seq, result = NULL
		RETURNING channel_id, xmax = 0 AS inserted),
	per AS (SELECT channel_id, count(*) AS k FROM up WHERE inserted GROUP BY channel_id),
	ch AS (
		INSERT INTO imv2_completed_channels (channel_id, n, connector_id)
		SELECT channel_id, k, coalesce(($6::bytea[])[array_position($7::bytea[], per.channel_id)], '\x')
		FROM per ORDER BY channel_id
		ON CONFLICT (channel_id) DO UPDATE SET n = imv2_completed_channels.n + EXCLUDED.n
		RETURNING connector_id, xmax = 0 AS added),` + countNewChannels("$5::int") + `,
	unclaim AS (DELETE FROM imv2_claims WHERE ctid = ANY (ARRAY(
		SELECT (SELECT c.ctid FROM imv2_claims c WHERE c.channel_id = t.ch AND c.message_id = t.id)
		FROM unnest($1::bytea[], $2::bytea[]) AS t(ch, id))))
	UPDATE imv2_completed_counts
	SET n = n + (SELECT sum(k) FROM per), channels = channels + (SELECT count(*) FROM ch WHERE added)
	WHERE shard = $5 AND EXISTS (SELECT 1 FROM per) AND (SELECT count(*) FROM grp) >= 0`

// queueRecords queues the statements of many Records: the records, the
// end of their claims, the trims once for all of them (queueGroupTrim),
// and one orphan sweep.
func (s *Store) queueRecords(b *pgx.Batch, records []*groupCall, now, cutoff int64) {
	n := len(records)
	chs, ids, fps := make(byteaArray, n), make(byteaArray, n), make(byteaArray, n)
	for i, c := range records {
		chs[i], ids[i], fps[i] = []byte(c.ch), []byte(c.id), c.fp[:]
	}
	// The channels, each once, in order, with the least connector_id of
	// their Records: the group a new channel's row joins. Found here, the
	// statement looks each up in an array, where a search of the
	// group's Records per channel, sorted, cost it ~5 µs per record.
	byChannel := slices.Clone(records)
	slices.SortFunc(byChannel, func(a, b *groupCall) int {
		return cmp.Or(strings.Compare(a.ch, b.ch), strings.Compare(a.conn, b.conn))
	})
	own, conns := make(byteaArray, 0, n), make(byteaArray, 0, n)
	for i, c := range byChannel {
		if i == 0 || c.ch != byChannel[i-1].ch {
			own, conns = append(own, []byte(c.ch)), append(conns, []byte(c.conn))
		}
	}
	shard := countShard(records[0].key)
	b.Queue(recordGroup, chs, ids, fps, now, shard, conns, own)
	s.queueGroupTrim(b, now, own, inlineSweep+int64(n), shard)
	b.Queue(sweepOrphans, cutoff, inlineSweep)
}

// sweepOrphans removes up to $2 claims whose lease ended at or before $1
// (now - TTL): an orphaned claim is kept one TTL past its lease, as long
// as the record its resend would have made. SKIP LOCKED: a Record never
// waits for another's sweep. ORDER BY and the row addresses keep it on
// the until_ns index and a TID scan: the table is mostly dead rows
// between vacuums (a claim lives from Claim to Record), which a scan of
// it would read at every Record.
const sweepOrphans = `DELETE FROM imv2_claims WHERE ctid = ANY (ARRAY(
	SELECT ctid FROM imv2_claims WHERE until_ns <= $1 ORDER BY until_ns LIMIT $2 FOR UPDATE SKIP LOCKED))`

// queueBegin queues c's Begin (beginSQL).
func queueBegin(b *pgx.Batch, c *groupCall) {
	b.Queue(beginSQL, []byte(c.ch), []byte(c.id), c.owner)
}
