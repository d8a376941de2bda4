// Package pgstore keeps the sender's pending messages, the receiver's
// completed records and claims, and the Connector's channel registry in one
// PostgreSQL database that several replicas share, so a final resent to
// another replica finds the record, and one replica at a time runs a
// message's side effect (S8, A6 across processes).
//
//	st, err := pgstore.Open(ctx, "postgres://connector@db/imv2", pgstore.Options{})
//	...
//	defer st.Close()
//	opts := &imv2.Options{Pending: st.Pending(), Completed: st.Completed()}
//
// *Store implements imv2.PendingStore, imv2.CompletedStore,
// imv2.ClaimStore and dataplane.ChannelRegistry. It lives in its own module
// so that the SDK's module needs no database driver.
//
// # Durability and concurrency
//
// Every Add, Remove, Record, Claim, Release and Register is one
// transaction, committed before the call returns (the server's defaults:
// synchronous_commit on). Claim, Release and Record of one message are
// serialised by a transaction-scoped advisory lock on the message, so
// exactly one of many concurrent claimers acquires, across replicas. Adds
// to one channel are serialised by an advisory lock on the channel, so the
// per-channel cap holds across replicas. Records lock one row holding the
// completed count, so the global cap is exact; that makes Records of all
// replicas commit one at a time (bench_test.go measures it).
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
//	IDs              channel and message IDs of 1 to imv2.MaxIDBytes (256) bytes; a channel
//	                 ID may not contain 0x00 (as boltstore)
//
// Add beyond the pending cap fails with code pending_full and nothing is
// dropped; pending entries never expire here (the Channel fails them with
// code "expired" after its PendingTTL, and removes them). The oldest
// completed record is evicted beyond the cap. Record removes up to 16
// expired records and orphaned claims each time; Sweep removes all.
//
// All time is Options.Clock's, stored as Unix nanoseconds, never the
// server's now(): replicas must run NTP-synced clocks, and tests drive TTLs
// and leases with fakeclock.
//
// # Schema
//
// Open creates and migrates the schema itself (schema.go): tables named
// imv2_*, a version per migration in imv2_schema_version, all pending
// migrations in one transaction under an advisory lock, so replicas that
// start at once migrate once. A database of a newer version is refused.
// Pending messages are stored gob-encoded, exactly as given.
package pgstore
