package imv2

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// ackFor builds the peer's ack of a transmission we sent.
func ackFor(t *testing.T, sent *Packet, status AckStatus, rej *Error) *Packet {
	t.Helper()
	var head struct {
		MessageID string `json:"message_id"`
	}
	require.NoError(t, sent.DecodePayload(&head))
	a, err := NewAck(sent, head.MessageID, status, rej)
	require.NoError(t, err)
	return a
}

func TestSend_S1_PendingUntilTerminalAck(t *testing.T) {
	c, w, _ := newConnector(t, newRecTarget(), nil)
	id, err := c.Send(context.Background(), ChatMessage{Text: "user says hi"})
	require.NoError(t, err)
	sent := w.next(t)
	require.Equal(t, TypeChatMessage, sent.Type)
	pending, _ := c.Pending(context.Background())
	require.Len(t, pending, 1)
	require.Equal(t, id, pending[0].Message.MessageID)

	require.NoError(t, c.Receive(context.Background(), ackFor(t, sent, AckAccepted, nil)))
	pending, _ = c.Pending(context.Background())
	require.Empty(t, pending, "accepted removes it")
}

func TestSend_S1_DuplicateIsTerminalSuccess(t *testing.T) {
	var delivered []AckStatus
	c, w, _ := newConnector(t, newRecTarget(), &Options{OnDelivered: func(_ string, m ChatMessage, s AckStatus) {
		delivered = append(delivered, s)
	}})
	_, err := c.Send(context.Background(), ChatMessage{Text: "x"})
	require.NoError(t, err)
	require.NoError(t, c.Receive(context.Background(), ackFor(t, w.next(t), AckDuplicate, nil)))
	pending, _ := c.Pending(context.Background())
	require.Empty(t, pending)
	require.Equal(t, []AckStatus{AckDuplicate}, delivered)
}

func TestSend_S2_A5_AckTimeoutResendsSameMessage(t *testing.T) {
	c, w, clk := newConnector(t, newRecTarget(), &Options{AckTimeout: time.Second, RetryMin: time.Second, RetryMax: time.Second})
	id, err := c.Send(context.Background(), ChatMessage{Text: "hello", Files: []File{{Type: FileFile, FileRef: "f1", DownloadURL: "/files/refs/f1"}}})
	require.NoError(t, err)
	first := w.next(t)
	clk.Advance(time.Second) // ack timeout: never success (A5)
	clk.Advance(time.Second) // backoff elapsed
	second := w.next(t)
	require.NotEqual(t, first.PacketID, second.PacketID, "I4: a packet_id names one transmission")
	require.JSONEq(t, string(first.Payload), string(second.Payload), "S2: same message_id and content")
	m, err := DecodeChatMessage(second, ToXAgent)
	require.NoError(t, err)
	require.Equal(t, id, m.MessageID)

	// An ack of the first transmission still resolves it (A1).
	require.NoError(t, c.Receive(context.Background(), ackFor(t, first, AckAccepted, nil)))
	pending, _ := c.Pending(context.Background())
	require.Empty(t, pending)
	clk.Advance(time.Hour)
	w.none(t)
}

func TestSend_A7_RetryableRejectionResendsAfterBackoff(t *testing.T) {
	c, w, clk := newConnector(t, newRecTarget(), &Options{RetryMin: time.Second, RetryMax: time.Second})
	_, err := c.Send(context.Background(), ChatMessage{Text: "x"})
	require.NoError(t, err)
	sent := w.next(t)
	require.NoError(t, c.Receive(context.Background(), ackFor(t, sent, AckRejected, &Error{Code: "busy", Retryable: true})))
	w.none(t)
	clk.Advance(time.Second)
	again := w.next(t)
	require.JSONEq(t, string(sent.Payload), string(again.Payload))
}

func TestSend_S3_NonRetryableRejectionIsTerminalAndReported(t *testing.T) {
	var mu sync.Mutex
	var failed []*Error
	c, w, clk := newConnector(t, newRecTarget(), &Options{OnFailed: func(_ string, _ ChatMessage, err *Error) {
		mu.Lock()
		failed = append(failed, err)
		mu.Unlock()
	}})
	_, err := c.Send(context.Background(), ChatMessage{Text: "x"})
	require.NoError(t, err)
	sent := w.next(t)
	require.NoError(t, c.Receive(context.Background(), ackFor(t, sent, AckRejected, &Error{Code: "payload_refused", Message: "no", Retryable: false})))
	pending, _ := c.Pending(context.Background())
	require.Empty(t, pending)
	mu.Lock()
	require.Len(t, failed, 1)
	require.Equal(t, Code("payload_refused"), failed[0].Code)
	mu.Unlock()
	clk.Advance(time.Hour)
	w.none(t) // never repeated
}

// TestSend_A1_A2_OnlyTheMatchingAckResolves: the Channel matches an ack
// to a pending message by its reply_to (one of the message's
// transmissions, A1), its channel and its message_id (A2). An ack wrong
// in any one of them resolves nothing and is observed as unmatched; the
// ack NewAck builds for the transmission resolves it.
func TestSend_A1_A2_OnlyTheMatchingAckResolves(t *testing.T) {
	var mu sync.Mutex
	unmatched := 0
	c, w, _ := newConnector(t, newRecTarget(), &Options{Observer: ObserverFunc(func(e Event) {
		if e.Kind == EventAckUnmatched {
			mu.Lock()
			unmatched++
			mu.Unlock()
		}
	})})
	id, err := c.Send(context.Background(), ChatMessage{Text: "x"})
	require.NoError(t, err)
	sent := w.next(t)
	other, err := c.Send(context.Background(), ChatMessage{Text: "y"})
	require.NoError(t, err)
	otherSent := w.next(t)

	wrongReply := ackFor(t, sent, AckAccepted, nil)
	wrongReply.ReplyTo = "pkt_other"
	otherChannel := ackFor(t, sent, AckAccepted, nil)
	otherChannel.ConnectorChannelID = "cch_other"
	unknownID, err := NewAck(sent, "msg_other", AckAccepted, nil)
	require.NoError(t, err)
	crossed, err := NewAck(otherSent, id, AckAccepted, nil) // the other message's transmission, this message's ID
	require.NoError(t, err)
	for _, c2 := range []struct {
		name      string
		ack       *Packet
		unmatched bool // observed as unmatched; else refused as another channel's
	}{
		{"A1 reply_to names no transmission", wrongReply, true},
		{"A2 another channel", otherChannel, false},
		{"A2 a message_id nothing pending has", unknownID, true},
		{"A1 A2 reply_to of another pending message", crossed, true},
	} {
		mu.Lock()
		before := unmatched
		mu.Unlock()
		err := c.Receive(context.Background(), c2.ack)
		if c2.unmatched {
			require.NoError(t, err, c2.name)
		} else {
			require.ErrorIs(t, err, &Error{Code: CodeChannelNotOpen}, c2.name)
		}
		pending, _ := c.Pending(context.Background())
		require.Len(t, pending, 2, "%s: resolved something", c2.name)
		if c2.unmatched {
			before++
		}
		mu.Lock()
		require.Equal(t, before, unmatched, c2.name)
		mu.Unlock()
	}
	require.NoError(t, c.Receive(context.Background(), ackFor(t, sent, AckAccepted, nil)))
	pending, _ := c.Pending(context.Background())
	require.Len(t, pending, 1, "the matching ack resolves its message")
	require.Equal(t, other, pending[0].Message.MessageID)
}

func TestSend_A5_S10_DisconnectKeepsPendingReconnectResendsOnlyPending(t *testing.T) {
	c, w, clk := newConnector(t, newRecTarget(), nil)
	done, err := c.Send(context.Background(), ChatMessage{Text: "delivered"})
	require.NoError(t, err)
	require.NoError(t, c.Receive(context.Background(), ackFor(t, w.next(t), AckAccepted, nil)))
	open, err := c.Send(context.Background(), ChatMessage{Text: "in flight"})
	require.NoError(t, err)
	w.next(t)

	c.SetTransport(nil) // a disconnect is not success (A5)
	clk.Advance(time.Hour - time.Minute)
	w.none(t)
	pending, _ := c.Pending(context.Background())
	require.Len(t, pending, 1)

	w2 := newWire()
	c.SetTransport(w2)
	p := w2.next(t)
	m, err := DecodeChatMessage(p, ToXAgent)
	require.NoError(t, err)
	require.Equal(t, open, m.MessageID, "S10: only the pending message")
	require.NotEqual(t, done, m.MessageID)
	w2.none(t)
}

func TestSend_SendErrorRetries(t *testing.T) {
	c, w, clk := newConnector(t, newRecTarget(), &Options{RetryMin: time.Second, RetryMax: time.Second})
	w.mu.Lock()
	w.fail = errors.New("broken pipe")
	w.mu.Unlock()
	_, err := c.Send(context.Background(), ChatMessage{Text: "x"})
	require.NoError(t, err, "Send returns once pending")
	w.mu.Lock()
	w.fail = nil
	w.mu.Unlock()
	clk.Advance(time.Second)
	require.Equal(t, TypeChatMessage, w.next(t).Type)
}

func TestSend_PendingFullIsBackpressure(t *testing.T) {
	c, w, _ := newConnector(t, newRecTarget(), &Options{Pending: newMemoryPendingStore(2)})
	for range 2 {
		_, err := c.Send(context.Background(), ChatMessage{Text: "x"})
		require.NoError(t, err)
		w.next(t)
	}
	_, err := c.Send(context.Background(), ChatMessage{Text: "x"})
	require.ErrorIs(t, err, &Error{Code: CodePendingFull})
	pending, _ := c.Pending(context.Background())
	require.Len(t, pending, 2, "nothing dropped to make room")
}

func TestSend_PendingTTLExpiresAndReports(t *testing.T) {
	var got *Error
	c, w, clk := newConnector(t, newRecTarget(), &Options{
		AckTimeout: time.Minute, RetryMin: time.Minute, RetryMax: time.Minute, PendingTTL: 3 * time.Minute,
		OnFailed: func(_ string, _ ChatMessage, err *Error) { got = err },
	})
	_, err := c.Send(context.Background(), ChatMessage{Text: "x"})
	require.NoError(t, err)
	w.next(t)
	clk.Advance(2 * time.Minute)
	w.next(t)
	clk.Advance(2 * time.Minute)
	require.NotNil(t, got)
	require.Equal(t, CodeExpired, got.Code)
	pending, _ := c.Pending(context.Background())
	require.Empty(t, pending)
}

func TestSend_S8_RestartResendsStoredPending(t *testing.T) {
	store := newMemoryPendingStore(0)
	c, w, clk := newConnector(t, newRecTarget(), &Options{Pending: store})
	id, err := c.Send(context.Background(), ChatMessage{Text: "survives"})
	require.NoError(t, err)
	w.next(t)
	require.NoError(t, c.Close())

	w2 := newWire()
	c2, err := NewChannel("cch_1", RoleConnector, imNegotiated(), w2, newRecTarget(), &Options{Pending: store, Clock: clk})
	require.NoError(t, err)
	defer c2.Close()
	m, err := DecodeChatMessage(w2.next(t), ToXAgent)
	require.NoError(t, err)
	require.Equal(t, id, m.MessageID)
	require.Equal(t, "survives", m.Text)
}

func TestSend_M14_ReplyNumbersDeltasAndEndsWithFinal(t *testing.T) {
	x, w, _ := newXAgent(t, newRecTarget(), nil)
	r := x.NewReply("")
	for _, s := range []string{"a", "b", "c"} {
		require.NoError(t, r.Delta(context.Background(), s))
	}
	require.NoError(t, r.Final(context.Background(), ChatMessage{Text: "abc"}))
	for i := int64(1); i <= 3; i++ {
		d, err := DecodeChatMessageDelta(w.next(t))
		require.NoError(t, err)
		require.Equal(t, i, d.Sequence, "D2")
		require.Equal(t, r.MessageID(), d.MessageID)
	}
	m, err := DecodeChatMessage(w.next(t), ToConnector)
	require.NoError(t, err)
	require.Equal(t, r.MessageID(), m.MessageID)
	require.Error(t, r.Delta(context.Background(), "late"), "D6: no delta after the final")
	require.Error(t, r.Final(context.Background(), ChatMessage{Text: "again"}))
	// D7: a final may carry files; a delta cannot (it has no field for them).
	require.NoError(t, x.NewReply("").Final(context.Background(), ChatMessage{Files: []File{{Type: FileImage, FileRef: "f1"}}}))
}

func TestProject_P7_DefaultDenyOutbound(t *testing.T) {
	x, w, _ := newXAgent(t, newRecTarget(), nil)
	for _, kind := range []string{"session.sync_request", "session.sync_message", "session.sync_end", "history.snapshot", "history.replay", "ui.projection", "brand.new.kind"} {
		ok, err := x.Project(context.Background(), kind, &ChatMessage{Text: "leak"})
		require.NoError(t, err)
		require.False(t, ok, kind)
	}
	w.none(t)
	ok, err := x.Project(context.Background(), KindAssistantActivity, &ChatActivity{Status: ActivityThinking})
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, TypeChatActivity, w.next(t).Type)
	ok, err = x.Project(context.Background(), KindAssistantMessageFinal, &ChatMessage{Text: "done"})
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, TypeChatMessage, w.next(t).Type)
}

func TestSend_D1_C1_ConnectorCannotSendDeltasOrActivity(t *testing.T) {
	c, w, _ := newConnector(t, newRecTarget(), nil)
	require.ErrorIs(t, c.NewReply("").Delta(context.Background(), "x"), &Error{Code: CodeUnsupportedPacket})
	require.ErrorIs(t, c.SendActivity(context.Background(), ChatActivity{Status: ActivityIdle}), &Error{Code: CodeUnsupportedPacket})
	w.none(t)
}

func TestSend_S3_TransportRefusalFailsAtOnce(t *testing.T) {
	var got *Error
	c, w, clk := newConnector(t, newRecTarget(), &Options{OnFailed: func(_ string, _ ChatMessage, err *Error) { got = err }})
	w.mu.Lock()
	w.fail = Errorf(CodeInvalidPacket, "frame over the limit")
	w.mu.Unlock()
	_, err := c.Send(context.Background(), ChatMessage{Text: "huge"})
	require.ErrorIs(t, err, &Error{Code: CodeInvalidPacket}, "Send says so at once")
	require.NotNil(t, got, "reported through OnFailed")
	require.Equal(t, CodeInvalidPacket, got.Code)
	pending, _ := c.Pending(context.Background())
	require.Empty(t, pending)
	clk.Advance(time.Hour)
	require.Equal(t, 0, clk.Pending(), "no retry timer left")
}

func TestSend_S3_ExpiresWhileDisconnected(t *testing.T) {
	var got *Error
	c, w, clk := newConnector(t, newRecTarget(), &Options{PendingTTL: 10 * time.Minute,
		OnFailed: func(_ string, _ ChatMessage, err *Error) { got = err }})
	_, err := c.Send(context.Background(), ChatMessage{Text: "x"})
	require.NoError(t, err)
	w.next(t)
	c.SetTransport(nil) // and it never comes back
	clk.Advance(9 * time.Minute)
	require.Nil(t, got)
	clk.Advance(time.Minute)
	require.NotNil(t, got, "reported, never kept silently")
	require.Equal(t, CodeExpired, got.Code)
	pending, _ := c.Pending(context.Background())
	require.Empty(t, pending)
}

func TestChannel_SendAfterCloseFails(t *testing.T) {
	x, w, _ := newXAgent(t, newRecTarget(), nil)
	r := x.NewReply("")
	require.NoError(t, x.Close())
	require.ErrorIs(t, r.Delta(context.Background(), "late"), ErrClosed)
	require.ErrorIs(t, x.SendActivity(context.Background(), ChatActivity{Status: ActivityIdle}), ErrClosed)
	w.none(t)
}

// TestDrop_S7_FailsPendingKeepsCompleted: Drop reports every pending
// message and keeps the completed records (they expire by TTL), so a
// resend under the channel's replacement ID is still a duplicate.
func TestDrop_S7_FailsPendingKeepsCompleted(t *testing.T) {
	var failed []string
	completed := newMemoryCompletedStore(0, 0, nil)
	c, w, _ := newConnector(t, newRecTarget(), &Options{Completed: completed,
		OnFailed: func(_ string, m ChatMessage, err *Error) { failed = append(failed, m.MessageID+":"+string(err.Code)) }})
	id, err := c.Send(context.Background(), ChatMessage{Text: "x"})
	require.NoError(t, err)
	w.next(t)
	p := finalPacket(t, "a1", "done")
	require.NoError(t, c.Receive(context.Background(), p))
	ackOf(t, p, w.next(t))
	require.Equal(t, 1, completed.Len())

	require.NoError(t, c.Drop(context.Background()))
	require.Equal(t, []string{id + ":" + string(CodeChannelUnavailable)}, failed, "S7: reported, not silent")
	require.Equal(t, 1, completed.Len(), "completed records outlive the channel (dedup follows the message)")
	pending, _ := c.Pending(context.Background())
	require.Empty(t, pending)
}

func TestHandover_S2_PendingMovesWithSameContent(t *testing.T) {
	store := newMemoryPendingStore(0)
	x, w, _ := newXAgent(t, newRecTarget(), &Options{Pending: store})
	require.NoError(t, x.NewReply("a1").Final(context.Background(), ChatMessage{Text: "final"}))
	w.next(t)
	msgs, err := x.Handover(context.Background())
	require.NoError(t, err)
	require.Equal(t, []ChatMessage{{MessageID: "a1", Text: "final"}}, msgs)
	require.Equal(t, 0, store.Len("cch_1"))
}

// TestSend_S1_WindowHoldsBacklogUntilAcks: beyond MaxUnacked, messages stay
// pending without being transmitted, and go out in order as acks return —
// a backlog is not resent over and over while the receiver is busy.
func TestSend_S1_WindowHoldsBacklogUntilAcks(t *testing.T) {
	c, w, clk := newConnector(t, newRecTarget(), &Options{MaxUnacked: 2, AckTimeout: time.Second, RetryMin: time.Second, RetryMax: time.Second})
	var ids []string
	for i := range 5 {
		id, err := c.Send(context.Background(), ChatMessage{Text: string(rune('a' + i))})
		require.NoError(t, err)
		ids = append(ids, id)
	}
	first, second := w.next(t), w.next(t)
	w.none(t)
	pending, _ := c.Pending(context.Background())
	require.Len(t, pending, 5, "S1: all five are pending")

	clk.Advance(2 * time.Second) // timeouts resend only the window
	for range 2 {
		p := w.next(t)
		m, _ := DecodeChatMessage(p, ToXAgent)
		require.Contains(t, ids[:2], m.MessageID)
	}
	w.none(t)

	require.NoError(t, c.Receive(context.Background(), ackFor(t, first, AckAccepted, nil)))
	m, err := DecodeChatMessage(w.next(t), ToXAgent)
	require.NoError(t, err)
	require.Equal(t, ids[2], m.MessageID, "the next in order goes out")
	require.NoError(t, c.Receive(context.Background(), ackFor(t, second, AckAccepted, nil)))
	m, err = DecodeChatMessage(w.next(t), ToXAgent)
	require.NoError(t, err)
	require.Equal(t, ids[3], m.MessageID)
	w.none(t)
}

func TestSend_S3_WaitingMessageStillExpires(t *testing.T) {
	var failed []string
	c, w, clk := newConnector(t, newRecTarget(), &Options{MaxUnacked: 1, PendingTTL: time.Minute, AckTimeout: time.Hour,
		OnFailed: func(_ string, m ChatMessage, _ *Error) { failed = append(failed, m.MessageID) }})
	_, err := c.Send(context.Background(), ChatMessage{Text: "in window"})
	require.NoError(t, err)
	w.next(t)
	waiting, err := c.Send(context.Background(), ChatMessage{Text: "waiting"})
	require.NoError(t, err)
	clk.Advance(time.Minute)
	require.Contains(t, failed, waiting)
}

// TestChannel_S2_ResendLeavesTheFirstPacketAlone: the first transmission's
// packet lives in the pending entry; a resend gets a packet of its own, so
// a Transport that keeps the first (this one keeps the pointers, no copy)
// sees it unchanged, and the resend has a new packet_id and the same
// message (I4).
func TestChannel_S2_ResendLeavesTheFirstPacketAlone(t *testing.T) {
	c, _, clk := newConnector(t, newRecTarget(), &Options{AckTimeout: time.Second, RetryMin: time.Second, RetryMax: time.Second})
	kept := make(chan *Packet, 16)
	c.SetTransport(TransportFunc(func(_ context.Context, p *Packet) error { kept <- p; return nil }))
	id, err := c.Send(context.Background(), ChatMessage{Text: "hello"})
	require.NoError(t, err)
	first := recvPacket(t, kept)
	firstID, firstPayload := first.PacketID, string(first.Payload)
	var resend *Packet
	for i := 0; resend == nil && i < 10; i++ {
		clk.Advance(time.Second)
		select {
		case resend = <-kept:
		default:
		}
	}
	require.NotNil(t, resend, "resent after the ack timeout")
	require.NotSame(t, first, resend)
	require.Equal(t, firstID, first.PacketID, "the first packet is unchanged")
	require.NotEqual(t, firstID, resend.PacketID, "a new packet_id per transmission")
	require.Equal(t, firstPayload, string(resend.Payload), "the same message (I4)")
	require.Equal(t, id, mustMessageID(t, resend))
}
