package imv2

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestChannel_M12_AcceptedOnlyAfterTargetReturned(t *testing.T) {
	target := newRecTarget()
	target.gate = make(chan struct{})
	c, w, _ := newConnector(t, target, nil)

	p := finalPacket(t, "a1", "hello")
	require.NoError(t, c.Receive(context.Background(), p))
	w.none(t) // the Target has not returned: no ack yet (M12)
	close(target.gate)
	a := ackOf(t, p, w.next(t))
	require.Equal(t, AckAccepted, a.Status)
	require.Equal(t, "a1", a.MessageID, "A2: message_id")
	require.Equal(t, 1, target.postCount("a1"))
}

func TestChannel_A6_DuplicateWhileInFlightRunsTargetOnce(t *testing.T) {
	target := newRecTarget()
	target.gate = make(chan struct{})
	c, w, _ := newConnector(t, target, nil)

	first := finalPacket(t, "a1", "hello")
	resend := finalPacket(t, "a1", "hello") // same message, new transmission (I4)
	require.NoError(t, c.Receive(context.Background(), first))
	require.NoError(t, c.Receive(context.Background(), resend))
	w.none(t)
	close(target.gate)
	got := map[string]AckStatus{}
	for range 2 {
		p := w.next(t)
		a, err := DecodeChatMessageAck(p)
		require.NoError(t, err)
		got[p.ReplyTo] = a.Status
	}
	require.Equal(t, AckAccepted, got[first.PacketID])
	require.Equal(t, AckDuplicate, got[resend.PacketID])
	require.Equal(t, 1, target.postCount("a1"))

	// A later resend finds the completed record (S6, M9).
	again := finalPacket(t, "a1", "hello")
	require.NoError(t, c.Receive(context.Background(), again))
	require.Equal(t, AckDuplicate, ackOf(t, again, w.next(t)).Status)
	require.Equal(t, 1, target.postCount("a1"))
}

func TestChannel_S6_SameIDOtherContentIsConflict(t *testing.T) {
	target := newRecTarget()
	c, w, _ := newConnector(t, target, nil)
	p := finalPacket(t, "a1", "hello")
	require.NoError(t, c.Receive(context.Background(), p))
	require.Equal(t, AckAccepted, ackOf(t, p, w.next(t)).Status)

	other := finalPacket(t, "a1", "hello, changed")
	require.NoError(t, c.Receive(context.Background(), other))
	a := ackOf(t, other, w.next(t))
	require.Equal(t, AckRejected, a.Status)
	require.Equal(t, CodeMessageIDConflict, a.Code)
	require.False(t, a.Retryable)
	require.Equal(t, 1, target.postCount("a1"))
}

func TestChannel_A8_X5_TargetErrorKindSetsRetryable(t *testing.T) {
	for _, tc := range []struct {
		name      string
		err       error
		code      Code
		retryable bool
	}{
		{"retryable", NotPosted(errors.New("rate limited")), CodeTargetDeliveryFailed, true},
		{"permanent", Refused(errors.New("forbidden")), CodeTargetRejected, false},
		{"unmarked", errors.New("connection reset"), CodeDeliveryOutcomeUnknown, false},
		{"coded", &Error{Code: "platform_quota", Message: "quota", Retryable: false}, "platform_quota", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := newRecTarget()
			target.err = tc.err
			c, w, _ := newConnector(t, target, nil)
			p := finalPacket(t, "a1", "hello")
			require.NoError(t, c.Receive(context.Background(), p))
			a := ackOf(t, p, w.next(t))
			require.Equal(t, AckRejected, a.Status)
			require.Equal(t, tc.code, a.Code)
			require.Equal(t, tc.retryable, a.Retryable)

			// A failed delivery is not completed: the resend runs the Target
			// again — unless the failure may have been applied (unmarked:
			// the error contract), which no resend posts.
			target.mu.Lock()
			target.err = nil
			target.mu.Unlock()
			again := finalPacket(t, "a1", "hello")
			require.NoError(t, c.Receive(context.Background(), again))
			a = ackOf(t, again, w.next(t))
			if tc.code == CodeDeliveryOutcomeUnknown {
				require.Equal(t, CodeDeliveryOutcomeUnknown, a.Code)
				require.Zero(t, target.postCount("a1"), "not posted again: the claim stays")
				return
			}
			require.Equal(t, AckAccepted, a.Status)
		})
	}
}

func TestChannel_M13_FinalWithoutDeltas(t *testing.T) {
	target := newStreamTarget()
	c, w, _ := newConnector(t, target, nil)
	p := finalPacket(t, "a1", "whole answer")
	require.NoError(t, c.Receive(context.Background(), p))
	require.Equal(t, AckAccepted, ackOf(t, p, w.next(t)).Status)
	require.Empty(t, target.drafts)
	require.Equal(t, "whole answer", target.posts[0].Text)
}

func TestChannel_X3_InvalidMessageRejectedNotRetryable(t *testing.T) {
	var rejected []Event
	c, w, _ := newConnector(t, newRecTarget(), &Options{Observer: ObserverFunc(func(e Event) {
		if e.Kind == EventRejected {
			rejected = append(rejected, e)
		}
	})})
	p := finalPacket(t, "a1", "x")
	p.Payload = []byte(`{"message_id":"a1","text":"x","session_id":"s1"}`)
	err := c.Receive(context.Background(), p)
	require.ErrorIs(t, err, &Error{Code: CodeForbiddenField}, "I2")
	a := ackOf(t, p, w.next(t))
	require.Equal(t, AckRejected, a.Status)
	require.Equal(t, CodeForbiddenField, a.Code)
	require.False(t, a.Retryable, "A8: a payload error is deterministic")

	// No readable message_id: an error packet answers (E3).
	q := finalPacket(t, "a2", "x")
	q.Payload = []byte(`{"text":"x"}`)
	require.Error(t, c.Receive(context.Background(), q))
	e := w.next(t)
	require.Equal(t, TypeError, e.Type)
	require.Equal(t, q.PacketID, e.ReplyTo)
	require.Equal(t, CodeInvalidPacket, e.Error.Code)

	// EventRejected says which answer went (its doc): an ack has its
	// Status and MessageID, an error packet its PacketType.
	require.Equal(t, []Event{
		{Kind: EventRejected, ChannelID: "cch_1", MessageID: "a1", Status: AckRejected, Code: CodeForbiddenField},
		{Kind: EventRejected, ChannelID: "cch_1", PacketType: TypeChatMessage, Code: CodeInvalidPacket},
	}, rejected)
}

func TestChannel_P6_X1_ForbiddenDirectionDroppedSilently(t *testing.T) {
	var events []Event
	target := newRecTarget()
	x, w, _ := newXAgent(t, target, &Options{Observer: ObserverFunc(func(e Event) { events = append(events, e) })})
	// A Connector must never send deltas or activity (D1, C1).
	require.NoError(t, x.Receive(context.Background(), deltaPacket(t, "u1", 1, "hi")))
	require.NoError(t, x.Receive(context.Background(), activityPacket(t, ActivityThinking, "")))
	// A type no negotiated profile knows.
	unknown, err := NewPacket("session.sync_message", "cch_1", nil)
	require.NoError(t, err)
	require.NoError(t, x.Receive(context.Background(), unknown))
	w.none(t) // no error packet, no ack
	require.Len(t, events, 3)
	for _, e := range events {
		require.Equal(t, EventDropped, e.Kind)
	}
}

func TestChannel_P5_RenegotiateReplacesSet(t *testing.T) {
	target := newRecTarget()
	c, w, _ := newConnector(t, target, nil)
	c.Renegotiate(DefaultCatalog().Negotiate(nil, []string{ProfileIMv2})) // P3: nothing enabled
	require.NoError(t, c.Receive(context.Background(), finalPacket(t, "a1", "x")))
	w.none(t)
	require.Equal(t, 0, target.postCount("a1"))
	c.Renegotiate(imNegotiated())
	p := finalPacket(t, "a1", "x")
	require.NoError(t, c.Receive(context.Background(), p))
	require.Equal(t, AckAccepted, ackOf(t, p, w.next(t)).Status)
}

func TestChannel_InflightBoundRejectsRetryable(t *testing.T) {
	target := newRecTarget()
	target.gate = make(chan struct{})
	c, w, _ := newConnector(t, target, &Options{MaxInflight: 1})
	require.NoError(t, c.Receive(context.Background(), finalPacket(t, "a1", "x")))
	p := finalPacket(t, "a2", "y")
	require.Error(t, c.Receive(context.Background(), p))
	a := ackOf(t, p, w.next(t))
	require.Equal(t, CodeChannelBusy, a.Code)
	require.True(t, a.Retryable)
	close(target.gate)
	require.Equal(t, AckAccepted, mustAck(t, w.next(t)).Status)
}

func mustAck(t *testing.T, p *Packet) *ChatMessageAck {
	t.Helper()
	a, err := DecodeChatMessageAck(p)
	require.NoError(t, err)
	return a
}

// TestChannel_A4_M9_XAgentAcksWhenTakenAndDeduplicates: xAgent acks a user
// message once its handler took it — before any reply exists, since an ack
// says only that the message was received (A4) — and dedupes resends (M9).
func TestChannel_A4_M9_XAgentAcksWhenTakenAndDeduplicates(t *testing.T) {
	inbox := newRecTarget()
	x, w, _ := newXAgent(t, inbox, nil)
	p := userPacket(t, "u1", "hi")
	require.NoError(t, x.Receive(context.Background(), p))
	require.Equal(t, AckAccepted, ackOf(t, p, w.next(t)).Status)
	w.none(t) // A4: the ack is all; no reply is implied or awaited
	again := userPacket(t, "u1", "hi")
	require.NoError(t, x.Receive(context.Background(), again))
	require.Equal(t, AckDuplicate, ackOf(t, again, w.next(t)).Status)
	require.Equal(t, 1, inbox.postCount("u1"))
}

func TestChannel_CloseCancelsTargetAndStopsGoroutines(t *testing.T) {
	target := newRecTarget()
	target.gate = make(chan struct{}) // never opened: Close must cancel it
	c, _, _ := newConnector(t, target, nil)
	require.NoError(t, c.Receive(context.Background(), finalPacket(t, "a1", "x")))
	require.NoError(t, c.Close())
	require.ErrorIs(t, c.Receive(context.Background(), finalPacket(t, "a2", "x")), ErrClosed)
	_, err := c.Send(context.Background(), ChatMessage{Text: "x"})
	require.ErrorIs(t, err, ErrClosed)
}

// TestChannel_M14_FinalsPostedInArrivalOrder: two finals of one tool loop
// reach the platform in the order they arrived, even when the first post is
// slow; the second waits for it.
func TestChannel_M14_FinalsPostedInArrivalOrder(t *testing.T) {
	target := newRecTarget()
	target.gate = make(chan struct{})
	c, w, _ := newConnector(t, target, nil)
	first, second := finalPacket(t, "a1", "first"), finalPacket(t, "a2", "second")
	require.NoError(t, c.Receive(context.Background(), first))
	require.NoError(t, c.Receive(context.Background(), second))
	w.none(t)
	close(target.gate)
	require.Equal(t, "a1", recv(t, target.posted))
	require.Equal(t, "a2", recv(t, target.posted))
	ackOf(t, first, w.next(t))
	ackOf(t, second, w.next(t))
}

// TestChannel_A2_AckPayloadForEveryIDLength: the ack a delivery builds in
// its own room is the ack NewAck builds, for message IDs that fit the
// room and IDs that do not; an ack packet a Transport keeps (this one
// keeps the pointers, no copy) stays as sent when later messages are
// acknowledged.
func TestChannel_A2_AckPayloadForEveryIDLength(t *testing.T) {
	c, _, _ := newConnector(t, newRecTarget(), nil)
	kept := make(chan *Packet, 16)
	c.SetTransport(TransportFunc(func(_ context.Context, p *Packet) error { kept <- p; return nil }))
	var sent []*Packet
	var want []string
	for _, n := range []int{1, 40, 64, 65, 100, MaxIDBytes} {
		id := strings.Repeat("m", n)
		p := finalPacket(t, id, "hello")
		require.NoError(t, c.Receive(context.Background(), p))
		ack := recvPacket(t, kept)
		a := ackOf(t, p, ack)
		require.Equal(t, id, a.MessageID, "A2: message_id of %d bytes", n)
		ref, err := NewAck(p, id, AckAccepted, nil)
		require.NoError(t, err)
		require.Equal(t, string(ref.Payload), string(ack.Payload), "as NewAck builds it (%d bytes)", n)
		sent, want = append(sent, ack), append(want, string(ack.Payload))
	}
	for i, ack := range sent {
		require.Equal(t, want[i], string(ack.Payload), "ack %d unchanged by the later ones", i)
	}
}

func recvPacket(t *testing.T, ch <-chan *Packet) *Packet {
	t.Helper()
	select {
	case p := <-ch:
		return p
	case <-time.After(wait):
		t.Fatal("no packet sent")
		return nil
	}
}

// permanentOnCancel is a Target whose post is cut short by its context and
// which, like many platform clients, calls every failure it cannot
// classify permanent.
type permanentOnCancel struct{ started chan struct{} }

func (p permanentOnCancel) PostMessage(ctx context.Context, _ string, _ *ChatMessage) error {
	close(p.started)
	<-ctx.Done()
	return Refused(ctx.Err())
}

// TestChannel_A8_CloseDuringPostLetsTheSenderRetry: a final whose post
// Close cut short is never answered as refused, whatever the Target called
// its failure: it was not shown because this side stopped, so the
// sender's resend must be able to show it (A8). Two guards keep that:
// Close's ack is not sent at all (send refuses on a closed Channel) and,
// if it were, runTarget makes it retryable ("cancelled by Close"). The
// test fails only with both removed.
func TestChannel_A8_CloseDuringPostLetsTheSenderRetry(t *testing.T) {
	target := permanentOnCancel{started: make(chan struct{})}
	c, w, _ := newConnector(t, target, nil)
	p := finalPacket(t, "a1", "cut short")
	require.NoError(t, c.Receive(context.Background(), p))
	recv(t, target.started)
	require.NoError(t, c.Close()) // returns once the delivery ended
	select {
	case got := <-w.ch:
		ack := ackOf(t, p, got)
		require.Equal(t, AckRejected, ack.Status)
		require.True(t, ack.Retryable, "a post cut short by Close answered as refused (code %s: %s): the reply is lost", ack.Code, ack.Message)
	default: // not answered: the sender resends after its ack timeout
	}
}
