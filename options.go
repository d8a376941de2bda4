package imv2

import (
	"log/slog"
	"time"

	"github.com/xagentkit/imv2/clock"
)

// Role says which side of the profile a Channel plays.
type Role uint8

const (
	// RoleConnector is the IM Connector: it receives finals, deltas and
	// activity, and sends user messages.
	RoleConnector Role = iota + 1
	// RoleXAgent is xAgent's virtual Connector channel: it receives user
	// messages and sends deltas, finals and activity.
	RoleXAgent
)

// String returns "connector", "xagent" or "invalid".
func (r Role) String() string {
	switch r {
	case RoleConnector:
		return "connector"
	case RoleXAgent:
		return "xagent"
	}
	return "invalid"
}

// inbound is the direction packets arrive in for this role.
func (r Role) inbound() Direction {
	if r == RoleConnector {
		return ToConnector
	}
	return ToXAgent
}

// Defaults of Options. Each bound says what happens when it is hit.
const (
	// defaultAckTimeout: a sent message without an ack after this long is
	// resent (after backoff) with the same message_id and content (S2).
	defaultAckTimeout = 10 * time.Second
	// defaultRetryMin and defaultRetryMax bound the exponential backoff
	// between resends; each delay is drawn from [d/2, d] (jitter).
	defaultRetryMin = 500 * time.Millisecond
	defaultRetryMax = 30 * time.Second
	// defaultTargetTimeout bounds one Target call; a call that overruns is
	// cancelled and the message rejected retryable.
	defaultTargetTimeout = 60 * time.Second
	// defaultMaxInflight bounds the messages of one channel queued for or
	// in a Target call (they run one at a time, in arrival order); a
	// further message is rejected retryable with code channel_busy.
	defaultMaxInflight = 64
	// defaultMaxUnacked bounds the sent messages of one channel awaiting
	// their ack; later ones stay pending and go out as acks come back
	// (flow control: a receiver takes defaultMaxInflight at once).
	defaultMaxUnacked = defaultMaxInflight
	// defaultMaxWaiters bounds the resends of one message_id that wait for
	// its in-flight delivery; a further one is rejected retryable.
	defaultMaxWaiters = 16
	// defaultDeltaIdleTTL drops a delta stream that no delta extended for
	// this long (D9): a repeat of an earlier delta or an empty one does not
	// keep it alive. Its final is still handled as a final without deltas.
	defaultDeltaIdleTTL = 5 * time.Minute
	// defaultDeltaMaxAge drops a delta stream that long after its first
	// delta, however often it is extended: a peer appending a byte now and
	// then would otherwise hold its buffer (and budget) for good. Half an
	// hour is far beyond one reply's streaming; its final still comes.
	defaultDeltaMaxAge = 30 * time.Minute
	// defaultOrderTTL ends the hold of an unresolved message (rejected
	// retryable) that was not sent again for this long: four times the
	// longest resend backoff (defaultRetryMax).
	defaultOrderTTL = 2 * time.Minute
	// defaultMaxOpenDeltas bounds open delta streams per channel; a delta
	// for a new message beyond it is rejected with delta_limit_exceeded.
	defaultMaxOpenDeltas = 256
	// defaultMaxDeltaBytes bounds the assembled text of one stream; a delta
	// that would pass it is rejected with delta_limit_exceeded.
	defaultMaxDeltaBytes = MaxTextBytes
	// defaultDeltaSweep is how often open delta streams are checked for
	// idleness. No timer runs while no stream is open.
	defaultDeltaSweep = 30 * time.Second
	// defaultActivityTimeout clears a shown activity (typing) that no new
	// snapshot refreshed for this long (C7).
	defaultActivityTimeout = 30 * time.Second
)

// CodeChannelBusy is the code of a retryable rejection when a channel has
// Options.MaxInflight deliveries running or too many resends waiting.
const CodeChannelBusy Code = "channel_busy"

// CodeExpired is the failure code of a pending message that got no terminal
// ack within the pending TTL.
const CodeExpired Code = "expired"

// Options configure a Channel. The zero value (or nil) takes every default.
type Options struct {
	// Clock times every timer; clock.System{} by default.
	Clock clock.Clock
	// Logger receives debug lines for dropped packets and warnings for
	// failures; nothing by default. Message text is never logged.
	Logger *slog.Logger
	// Observer is told about every delivery event, for metrics.
	Observer Observer
	// Pending and Completed are the two stores (S9). Defaults are bounded
	// in-memory stores; use boltstore for restarts (S8).
	Pending   PendingStore
	Completed CompletedStore
	// OnFailed is called when a sent message ends without delivery: a
	// rejection with retryable=false (S3) or expiry after PendingTTL. It is
	// called from the Channel's goroutines; do not block in it.
	OnFailed func(channelID string, m ChatMessage, err *Error)
	// OnDelivered is called when a sent message got its terminal success
	// ack (accepted or duplicate), with the message as sent. Same
	// goroutine rules as OnFailed.
	OnDelivered func(channelID string, m ChatMessage, status AckStatus)

	// AckTimeout: resend a message without an ack after this long
	// (default 10 s).
	AckTimeout time.Duration
	// RetryMin and RetryMax bound the backoff between resends
	// (default 500 ms, 30 s).
	RetryMin time.Duration
	RetryMax time.Duration
	// PendingTTL: a message without a terminal ack fails with code expired
	// after this long, connected or not (default 1 h); a negative value
	// turns the age limit off. The limit is an SDK choice that departs
	// from profile §9, which removes a pending message only on accepted,
	// duplicate or a retryable=false rejection (S1, S3): it exists so
	// that a peer that never answers, or a channel that never comes back,
	// ends in a reported failure instead of a message kept for ever, and
	// so that no resend can outlive the receiver's completed record
	// (DefaultCompletedTTL, 24 h). Turn it off to follow profile §9 exactly, with
	// a durable PendingStore and a peer whose completed records last as
	// long as messages may stay pending; the per-channel count cap
	// (DefaultPendingCap, then Send returns pending_full) stays the bound.
	PendingTTL time.Duration
	// MaxUnacked bounds the messages in transmission awaiting an ack per
	// channel; later ones wait, pending, for room (default 64).
	MaxUnacked int
	// TargetTimeout bounds each Target call (default 60 s), on Clock.
	TargetTimeout time.Duration
	// MaxInflight bounds the messages queued for or in a Target call per
	// channel (default 64); MaxWaiters the resends waiting on one
	// of them (default 16).
	MaxInflight int
	MaxWaiters  int
	// DeltaIdleTTL drops a delta stream idle that long, DeltaMaxAge one
	// that old however active, checked every DeltaSweep (default 5 min,
	// 30 min, 30 s).
	DeltaIdleTTL time.Duration
	DeltaMaxAge  time.Duration
	// OrderTTL ends the hold of a message rejected retryable (default
	// 2 min): until it is delivered, rejected for good or not sent again
	// for OrderTTL, the channel's later messages are rejected
	// channel_busy, retryable, so they reach the Target after it (at most
	// MaxInflight of them are promised their order).
	OrderTTL   time.Duration
	DeltaSweep time.Duration
	// MaxOpenDeltas bounds open delta streams per channel and
	// MaxDeltaBytes the bytes of one, text plus 8 per delta
	// (default 256, 1 MiB).
	MaxOpenDeltas int
	MaxDeltaBytes int
	// Budget bounds, across every channel that shares it, the bytes a
	// peer can make the channels hold: delta buffers (by capacity) and
	// messages queued for or waiting on a Target call. Over it a delta
	// that needs room is rejected with delta_limit_exceeded and a message
	// with channel_busy (retryable). nil: only the per-channel bounds
	// above; the dataplane Server sets one per connector_id under one per
	// Server (dataplane.DefaultMaxMemory).
	Budget *Budget
	// ConnectorID is the connector_id whose channel this is, on a
	// Connector serving several. A full completed store (in memory,
	// wrapped or not, or boltstore: the store calls' context carries it)
	// guarantees each connector_id a share of its capacity and each of
	// its channels a share of that, so a peer opening many channels
	// dilutes its own shares, not another connector_id's. Empty: the channel shares one group with every other
	// channel that has none. The dataplane Server sets it.
	ConnectorID string
	// ActivityTimeout clears a shown activity nobody refreshed
	// (default 30 s).
	ActivityTimeout time.Duration

	// ClaimOwner names this process to a Completed store that implements
	// ClaimStore: the Channel claims each inbound message under it before
	// the Target runs (S8). Default: a random ID the Channel makes for its
	// first claim (an idle channel holds none), so each Channel is its own
	// owner; that is enough, since one Channel delivers a message at a
	// time. Processes sharing a store (replicas) must not share an owner.
	ClaimOwner string
	// ClaimLease is how long a claim keeps other owners out while the
	// Target runs; past it the claim counts as orphaned. Default
	// 3×TargetTimeout: after the claim a Channel runs at most a post
	// check (the kit's connector.PostChecker) and the PostMessage, each
	// bounded by TargetTimeout (drafts and the activity clear are settled
	// before the claim), and the third TargetTimeout is slack for the store calls
	// around them. A store that is a ClaimRenewer has the claim renewed
	// every ClaimLease/3 while the delivery and its Record run, so a live
	// delivery loses its claim only if the store stays out of reach for
	// two thirds of a lease.
	ClaimLease time.Duration
}

// withDefaults returns a copy with every zero field set.
func (o *Options) withDefaults() Options {
	var r Options
	if o != nil {
		r = *o
	}
	if r.Clock == nil {
		r.Clock = clock.System{}
	}
	if r.Logger == nil {
		r.Logger = slog.New(slog.DiscardHandler)
	}
	if r.Observer == nil {
		r.Observer = noObserver{}
	}
	if r.Pending == nil {
		r.Pending = NewMemoryPendingStore(DefaultPendingCap)
	}
	if r.Completed == nil {
		r.Completed = NewMemoryCompletedStore(0, 0, r.Clock)
	}
	setDur(&r.AckTimeout, defaultAckTimeout)
	setDur(&r.RetryMin, defaultRetryMin)
	setDur(&r.RetryMax, defaultRetryMax)
	if r.PendingTTL == 0 { // negative: no age limit
		r.PendingTTL = defaultPendingTTL
	}
	setDur(&r.TargetTimeout, defaultTargetTimeout)
	setDur(&r.DeltaIdleTTL, defaultDeltaIdleTTL)
	setDur(&r.DeltaMaxAge, defaultDeltaMaxAge)
	setDur(&r.OrderTTL, defaultOrderTTL)
	setDur(&r.DeltaSweep, defaultDeltaSweep)
	setDur(&r.ActivityTimeout, defaultActivityTimeout)
	setDur(&r.ClaimLease, 3*r.TargetTimeout)
	setInt(&r.MaxInflight, defaultMaxInflight)
	setInt(&r.MaxWaiters, defaultMaxWaiters)
	setInt(&r.MaxUnacked, defaultMaxUnacked)
	setInt(&r.MaxOpenDeltas, defaultMaxOpenDeltas)
	setInt(&r.MaxDeltaBytes, defaultMaxDeltaBytes)
	if r.RetryMax < r.RetryMin {
		r.RetryMax = r.RetryMin
	}
	return r
}

func setDur(d *time.Duration, def time.Duration) {
	if *d <= 0 {
		*d = def
	}
}

func setInt(n *int, def int) {
	if *n <= 0 {
		*n = def
	}
}
