package imv2

import (
	"errors"
	"fmt"
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
	// claim and the completion record), and the Target can neither repost
	// it harmlessly (IdempotentTarget) nor tell whether it was posted
	// (PostCheckTarget). It may have been shown once; it is not posted
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
// Retryable as IsRetryable reports.
func AsError(err error, fallback Code) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: fallback, Message: err.Error(), Retryable: IsRetryable(err), cause: err}
}

// kindError marks a target failure as retryable or permanent (A8).
type kindError struct {
	err       error
	retryable bool
}

func (k *kindError) Error() string { return k.err.Error() }
func (k *kindError) Unwrap() error { return k.err }

// Retryable reports the mark's verdict, for a caller that must tell an
// explicit mark from none, which IsRetryable reads as retryable too (the
// connector kit: "not posted" from "may have been posted"). It finds it
// in an error's chain with an interface{ Retryable() bool }.
func (k *kindError) Retryable() bool { return k.retryable }

// Retryable marks err, a target platform failure, as transient: a network
// break, a rate limit, a temporary busy. A Target returns it so the Connector
// rejects the message with retryable=true and the sender tries again after
// backoff (A8). Retryable(nil) is nil.
func Retryable(err error) error {
	if err == nil {
		return nil
	}
	return &kindError{err: err, retryable: true}
}

// Permanent marks err as deterministic: a bad payload, a permission or
// sign-in problem, an explicit refusal by the platform. The message is
// rejected with retryable=false and never retried. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &kindError{err: err, retryable: false}
}

// IsRetryable reports whether err says a resend may succeed: an *Error with
// Retryable set, or an error marked by Retryable. Errors of neither kind are
// treated as retryable, since an unknown failure (a timeout, a broken pipe)
// is more often transient and the receiver's dedup makes a resend safe.
// IsRetryable(nil) is false.
func IsRetryable(err error) bool {
	if err == nil {
		return false
	}
	for err != nil {
		switch e := err.(type) {
		case *kindError:
			return e.retryable
		case *Error:
			return e.Retryable
		}
		err = errors.Unwrap(err)
	}
	return true
}
