// Package boltstore keeps the sender's pending messages and the receiver's
// completed records in one bbolt file, so a restart neither loses an
// unacknowledged message (S1) nor runs a completed final twice (S8).
//
//	st, err := boltstore.Open("/var/lib/connector/imv2.db", boltstore.Options{})
//	...
//	defer st.Close()
//	opts := &imv2.Options{Pending: st.Pending(), Completed: st.Completed()}
//
// The two are separate facts with separate lifecycles (S9): Remove never
// touches a completed record, and DropChannel, Sweep and eviction never
// touch a pending entry.
//
// # Durability
//
// Every Add, Remove, Claim and Record is one bbolt transaction committed
// with fsync before the call returns; in particular the accepted ack that
// follows Record can never describe a record a crash lost, and a final is
// claimed (imv2.ClaimStore) before it is posted, so a crash between its
// post and its Record leaves an orphaned claim instead of nothing: every
// claim made before the file was last opened is orphaned, and the resend
// is not posted blindly a second time (claim.go). bbolt's NoSync
// is never set. bbolt has one writer, and a commit costs two fsyncs,
// milliseconds on a typical disk against microseconds in memory
// (bench_test.go), so concurrent calls share commits (groupcommit.go): a
// call that finds no commit under way commits at once, alone; calls that
// arrive meanwhile go together in the next commit, up to 256, each
// returning once that commit's fsync is done. One channel's calls, one
// after another, pay a commit each; many channels share them.
//
// # Bounds and defaults
//
//   - Pending: at most Options.PendingCap entries per channel (default
//     imv2.DefaultPendingCap, 1000); Add beyond it fails with code
//     pending_full and nothing is dropped. Entries are never expired here:
//     the Channel fails them with code "expired" after its PendingTTL and
//     removes them, so the loss is reported, not silent. DropPending
//     forgets a deleted channel's entries (S7).
//   - Completed: at most Options.CompletedCap records across all channels
//     (default imv2.DefaultCompletedCap, 100,000), oldest evicted first,
//     except that a channel within its share of the cap (per connector_id,
//     then per channel) keeps its records younger than 1 h: a flood
//     evicts its own (completedshare.go); each
//     visible for Options.CompletedTTL after it was recorded (default
//     imv2.DefaultCompletedTTL, 24h). Expired records are removed by Sweep,
//     by the optional sweeper (Options.SweepInterval, default off) and, a
//     few at a time, by Record.
//   - Claims: removed by Record, Release and DropChannel; one whose lease
//     ended CompletedTTL ago by Sweep. At most one is left per channel per
//     crash (a Channel posts one message at a time).
//   - Bindings: at most Options.BindingCap (default
//     state.DefaultMaxBindings, 100,000); Bind of a new channel beyond
//     it fails with code connector_channel_unavailable, a rebind succeeds.
//   - IDs: channel and message IDs of 1 to imv2.MaxIDBytes (256) bytes;
//     a channel ID may not contain 0x00.
//   - One process at a time: Open waits Options.LockTimeout (default 1s)
//     for bbolt's file lock, then fails with ErrLocked.
//
// All time comes from Options.Clock, so tests drive TTLs and the sweeper
// with fakeclock.
//
// # Layout
//
// Bucket layout and value encodings carry a version (LayoutVersion, in the
// meta bucket); layout.go describes both and how a migration plugs in.
// Pending values are a small length-prefixed binary encoding (the SDK's
// internal/pendingcodec, version 1, which pgstore shares), less than half
// the size of the same entry in JSON; completed values are a fixed 48
// bytes.
package boltstore
