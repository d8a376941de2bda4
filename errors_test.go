package imv2_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

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
	e := imv2.AsError(imv2.Permanent(errors.New("403 forbidden")), imv2.CodeTargetDeliveryFailed)
	if e.Code != imv2.CodeTargetDeliveryFailed || e.Retryable || e.Message != "403 forbidden" {
		t.Errorf("AsError(Permanent) = %+v", e)
	}
	e = imv2.AsError(context.DeadlineExceeded, imv2.CodeTargetDeliveryFailed)
	if !e.Retryable || !errors.Is(e, context.DeadlineExceeded) {
		t.Errorf("AsError(timeout) = %+v, want retryable with the cause kept", e)
	}
}

func TestRetryable_A8_Classification(t *testing.T) {
	netErr := errors.New("connection reset")
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"Retryable", imv2.Retryable(netErr), true},
		{"Permanent", imv2.Permanent(netErr), false},
		{"wrapped Permanent", fmt.Errorf("post: %w", imv2.Permanent(netErr)), false},
		{"wrapped Retryable", fmt.Errorf("post: %w", imv2.Retryable(netErr)), true},
		{"outermost mark wins", imv2.Permanent(imv2.Retryable(netErr)), false},
		{"retryable *Error", &imv2.Error{Code: "rate_limited", Retryable: true}, true},
		{"permanent *Error", &imv2.Error{Code: imv2.CodeTargetRejected}, false},
		{"unmarked error is retryable", netErr, true},
	}
	for _, c := range cases {
		if got := imv2.IsRetryable(c.err); got != c.want {
			t.Errorf("%s: IsRetryable = %v, want %v", c.name, got, c.want)
		}
	}
	if imv2.Retryable(nil) != nil || imv2.Permanent(nil) != nil {
		t.Error("Retryable(nil) and Permanent(nil) must be nil")
	}
	p := imv2.Permanent(netErr)
	if !errors.Is(p, netErr) || p.Error() != netErr.Error() {
		t.Error("the mark must keep the original error and text")
	}
}
