package imv2

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2/fakeclock"
)

// frameLimit is a transport that refuses, for good, a packet over its frame
// limit, as dataplane's Conn.Write does (W2).
type frameLimit struct {
	*wire
	limit int
}

func (f frameLimit) Send(ctx context.Context, p *Packet) error {
	b, err := p.Encode()
	if err != nil {
		return err
	}
	if len(b) > f.limit {
		return Errorf(CodeInvalidPacket, "%s packet is %d bytes, over the frame limit of %d (W2)", p.Type, len(b), f.limit)
	}
	return f.wire.Send(ctx, p)
}

// TestLimit_FrameSize_MaxTextMessageFailsAtOnce: a message of MaxTextBytes
// text plus its envelope is over dataplane's 1 MiB frame limit. The
// transport refuses it with a non-retryable invalid_packet; the Channel
// fails it at once — Send returns the error and OnFailed is told (S3) —
// instead of resending it with backoff until PendingTTL (an hour of
// pointless retries holding a pending slot). Found by the reliability work.
func TestLimit_FrameSize_MaxTextMessageFailsAtOnce(t *testing.T) {
	failed := make(chan *Error, 4)
	clk := fakeclock.New(t0) // time never moves: no resend, no expiry
	c, err := NewChannel("cch_1", RoleConnector, imNegotiated(), frameLimit{newWire(), 1 << 20}, newRecTarget(), &Options{
		Clock:    clk,
		OnFailed: func(_ string, _ ChatMessage, e *Error) { failed <- e },
	})
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Send(context.Background(), ChatMessage{MessageID: "max", Text: strings.Repeat("a", MaxTextBytes)})
	require.ErrorIs(t, err, &Error{Code: CodeInvalidPacket}, "the transport refused it for good")
	select {
	case e := <-failed:
		require.Equal(t, CodeInvalidPacket, e.Code)
	case <-time.After(wait):
		t.Fatal("OnFailed not called: the message waits for resends until PendingTTL")
	}
	pend, _ := c.Pending(context.Background())
	require.Empty(t, pend)
}
