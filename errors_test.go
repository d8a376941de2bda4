package imv2_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/xagentkit/imv2"
)

func TestError_X3_IsAndAs(t *testing.T) {
	base := imv2.Errorf(imv2.CodeChannelNotOpen, "channel %q is closed", "cch_1")
	wrapped := fmt.Errorf("receive: %w", base)
	if !errors.Is(wrapped, &imv2.Error{Code: imv2.CodeChannelNotOpen}) || !errors.Is(wrapped, &imv2.Error{Code: imv2.CodeChannelNotOpen, Message: "another text"}) {
		t.Error("errors.Is by code, whatever the message, through a wrap")
	}
	if errors.Is(wrapped, imv2.ErrInvalidPacket) {
		t.Error("errors.Is matched another code")
	}
	var e *imv2.Error
	if !errors.As(wrapped, &e) || e != base {
		t.Error("errors.As")
	}
	if got := base.Error(); got != `imv2: channel_not_open: channel "cch_1" is closed` {
		t.Errorf("Error() = %q", got)
	}
	if got := (&imv2.Error{Code: imv2.CodeClosed}).Error(); got != "imv2: closed" {
		t.Errorf("Error() without message = %q", got)
	}
	if errors.Is(io.EOF, imv2.ErrClosed) {
		t.Error("a foreign error matched")
	}
}

func TestErrorf_X3_KeepsCause(t *testing.T) {
	e := imv2.Errorf(imv2.CodeInvalidPacket, "decode: %w", io.ErrUnexpectedEOF)
	if !errors.Is(e, io.ErrUnexpectedEOF) || !errors.Is(e, imv2.ErrInvalidPacket) {
		t.Error("a %w cause must stay reachable beside the code")
	}
	if errors.Unwrap(imv2.Errorf(imv2.CodeInvalidPacket, "no cause")) != nil {
		t.Error("cause without %w")
	}
}

func TestAsError_X5(t *testing.T) {
	if imv2.AsError(nil, imv2.CodeTargetDeliveryFailed) != nil {
		t.Error("AsError(nil) must be nil")
	}
	orig := &imv2.Error{Code: imv2.CodeTargetRejected}
	if imv2.AsError(fmt.Errorf("x: %w", orig), imv2.CodeTargetDeliveryFailed) != orig {
		t.Error("AsError must return the wrapped *Error")
	}
	e := imv2.AsError(imv2.Refused(errors.New("403 forbidden")), imv2.CodeTargetDeliveryFailed)
	if e.Code != imv2.CodeTargetDeliveryFailed || e.Retryable || e.Message != "403 forbidden" {
		t.Errorf("AsError(Permanent) = %+v", e)
	}
	e = imv2.AsError(context.DeadlineExceeded, imv2.CodeTargetDeliveryFailed)
	if e.Retryable || !errors.Is(e, context.DeadlineExceeded) {
		t.Errorf("AsError(timeout) = %+v, want not retryable (it may have been applied) with the cause kept", e)
	}
	e = imv2.AsError(imv2.NotPosted(context.DeadlineExceeded), imv2.CodeTargetDeliveryFailed)
	if !e.Retryable {
		t.Errorf("AsError(NotPosted) = %+v, want retryable", e)
	}
}

// TestErrorContract_A8_S8_OneReading: the four outcomes of a platform
// call, as SafeToRetry and IsRefused read them: the first mark in the
// chain decides; a dial or name-resolution error was not applied; an
// unmarked error is neither (it may have been applied).
func TestErrorContract_A8_S8_OneReading(t *testing.T) {
	netErr := errors.New("connection reset")
	cases := []struct {
		name          string
		err           error
		safe, refused bool
	}{
		{"nil: applied", nil, false, false},
		{"NotPosted", imv2.NotPosted(netErr), true, false},
		{"RetryAfter", imv2.RetryAfter(netErr, time.Second), true, false},
		{"Refused", imv2.Refused(netErr), false, true},
		{"wrapped Refused", fmt.Errorf("post: %w", imv2.Refused(netErr)), false, true},
		{"wrapped NotPosted", fmt.Errorf("post: %w", imv2.NotPosted(netErr)), true, false},
		{"outermost mark wins", imv2.Refused(imv2.NotPosted(netErr)), false, true},
		{"outermost mark wins, other way", imv2.NotPosted(imv2.Refused(netErr)), true, false},
		{"retryable *Error", &imv2.Error{Code: "rate_limited", Retryable: true}, true, false},
		{"permanent *Error", &imv2.Error{Code: imv2.CodeTargetRejected}, false, true},
		{"dial error", &net.OpError{Op: "dial", Net: "tcp", Err: netErr}, true, false},
		{"name resolution", &net.DNSError{Err: "no such host", Name: "chat.example"}, true, false},
		{"write error: unknown", &net.OpError{Op: "write", Net: "tcp", Err: netErr}, false, false},
		{"unmarked: unknown", netErr, false, false},
		{"timeout: unknown", context.DeadlineExceeded, false, false},
	}
	for _, c := range cases {
		if got := imv2.SafeToRetry(c.err); got != c.safe {
			t.Errorf("%s: SafeToRetry = %v, want %v", c.name, got, c.safe)
		}
		if got := imv2.IsRefused(c.err); got != c.refused {
			t.Errorf("%s: IsRefused = %v, want %v", c.name, got, c.refused)
		}
	}
	if d, ok := imv2.RetryAfterOf(fmt.Errorf("post: %w", imv2.RetryAfter(netErr, 3*time.Second))); !ok || d != 3*time.Second {
		t.Errorf("RetryAfterOf = %v %v, want 3s", d, ok)
	}
	if _, ok := imv2.RetryAfterOf(imv2.NotPosted(netErr)); ok {
		t.Error("RetryAfterOf found a delay in NotPosted")
	}
	if imv2.RetryAfter(nil, time.Second) != nil {
		t.Error("RetryAfter(nil, d) must be nil")
	}
	if imv2.NotPosted(nil) != nil || imv2.Refused(nil) != nil {
		t.Error("NotPosted(nil) and Refused(nil) must be nil")
	}
	p := imv2.Refused(netErr)
	if !errors.Is(p, netErr) || p.Error() != netErr.Error() {
		t.Error("the mark must keep the original error and text")
	}
}

// Two failures share a code; the one a caller must tell apart wraps a
// sentinel of its own, which the other does not match.
func ExampleError_sharedCode() {
	errRaced := errors.New("channels were dropped meanwhile; try again")
	raced := imv2.Errorf(imv2.CodeChannelUnavailable, "%w", errRaced)
	full := imv2.Errorf(imv2.CodeChannelUnavailable, "at the channel limit")

	unavailable := &imv2.Error{Code: imv2.CodeChannelUnavailable}
	fmt.Println(errors.Is(raced, unavailable), errors.Is(full, unavailable))
	fmt.Println(errors.Is(raced, errRaced), errors.Is(full, errRaced))
	// Output:
	// true true
	// true false
}
