package imv2

import "time"

// EventKind names one delivery event of a Channel.
type EventKind uint8

// Events a Channel reports to its Observer.
const (
	// EventSent: a complete message was transmitted (first time or resend;
	// Attempt says which).
	EventSent EventKind = iota + 1
	// EventAcked: a terminal ack (accepted or duplicate) ended a pending message.
	EventAcked
	// EventRetry: a resend was scheduled after a timeout, a send error or a
	// retryable rejection.
	EventRetry
	// EventFailed: a pending message ended without delivery (S3, expiry).
	EventFailed
	// EventAckUnmatched: an ack matched no pending transmission (A2).
	EventAckUnmatched
	// EventDelivered: an inbound message's Target call succeeded (accepted).
	EventDelivered
	// EventDuplicate: an inbound resend of a completed message was answered
	// duplicate without a Target call (A6).
	EventDuplicate
	// EventRejected: an inbound packet was rejected (Code). A rejected
	// ack answered it (Status AckRejected, MessageID), or, when no
	// message_id could be read or it was an invalid chat.activity, an
	// error packet (PacketType; Status empty). Whether the sender may
	// retry is the ack's retryable, which Event does not carry.
	EventRejected
	// EventDeltaRejected: a delta was rejected with an error packet (D12).
	EventDeltaRejected
	// EventDeltaIgnored: a delta for a completed or finishing message (D11)
	// or a retransmitted one (D3).
	EventDeltaIgnored
	// EventDeltaExpired: an idle delta stream was dropped (D9).
	EventDeltaExpired
	// EventDropped: a packet outside the negotiated set, dropped silently (P6).
	EventDropped
	// EventPeerError: the peer sent an error packet for this channel.
	EventPeerError
	// EventActivityError: the Target failed to show activity (C8).
	EventActivityError
	// EventTargetFailed: an inbound message's Target call returned an
	// error (Code: the rejection's; Duration: how long the call took).
	// The EventRejected of its ack follows.
	EventTargetFailed
)

var eventNames = [...]string{
	EventSent: "sent", EventAcked: "acked", EventRetry: "retry", EventFailed: "failed",
	EventAckUnmatched: "ack_unmatched", EventDelivered: "delivered", EventDuplicate: "duplicate",
	EventRejected: "rejected", EventDeltaRejected: "delta_rejected", EventDeltaIgnored: "delta_ignored",
	EventDeltaExpired: "delta_expired", EventDropped: "dropped", EventPeerError: "peer_error",
	EventActivityError: "activity_error", EventTargetFailed: "target_failed",
}

// String returns the event's snake_case name.
func (k EventKind) String() string {
	if int(k) < len(eventNames) && eventNames[k] != "" {
		return eventNames[k]
	}
	return "unknown"
}

// Event is one observation. Fields that do not apply are zero.
type Event struct {
	Kind       EventKind
	ChannelID  string
	MessageID  string
	PacketType string
	Status     AckStatus
	Code       Code
	Attempt    int
	// Duration is how long the Target's PostMessage took (EventDelivered,
	// EventTargetFailed).
	Duration time.Duration
}

// Observer receives a Channel's events, for metrics. Observe is called
// synchronously on the Channel's goroutines: keep it fast.
type Observer interface {
	Observe(e Event)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(e Event)

// Observe calls f(e).
func (f ObserverFunc) Observe(e Event) { f(e) }

// noObserver is the Observer of Options without one: it drops every
// event, and a Channel with it skips the clock reads that only an
// event's Duration needs.
type noObserver struct{}

// Observe implements Observer.
func (noObserver) Observe(Event) {}
