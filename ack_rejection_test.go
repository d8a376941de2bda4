package imv2

import (
	"context"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// TestReceive_A3_TargetErrorTextNeverStopsTheAck: a Target's error whose
// text is not UTF-8 (a platform's GBK body quoted into it) or whose code
// is no stable code still gets its rejection acked, with a code the wire
// takes and the text made valid. It used to get no ack at all: the ack
// failed its own check, so a refusal for good became a resend loop that
// called the Target again each time, until the sender's pending TTL.
func TestReceive_A3_TargetErrorTextNeverStopsTheAck(t *testing.T) {
	for _, tc := range []struct {
		name      string
		err       error
		code      Code
		retryable bool
		text      string // the message holds it
	}{
		{"GBK text", Refused(errors.New("platform said: \xb4\xed\xce\xf3")), CodeTargetRejected, false, "platform said: "},
		{"code over 256 bytes", &Error{Code: Code(strings.Repeat("x", 300)), Message: "m"}, CodeTargetRejected, false, "m"},
		{"code not UTF-8, retryable", &Error{Code: "bad\xff", Message: "m", Retryable: true}, CodeTargetDeliveryFailed, true, "m"},
		{"long text not UTF-8", Refused(errors.New(strings.Repeat("\xff", 2000))), CodeTargetRejected, false, "\uFFFD"},
		{"a stable code stays", &Error{Code: "platform_quota", Message: "quota \xff"}, "platform_quota", false, "quota \uFFFD"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg := newRecTarget()
			tg.err = tc.err
			c, w, _ := newConnector(t, tg, nil)
			orig := finalPacket(t, "m1", "hello")
			require.NoError(t, c.Receive(context.Background(), orig))
			a := ackOf(t, orig, w.next(t))
			require.Equal(t, AckRejected, a.Status)
			require.Equal(t, tc.code, a.Code)
			require.Equal(t, tc.retryable, a.Retryable)
			require.True(t, utf8.ValidString(a.Message))
			require.LessOrEqual(t, len(a.Message), maxAckMessageBytes)
			require.Contains(t, a.Message, tc.text)
		})
	}
}

// TestNewErrorPacket_W10_AlwaysEncodes: an error packet made of any
// *Error encodes: no code becomes invalid_packet, text that is not UTF-8
// is made valid and cut to 1,024 bytes.
func TestNewErrorPacket_W10_AlwaysEncodes(t *testing.T) {
	for _, e := range []*Error{
		{Message: "no code"},
		{Code: "tool_failed", Message: "GBK \xb4\xed"},
		{Code: Code("\xff"), Message: strings.Repeat("\xff", 3000)},
	} {
		p := NewErrorPacket(nil, e)
		if _, err := p.Encode(); err != nil {
			t.Fatalf("error packet of %q: %v", e.Code, err)
		}
		if !stableCode(p.Error.Code) || len(p.Error.Message) > maxAckMessageBytes {
			t.Fatalf("error %q %q", p.Error.Code, p.Error.Message)
		}
	}
}
