package imv2

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// onWire encodes p and decodes the frame as a transport does.
func onWire(t *testing.T, p *Packet) *Packet {
	t.Helper()
	b, err := p.Encode()
	require.NoError(t, err)
	q, err := DecodePacket(b)
	require.NoError(t, err)
	return q
}

// requireTaken fails unless DecodePacket decoded p's payload with its
// envelope and a typed decoder took that value.
func requireTaken(t *testing.T, p *Packet) {
	t.Helper()
	require.NotNil(t, p.decoded, "%s: DecodePacket did not decode the payload in its pass", p.Type)
	require.True(t, p.decoded.taken.Load(), "%s: the receive path decoded the payload a second time", p.Type)
}

// TestChannel_ReceiveDecodesThePayloadOnce: on the receive path
// (DecodePacket, then Channel.Receive) each of the four IM v2 payloads is
// walked once: the Channel's typed decoder takes the value DecodePacket
// decoded with the envelope.
func TestChannel_ReceiveDecodesThePayloadOnce(t *testing.T) {
	ctx := context.Background()
	c, w, _ := newConnector(t, newStreamTarget(), nil)
	for _, p := range []*Packet{
		activityPacket(t, ActivityTool, "web_search"),
		deltaPacket(t, "a1", 1, "hel"),
		finalPacket(t, "a1", "hello"),
	} {
		q := onWire(t, p)
		require.NoError(t, c.Receive(ctx, q))
		if q.Type == TypeChatMessage {
			ackOf(t, q, w.next(t))
		}
		requireTaken(t, q)
	}

	// An ack, on the side that sent the message.
	_, err := c.Send(ctx, ChatMessage{Text: "x"})
	require.NoError(t, err)
	ack := onWire(t, ackFor(t, w.next(t), AckAccepted, nil))
	require.NoError(t, c.Receive(ctx, ack))
	requireTaken(t, ack)
	pending, _ := c.Pending(ctx)
	require.Empty(t, pending)
}

// TestDecodedPayload_TakenOnce: the value decoded with the envelope goes
// to one caller; a second decode of the packet, or of a copy of it, gets
// a value of its own, equal to the first; a packet whose Payload was
// replaced decodes the new payload.
func TestDecodedPayload_TakenOnce(t *testing.T) {
	p := onWire(t, finalPacket(t, "a1", "hello"))
	cp := *p
	m1, err := DecodeChatMessage(p, ToConnector)
	require.NoError(t, err)
	m2, err := DecodeChatMessage(p, ToConnector)
	require.NoError(t, err)
	m3, err := DecodeChatMessage(&cp, ToConnector)
	require.NoError(t, err)
	require.NotSame(t, m1, m2)
	require.NotSame(t, m1, m3)
	require.Equal(t, m1, m2)
	require.Equal(t, m1, m3)

	// Two goroutines decoding one packet: one takes the value, the other
	// decodes its own (run with -race).
	c := onWire(t, finalPacket(t, "a1", "hello"))
	var got [2]*ChatMessage
	var wg sync.WaitGroup
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], _ = DecodeChatMessage(c, ToConnector)
		}()
	}
	wg.Wait()
	require.NotNil(t, got[0])
	require.NotNil(t, got[1])
	require.NotSame(t, got[0], got[1])
	require.Equal(t, got[0], got[1])

	q := onWire(t, finalPacket(t, "a1", "hello"))
	other := onWire(t, finalPacket(t, "a2", "other"))
	q.Payload = other.Payload
	m, err := DecodeChatMessage(q, ToConnector)
	require.NoError(t, err)
	require.Equal(t, "a2", m.MessageID, "the replaced payload is decoded, not the one decoded with the envelope")

	r := onWire(t, finalPacket(t, "a1", "hello"))
	r.Payload = r.Payload[:len(r.Payload)-1] // same array, shorter: no longer an object
	_, err = DecodeChatMessage(r, ToConnector)
	require.ErrorIs(t, err, ErrInvalidPacket)

	s := onWire(t, finalPacket(t, "a1", "hello"))
	s.Type = TypeChatMessageDelta // the value decoded is a message, not a delta
	_, err = DecodeChatMessageDelta(s)
	require.ErrorIs(t, err, ErrInvalidPacket)
}
