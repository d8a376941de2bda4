// Package pgstore keeps the sender's pending messages, the receiver's
// completed records and claims, the Connector's channel registry and the
// kit's conversation bindings in one PostgreSQL database that several replicas share, so a final resent to
// another replica finds the record, and one replica at a time runs a
// message's side effect (S8, A6 across processes).
//
//	st, err := pgstore.Open(ctx, "postgres://connector@db/imv2", pgstore.Options{})
//	...
//	defer st.Close()
//	opts := &imv2.Options{Pending: st.Pending(), Completed: st.Completed()}
//
// *Store implements imv2.PendingStore, imv2.CompletedStore,
// imv2.ClaimStore, state.ChannelRegistry,
// state.ConnectorRegistry and state.BindingStore, so it is a
// state.Store for a kit Connector:
//
//	k, err := connector.New(card, platform, &connector.Options{Store: st})
//
// For the xAgent side (dataplane.Client) the same Store keeps the
// connector_id and the channels to reopen (state.ChannelStore, xagent.go)
// and the unacked finals, so a restarted xAgent loses none and shows none
// twice (TestXAgentRestart_S1_S10_W11_PendingFinalsOutliveTheProcess):
//
//	st, err := pgstore.Open(ctx, "postgres://xagent@db/imv2", pgstore.Options{})
//	...
//	c, err := dataplane.Dial(ctx, dataplane.ClientConfig{
//		URL: connectorURL, Target: agent, Store: st,
//		Options: &imv2.Options{Pending: st, Completed: st},
//	})
//
// One database serves one Client (its connector_id is one row), as one
// boltstore file does; boltstore is the other durable choice, the
// defaults are in memory.
//
// It lives in its own module so that the
// SDK's module needs no database driver.
//
// # Replicas
//
// Several Connector replicas (one dataplane.Server each) open the same
// database; a load balancer sends xAgent's connection to any of them.
//
//   - A final resent to another replica finds the claim or the record:
//     one replica at a time runs its side effect, and a claim whose owner
//     died is taken over after its lease, the Target receiving the same
//     idempotency key (imv2.ClaimStore). A restarted replica is such a
//     dead owner: its old claims keep other owners out until their
//     leases end, so a resend of one is answered channel_busy
//     (retryable) until then (boltstore instead orphans a closed file's
//     claims when it is opened again: one process owns the file).
//
//   - A user message accepted on a replica that does not hold the
//     channel's connection goes through Relay.Send into the shared pending
//     store; PostgreSQL NOTIFY, committed with the entry, tells the
//     replica that holds it, whose Channel sends it (Relay, relay.go).
//
//   - Channel IDs and connector_ids are shared (Register, SeenConnector):
//     a reconnect to any replica keeps its connector_id and resumes every
//     channel (while the database is away it is refused for now and
//     retried: see "When the database falters"), and a replica whose offline grace runs out forgets nothing
//     while the connector_id is connected elsewhere (each Server records
//     its live connector_ids every quarter of the grace). A connector_id
//     whose last replica died is expired by none: its row goes after
//     CompletedTTL, its channel IDs stay registered (RegistryCap bounds
//     them).
//
//   - The kit's conversation bindings are shared (Bind, Unbind,
//     Channels): any replica finds every channel bound to a conversation,
//     and a sign-in on one replica is seen by all. (Give the kit the
//     Relay as connector.Options.Relay: its Receive on a replica without
//     the channel then goes through Relay.Send; without it, Receive
//     answers connector.ErrNoChannel there.) Each key's reference count (imv2_binding_keys) changes
//     in the transaction that changes the binding, with the channel's row
//     locked first, so concurrent Binds and Unbinds on several replicas
//     keep it exact and one Unbind of many finds the binding. The change
//     that takes a count to zero says so (state.BindingChange.Released,
//     decided on the locked count row), so the kit releases a
//     conversation exactly once each time its last binding goes.
//     UpdateBinding (a refreshed token, a sync cursor, the draft records)
//     writes with a compare-and-swap on the locked row
//     (state.BindingUpdater), so two replicas updating one binding
//     lose neither change and an update never binds again a channel
//     another replica unbound.
//
//     st, _ := pgstore.Open(ctx, url, pgstore.Options{})
//     relay := pgstore.NewRelay(st)
//     srv, _ := dataplane.NewServer(dataplane.ServerConfig{
//     Options:       &imv2.Options{Pending: st, Completed: st},
//     Registry:      st,
//     OnChannelOpen: relay.ChannelOpened,
//     ...
//     })
//     relay.Serve(srv)
//     go relay.Run(ctx)
//     // a user message from the IM platform, on any replica:
//     relay.Send(ctx, channelID, imv2.ChatMessage{Text: text})
//
// The one window where a platform without its own dedup can be affected:
// a replica that dies after a final's post began (the Store learned it,
// committed, before the post: imv2.ClaimStarter) and before its Record
// committed leaves an orphaned claim; one that dies before, its post not
// begun, leaves a claim whose resend is posted (Claim.Unposted). The
// begun one's resend (to any replica, after the claim's lease of
// 3×TargetTimeout) is posted again with the same idempotency key to a
// platform that deduplicates by it (connector.IdempotentPlatform: it
// shows it once), and otherwise not posted and answered
// delivery_outcome_unknown, retryable=false: shown once, and the sender
// told the outcome is unknown. failover_test.go kills a replica in exactly that window.
//
// # When the database falters
//
// A replica serves nothing it cannot confirm in the database, refuses
// what it cannot do for now with a retryable answer, and heals by itself
// once the database answers again; no operator step is needed.
//
//   - A hello whose connector_id this replica does not hold, and a
//     channel.open that must ask the registry, are refused with
//     connector_channel_unavailable while the database is away (each store
//     call bounded to 5 s, within xAgent's own 10 s wait). No new
//     connector_id or channel ID is issued in place of one the registry
//     could not confirm: that would take the channel's pending and
//     completed state away from xAgent for good. The dataplane.Client
//     reconnects after a refused hello and retries a refused channel.open
//     on the same connection, both with backoff (ReconnectMin to
//     ReconnectMax): the channel resumes under its ID within one backoff
//     step of the database's return. TestOutage_W11_MoveDuringOutageSettles
//     stops PostgreSQL ten times, each time moving xAgent to the other
//     replica with finals pending; every round settles (same connector_id,
//     the channel under its ID, finals posted once and acknowledged, a
//     user message accepted after the return at xAgent) in 57–207 ms of
//     the return, against the 5 s bound it checks.
//
//   - No store call runs on a connection's reader goroutine: the
//     completed-store Lookup of a stream's first delta and the
//     pending-store Remove after an ack run on the channel's own
//     goroutines, each bounded by the Channel's store timeout (10 s). A
//     locked or slow table holds the channels whose rows it holds, not
//     the connection: the connection's other channels keep flowing.
//
//   - Relay.Send answers within SendTimeout (5 s) with *imv2.Error: a
//     database failure is connector_channel_unavailable, retryable, and
//     the message is not accepted (send it again with its message_id).
//     Once Send accepted a message it reaches xAgent: an adopt that fails
//     on the replica holding the connection is tried again (200 ms,
//     doubling to 2 s) until it succeeds, and a channel that moves
//     adopts what is pending when it opens.
//
//   - Finals: a Claim or Lookup that fails answers the final
//     target_delivery_failed, retryable, and xAgent resends it; nothing
//     is posted without a claim. A Record that fails after the post is
//     tried again (100 ms, doubling to 1 s) for up to the 10 s store
//     timeout while the claim is renewed; only a Record that fails all
//     that time is logged and the final accepted (it was posted), its
//     claim left to expire: a resend is then the orphan case above.
//     TestFaults_S1_S8_PoolExhaustion (8 connections for two replicas,
//     50 channels, store calls refused throughout) posts 0 of 200 finals
//     twice (1–25 twice without renewal and retry) and loses 0 accepted user
//     messages.
//
// The lease bound. The Channel renews each claim it holds every
// ClaimLease/3 (default TargetTimeout) while WasPosted, the post and
// Record run (imv2.ClaimRenewer, RenewClaim: one statement on the
// claim's row, no lock shared with Record), so a live delivery keeps its
// claim however long the Target or a slow database takes. Leases are
// timed by the database server's clock_timestamp(), not the replicas'
// clocks, so skew between replicas does not matter (it only shifts
// records' CompletedTTL, timed by each replica's Options.Clock). What
// remains: a holder that cannot reach the database for two thirds of a
// lease (a blackhole or an exhausted pool longer than that, each renewal
// bounded to ClaimLease/3) loses the claim as a dead one would, and a
// resend at another replica is the orphan case above: posted again to a
// deduplicating platform (shown once), delivery_outcome_unknown
// otherwise, never hidden. A Store given Options.Clock times leases by
// it instead (tests); then a replica whose clock runs ahead of another's
// by more than the lease takes that one's live claims over at once.
// TestFaults_S8_A6_SlowRecordWithAMoveKeepsTheClaim holds a Record three
// leases while xAgent moves to the other replica: posted once, no unknown
// outcome (posted twice, or delivery_outcome_unknown, without renewal);
// TestFaults_S8_A6_ClockSkewBeyondTheLease runs a replica 20 s ahead:
// posted once with leases on the server's clock, and shows the takeover
// above with leases on the replica's.
//
// Tables locked (TestFaults_S1_M12_TableLockHoldsOnlyTheChannelsThatNeedIt,
// 5 s on imv2_pending or imv2_completed) hold the channels whose calls
// need them: the connection's other channel got its messages
// acknowledged 21–63 ms into the lock. With 50 ms each way between the
// replicas and the database, or a 2 s blackhole past the lease
// (TestFaults_S1_S8_DatabaseLatency, _DatabaseBlackhole, through a TCP
// proxy), nothing accepted is lost and nothing is posted twice; after the
// blackhole everything settled within 0.7–1.3 s.
//
// # Durability and concurrency
//
// Every Add, Remove, Record, Claim, Begin, Release, RenewClaim and
// Register is one transaction, committed before the call returns (the
// server's defaults: synchronous_commit on); Add, Claim, Begin and Record
// send theirs as one pgx batch, one round trip, and concurrent Claims,
// Begins and Records of different messages share one: up to 128 in one
// transaction, one commit (groupcommit.go). Claim, Release and Record of one message are
// serialised by a transaction-scoped advisory lock on the message, so
// exactly one of many concurrent claimers acquires, across replicas. Adds
// to one channel are serialised by an advisory lock on the channel, so the
// per-channel cap holds across replicas. The completed count is split
// over 64 rows, a Record adding to the one of its message, so Records of
// different messages on any replica wait on no common row; the global cap
// is approximate in return (see Bounds). Bind and
// Unbind lock the channel's binding row, then the reference-count rows of
// its keys in byte order; a Bind of a new channel takes an advisory lock
// so the binding cap holds across replicas.
//
// # Bounds and defaults
//
//	what             bound                                   default
//	pending          Options.PendingCap per channel          imv2.DefaultPendingCap (1000)
//	completed        Options.CompletedCap, all channels      imv2.DefaultCompletedCap (100,000)
//	completed TTL    Options.CompletedTTL after Record       imv2.DefaultCompletedTTL (24h)
//	claims           one per message being delivered;        lease: the caller's
//	                 an orphaned one kept CompletedTTL
//	                 past its lease
//	channel IDs      Options.RegistryCap, all replicas       DefaultRegistryCap (100,000)
//	connector_ids    Options.RegistryCap, all replicas;       DefaultRegistryCap (100,000)
//	                 least recently seen evicted; none kept
//	                 past CompletedTTL since last seen
//	bindings         Options.BindingCap, all replicas; no     state.DefaultMaxBindings (100,000)
//	                 TTL (the kit unbinds a channel it drops;
//	                 channel IDs are issued, not remote input)
//	xAgent channels  state.DefaultChannelStoreCap IDs (the    1,000
//	                 Connector's, remote input); no TTL (the
//	                 Client's CloseChannel removes one); one
//	                 connector_id row, replaced
//	binding keys     one reference-count row per key in use   (bounded by the bindings)
//	Relay queue      1,024 notified channel IDs; beyond it    (relayKicks)
//	                 one catch-up of every open channel
//	IDs              channel and message IDs of 1 to imv2.MaxIDBytes (256) bytes; a channel
//	                 ID may not contain 0x00 (as boltstore)
//
// Add beyond the pending cap fails with code pending_full and nothing is
// dropped; pending entries never expire here (the Channel fails them with
// code "expired" after its PendingTTL, and removes them). Beyond the cap
// the oldest completed record is evicted, unless its channel is within
// its share and the record younger than 1 h: then a channel over its
// share, the recording one first, loses one, so one peer's flood cannot
// make another's final show twice (completedshare.go). Shares are per
// connector_id first (the cap over the connector_ids holding records; the
// Channel's on the Record's context, records of none form one group),
// then per channel (its connector_id's share over its channels), so a
// peer opening many channels dilutes only its own. The cap is
// approximate: the table holds at most CompletedCap records plus one per
// Record in flight over all replicas (a Record's trim does not see the
// records of Records not yet committed, nor take what another has
// locked; a group keeps every record it makes), and under contention a
// Record may evict up to 16 records earlier than an exact cap would, a
// group of n Records up to 16 + n (its trims look at 16 + n of the oldest
// and are run once for the group). Records of one channel wait for each
// other on its count row; those of different channels do not, except that
// a group holds the count rows of all its channels (taken in channel_id
// order) until it commits. A group's channels are counted per count
// shard, so a Record adding a channel waits on no row beyond its shard's.
// Record removes up to 16 expired records and orphaned claims each time;
// Sweep removes all.
//
// Times are stored as Unix nanoseconds. Claim leases are the server's
// clock_timestamp() unless Options.Clock is set; completed records and
// their TTL are Options.Clock's (the system clock by default), so tests
// drive TTLs, and leases, with fakeclock.
//
// # Schema
//
// Open creates and migrates the schema itself (schema.go): tables named
// imv2_*, a version per migration in imv2_schema_version, all pending
// migrations in one transaction under an advisory lock, so replicas that
// start at once migrate once. A database of a newer version is refused.
// Version 3 added the bindings (imv2_bindings, imv2_binding_keys); a
// database of version 2 gains them, empty, when this build opens it.
// Version 4 added a binding's Data and Drafts (columns data, draft_ids,
// draft_handles); bindings of version 3 keep everything and get none.
// Version 7 added the connector_id level of the completed shares
// (imv2_completed_groups, a connector_id per counted channel); channels
// of version 6 join the group of none. Version 8 added a completed
// record's result (column result of imv2_completed: state.ResultStore, a
// tool call's answer kept for its replay, W13, at most
// state.MaxResultBytes); records of version 7 have none. Version 10
// added the xAgent side's channel store (imv2_xagent_channels,
// imv2_xagent_connector); a database of version 9 gains it, empty.
// Pending messages are stored exactly as given, in the SDK's versioned
// pending-entry encoding that boltstore keeps too (pendingcodec.go); rows
// of builds that stored them gob-encoded are still read.
package pgstore
