package imv2

import (
	"errors"
	"fmt"
	"net"
	"time"
)

// Code is a stable, machine-readable error code. Codes travel on the wire in
// an error packet's `error.code` and in a rejected ack's `payload.code`; they
// never change meaning once published.
type Code string

// Common Protocol 3.0 error codes (W10). They travel in packets
// of type "error".
const (
	// CodeInvalidPacket: the frame is not JSON, not a valid envelope, or its
	// payload breaks a rule of its packet type (X3).
	CodeInvalidPacket Code = "invalid_packet"
	// CodeChannelNotOpen: the packet names a channel that is not open (X2).
	CodeChannelNotOpen Code = "channel_not_open"
	// CodeChannelIDRequired: a channel-scoped packet has no connector_channel_id (I1).
	CodeChannelIDRequired Code = "connector_channel_id_required"
	// CodeChannelUnavailable: the channel exists but cannot serve now.
	CodeChannelUnavailable Code = "connector_channel_unavailable"
	// CodeUnsupportedPacket: the packet type is not served by this peer.
	CodeUnsupportedPacket Code = "unsupported_packet"
)

// IM Profile v2 codes of this SDK. Delta rejections travel in error packets
// (D12); message rejections travel in chat.message.ack (E3, X5).
const (
	// CodeDeltaSequenceGap: a delta skipped a sequence number or started above 1 (D4).
	CodeDeltaSequenceGap Code = "delta_sequence_gap"
	// CodeDeltaSequenceConflict: a delta repeats a message_id+sequence with other text (D3).
	CodeDeltaSequenceConflict Code = "delta_sequence_conflict"
	// CodeDeltaLimitExceeded: accepting the delta would break a delta cache
	// bound (open messages per channel or text bytes per message, D9).
	CodeDeltaLimitExceeded Code = "delta_limit_exceeded"
	// CodeMessageIDConflict: a message_id already completed with other
	// content (S6). Rejected with retryable=false.
	CodeMessageIDConflict Code = "message_id_conflict"
	// CodeForbiddenField: a payload carries an identity field (session_id,
	// user_id, user_connector_id, connector_id, role) or transfer material
	// (file bytes, base64, paths, tokens) that the profile forbids (I2, M8, C4).
	CodeForbiddenField Code = "forbidden_field"
	// CodeTargetDeliveryFailed: the target platform failed to take the
	// message (X5); Retryable says whether a resend may succeed.
	CodeTargetDeliveryFailed Code = "target_delivery_failed"
	// CodeTargetRejected: the target platform refused the message for good
	// (permission, payload, sign-in state). Never retryable.
	CodeTargetRejected Code = "target_rejected"
	// CodeDeliveryOutcomeUnknown: an earlier attempt to deliver this
	// message_id began and never finished (its process crashed between the
	// claim and the completion record), and the platform can neither repost
	// it harmlessly (connector.IdempotentPlatform) nor tell whether it was
	// posted (connector.PostChecker). It may have been shown once; it is not posted
	// again, so it is never shown twice (S8). Rejected with retryable=false,
	// so the sender reports it instead of resending.
	CodeDeliveryOutcomeUnknown Code = "delivery_outcome_unknown"
	// CodePendingFull: the sender's pending queue is full; the caller gets
	// this error and nothing is queued (S1 backpressure).
	CodePendingFull Code = "pending_full"
	// CodeClosed: the channel or connection was closed.
	CodeClosed Code = "closed"
)

// Error is the one error type of the SDK. It carries a stable Code, a short
// human message and whether the same request may succeed if sent again.
//
// Two *Error values match under errors.Is when their codes are equal:
//
//	errors.Is(err, &imv2.Error{Code: imv2.CodeChannelNotOpen})
//
// reports whether err is or wraps an *Error with that code, whatever its
// message. Where two failures share a code and a caller must tell them
// apart, the failure wraps a sentinel of its own as its cause (Errorf
// with %w) and the caller matches that sentinel, which no other error
// with the same code matches; the wire still carries only the code.
type Error struct {
	Code      Code
	Message   string
	Retryable bool
	cause     error
}

// Sentinels for errors.Is; each matches any *Error with its code.
var (
	ErrInvalidPacket = &Error{Code: CodeInvalidPacket}
	ErrClosed        = &Error{Code: CodeClosed}
)

// Errorf returns an *Error with the given code and a formatted message.
// A %w verb in format is kept as the cause for errors.Unwrap.
func Errorf(code Code, format string, args ...any) *Error {
	err := fmt.Errorf(format, args...)
	e := &Error{Code: code, Message: err.Error()}
	if u := errors.Unwrap(err); u != nil {
		e.cause = u
	}
	return e
}

func (e *Error) Error() string {
	if e.Message == "" {
		return "imv2: " + string(e.Code)
	}
	return "imv2: " + string(e.Code) + ": " + e.Message
}

// Is reports whether target is an *Error with the same Code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Unwrap returns the cause, if any.
func (e *Error) Unwrap() error { return e.cause }

// AsError returns err as an *Error. An error that is not one (or wraps none)
// becomes an *Error with code fallback, err's text as message, and
// Retryable as SafeToRetry reports.
func AsError(err error, fallback Code) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: fallback, Message: err.Error(), Retryable: SafeToRetry(err), cause: err}
}

// The error contract of every platform call — a Target's PostMessage and
// the connector kit's Platform calls —
// is this one, read by SafeToRetry and IsRefused alone:
//
//	returned           outcome           the Channel answers a final or user message
//	nil                applied           accepted
//	NotPosted(err)     not applied       rejected retryable: the sender resends it
//	RetryAfter(err,d)  not applied;      as NotPosted; the kit also waits d before its
//	                   wait d first      next call to the conversation (a rate limit)
//	Refused(err)       refused           rejected retryable=false (target_rejected)
//	an *Error          its Retryable     rejected with its code: not applied when
//	                                     Retryable, refused when not
//	any other error    unknown: it may   see below
//	                   have been applied
//
// A dial or name-resolution error is not applied too: the request never
// left. A plain error — a timeout, a broken connection after the request
// went out, a lost response — is read the safe way: the platform may show
// the message, so posting it again may show it twice. The Channel then
// does what it does for a delivery a crash cut off (ClaimStore, S8): when
// the platform deduplicates (the kit's connector.IdempotentPlatform) the
// message is rejected retryable (the resend posts it again, harmlessly);
// a connector.PostChecker is asked at once whether it was posted (posted:
// accepted; not posted: rejected retryable; no answer: rejected
// retryable, and the resend asks first); any other platform's
// message is rejected delivery_outcome_unknown, retryable=false, and its
// claim stays, so no resend posts it: the sender reports a failure
// instead of the chat showing it twice. A Target marks what it knows.

// SafeToRetry reports whether err says the call was not applied, so
// making it again cannot apply it twice: the first mark in err's chain is
// NotPosted, RetryAfter or a retryable *Error, or err is a dial or
// name-resolution failure (the request never left). It is false for nil,
// for a refusal and for an error nobody marked (it may have been applied).
func SafeToRetry(err error) bool { return outcomeOf(err) == outcomeNotApplied }

// IsRefused reports whether err says the call was refused for good: the
// first mark in err's chain is Refused or an *Error that is not retryable.
func IsRefused(err error) bool { return outcomeOf(err) == outcomeRefused }

// outcome is what a platform call did, as its error says.
type outcome uint8

const (
	outcomeApplied outcome = iota
	outcomeNotApplied
	outcomeRefused
	outcomeUnknown
)

// outcomeOf reads err by the contract above; it is the one walk of an
// error's chain for it.
func outcomeOf(err error) outcome {
	if err == nil {
		return outcomeApplied
	}
	for e := err; e != nil; e = errors.Unwrap(e) {
		switch m := e.(type) {
		case *markError:
			if m.notPosted {
				return outcomeNotApplied
			}
			return outcomeRefused
		case *Error:
			if m.Retryable {
				return outcomeNotApplied
			}
			return outcomeRefused
		case *net.OpError:
			if m.Op == "dial" {
				return outcomeNotApplied
			}
		case *net.DNSError:
			return outcomeNotApplied
		}
	}
	return outcomeUnknown
}

// markError is the mark NotPosted, RetryAfter and Refused put on an error.
type markError struct {
	err       error
	notPosted bool
	after     time.Duration // RetryAfter's delay; 0 for the others
}

func (m *markError) Error() string {
	if m.after > 0 {
		return fmt.Sprintf("%v (retry after %v)", m.err, m.after)
	}
	return m.err.Error()
}
func (m *markError) Unwrap() error { return m.err }

// NotPosted marks err, a platform call's failure, as not applied: the
// request was refused before it took effect (a 503, a 429, a busy
// answer), so making it again is safe. The message is rejected retryable
// and the sender resends it after backoff (A8); the kit makes the call
// again within its own budget first. NotPosted(nil) is nil.
func NotPosted(err error) error {
	if err == nil {
		return nil
	}
	return &markError{err: err, notPosted: true}
}

// RetryAfter is NotPosted with the delay the platform asked for (HTTP 429
// Retry-After, Telegram retry_after): the kit waits d before its next
// call to the conversation. RetryAfter(nil, d) is nil.
func RetryAfter(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	return &markError{err: err, notPosted: true, after: d}
}

// RetryAfterOf returns the delay of the first RetryAfter in err's chain.
func RetryAfterOf(err error) (time.Duration, bool) {
	var m *markError
	if errors.As(err, &m) && m.after > 0 {
		return m.after, true
	}
	return 0, false
}

// Refused marks err as a refusal for good: a bad payload, a permission or
// sign-in problem, an explicit "no" of the platform. The message is
// rejected retryable=false and never made again (A8). Refused(nil) is nil.
func Refused(err error) error {
	if err == nil {
		return nil
	}
	return &markError{err: err}
}
