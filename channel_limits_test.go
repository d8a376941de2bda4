package imv2

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Limit tests: one per bound of limits.go and Options, each named by what
// it bounds. Every one checks the stable code the caller or the peer gets,
// and that nothing else was dropped to make room.

// rawPacket builds a packet around a payload no constructor would build.
func rawPacket(typ string, payload any) *Packet {
	b, err := json.Marshal(payload)
	if err != nil {
		panic(err)
	}
	return &Packet{Schema: PacketSchema, PacketID: NewPacketID(), ConnectorChannelID: "cch_1", Type: typ, Payload: b}
}

// rejectedWith reads the ack answering orig and checks it is a rejection
// with code that the sender must not retry.
func rejectedWith(t *testing.T, w *wire, orig *Packet, code Code) {
	t.Helper()
	a := ackOf(t, orig, w.next(t))
	require.Equal(t, AckRejected, a.Status)
	require.Equal(t, code, a.Code)
	require.False(t, a.Retryable, "a message over a bound never succeeds on resend")
}

func TestLimit_TextBytesPerMessage(t *testing.T) {
	c, w, _ := newConnector(t, newRecTarget(), nil)
	_, err := c.Send(context.Background(), ChatMessage{MessageID: "big", Text: strings.Repeat("a", MaxTextBytes+1)})
	require.ErrorIs(t, err, &Error{Code: CodeInvalidPacket})
	require.Contains(t, err.Error(), "over 1048576")
	pend, _ := c.Pending(context.Background())
	require.Empty(t, pend, "a refused message is not queued")
	w.none(t)

	_, err = c.Send(context.Background(), ChatMessage{MessageID: "max", Text: strings.Repeat("a", MaxTextBytes)})
	require.NoError(t, err, "exactly MaxTextBytes is allowed")

	// Inbound: an xAgent channel rejects an oversized user message with an
	// ack the sender will not retry, and never calls its Target.
	target := newRecTarget()
	x, xw, _ := newXAgent(t, target, nil)
	p := rawPacket(TypeChatMessage, map[string]any{"message_id": "u1", "text": strings.Repeat("b", MaxTextBytes+1)})
	require.Error(t, x.Receive(context.Background(), p))
	rejectedWith(t, xw, p, CodeInvalidPacket)
	require.Zero(t, target.postCount("u1"))
}

func TestLimit_FilesPerMessage(t *testing.T) {
	files := func(n int) []File {
		fs := make([]File, n)
		for i := range fs {
			fs[i] = File{Type: FileFile, FileRef: fmt.Sprintf("ref_%02d", i), DownloadURL: "/files/refs/x"}
		}
		return fs
	}
	c, _, _ := newConnector(t, newRecTarget(), nil)
	_, err := c.Send(context.Background(), ChatMessage{MessageID: "m33", Files: files(MaxFilesPerMessage + 1)})
	require.ErrorIs(t, err, &Error{Code: CodeInvalidPacket})
	require.Contains(t, err.Error(), "33 files, over 32")
	_, err = c.Send(context.Background(), ChatMessage{MessageID: "m32", Files: files(MaxFilesPerMessage)})
	require.NoError(t, err)

	target := newRecTarget()
	x, xw, _ := newXAgent(t, target, nil)
	p := rawPacket(TypeChatMessage, map[string]any{"message_id": "u1", "files": files(MaxFilesPerMessage + 1)})
	require.Error(t, x.Receive(context.Background(), p))
	rejectedWith(t, xw, p, CodeInvalidPacket)
	require.Zero(t, target.postCount("u1"))
}

func TestLimit_FilenameLength(t *testing.T) {
	file := func(name string) File {
		return File{Type: FileFile, FileRef: "ref_1", Filename: name, DownloadURL: "/files/refs/ref_1"}
	}
	c, _, _ := newConnector(t, newRecTarget(), nil)
	_, err := c.Send(context.Background(), ChatMessage{MessageID: "long", Files: []File{file(strings.Repeat("n", MaxFilenameChars+1))}})
	require.ErrorIs(t, err, &Error{Code: CodeInvalidPacket})
	require.Contains(t, err.Error(), "filename is 256 characters")
	_, err = c.Send(context.Background(), ChatMessage{MessageID: "fits", Files: []File{file(strings.Repeat("n", MaxFilenameChars))}})
	require.NoError(t, err)
	// The bound counts characters: 255 of a three-byte script (765 bytes) fit.
	_, err = c.Send(context.Background(), ChatMessage{MessageID: "cjk", Files: []File{file(strings.Repeat("图", MaxFilenameChars))}})
	require.NoError(t, err)
	_, err = c.Send(context.Background(), ChatMessage{MessageID: "cjk-long", Files: []File{file(strings.Repeat("图", MaxFilenameChars+1))}})
	require.ErrorIs(t, err, &Error{Code: CodeInvalidPacket})

	target := newRecTarget()
	x, xw, _ := newXAgent(t, target, nil)
	p := rawPacket(TypeChatMessage, map[string]any{"message_id": "u1", "files": []File{file(strings.Repeat("n", MaxFilenameChars+1))}})
	require.Error(t, x.Receive(context.Background(), p))
	rejectedWith(t, xw, p, CodeInvalidPacket)
	require.Zero(t, target.postCount("u1"))
}

func TestLimit_IDBytes(t *testing.T) {
	c, _, _ := newConnector(t, newRecTarget(), nil)
	_, err := c.Send(context.Background(), ChatMessage{MessageID: strings.Repeat("i", MaxIDBytes+1), Text: "x"})
	require.ErrorIs(t, err, &Error{Code: CodeInvalidPacket})

	// An inbound message_id over the bound cannot even be echoed in an
	// ack: the answer is an error packet (E2), and no map keeps it.
	x, xw, _ := newXAgent(t, newRecTarget(), nil)
	p := rawPacket(TypeChatMessage, map[string]any{"message_id": strings.Repeat("i", MaxIDBytes+1), "text": "x"})
	require.Error(t, x.Receive(context.Background(), p))
	ans := xw.next(t)
	require.Equal(t, TypeError, ans.Type)
	require.Equal(t, CodeInvalidPacket, ans.Err().Code)
	require.Equal(t, p.PacketID, ans.ReplyTo)
}

func TestLimit_OpenDeltasPerChannel(t *testing.T) {
	target := newStreamTarget()
	c, w, _ := newConnector(t, target, &Options{MaxOpenDeltas: 2})
	ctx := context.Background()
	require.NoError(t, c.Receive(ctx, deltaPacket(t, "a", 1, "a1")))
	require.NoError(t, c.Receive(ctx, deltaPacket(t, "b", 1, "b1")))
	over := deltaPacket(t, "c", 1, "c1")
	require.ErrorIs(t, c.Receive(ctx, over), &Error{Code: CodeDeltaLimitExceeded})
	e := w.next(t)
	require.Equal(t, TypeError, e.Type)
	require.Equal(t, CodeDeltaLimitExceeded, e.Err().Code)
	require.Equal(t, over.PacketID, e.ReplyTo, "D12: the rejection names the delta")

	// The open streams are untouched, and a final frees a slot.
	require.NoError(t, c.Receive(ctx, deltaPacket(t, "a", 2, "a2")))
	fa := finalPacket(t, "a", "a1a2")
	require.NoError(t, c.Receive(ctx, fa))
	require.Equal(t, AckAccepted, ackOf(t, fa, w.next(t)).Status)
	require.NoError(t, c.Receive(ctx, deltaPacket(t, "c", 1, "c1")))
	// The refused stream's final still posts the whole text (D5).
	fc := finalPacket(t, "c", "c1c2")
	require.NoError(t, c.Receive(ctx, fc))
	require.Equal(t, AckAccepted, ackOf(t, fc, w.next(t)).Status)
	require.Equal(t, 1, target.postCount("c"))
}

func TestLimit_DeltaBytesPerMessage(t *testing.T) {
	target := newStreamTarget()
	c, w, _ := newConnector(t, target, &Options{MaxDeltaBytes: 24}) // text plus 8 bytes of index per delta
	ctx := context.Background()
	require.NoError(t, c.Receive(ctx, deltaPacket(t, "m", 1, "12345")))
	over := deltaPacket(t, "m", 2, "6789")
	require.ErrorIs(t, c.Receive(ctx, over), &Error{Code: CodeDeltaLimitExceeded})
	e := w.next(t)
	require.Equal(t, CodeDeltaLimitExceeded, e.Err().Code)
	f := finalPacket(t, "m", "123456789")
	require.NoError(t, c.Receive(ctx, f))
	require.Equal(t, AckAccepted, ackOf(t, f, w.next(t)).Status, "the final is not bound by the delta cache")
}

func TestLimit_PendingPerChannel(t *testing.T) {
	var failed []string
	c, w, _ := newConnector(t, newRecTarget(), &Options{
		Pending:  NewMemoryPendingStore(3),
		OnFailed: func(_ string, m ChatMessage, _ *Error) { failed = append(failed, m.MessageID) },
	})
	ctx := context.Background()
	sent := map[string]*Packet{}
	for _, id := range []string{"m1", "m2", "m3"} {
		_, err := c.Send(ctx, ChatMessage{MessageID: id, Text: id})
		require.NoError(t, err)
		sent[id] = w.next(t)
	}
	_, err := c.Send(ctx, ChatMessage{MessageID: "m4", Text: "m4"})
	require.ErrorIs(t, err, &Error{Code: CodePendingFull}, "the caller gets backpressure")
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Contains(t, e.Message, "3 pending messages")
	w.none(t)
	pend, _ := c.Pending(ctx)
	require.Len(t, pend, 3, "nothing already queued was dropped to make room")
	require.Empty(t, failed)

	// An ack frees a slot; the refused message can be sent again.
	ack, err := NewAck(sent["m1"], "m1", AckAccepted, nil)
	require.NoError(t, err)
	require.NoError(t, c.Receive(ctx, ack))
	_, err = c.Send(ctx, ChatMessage{MessageID: "m4", Text: "m4"})
	require.NoError(t, err)
	pend, _ = c.Pending(ctx)
	require.Len(t, pend, 3)
}

func TestLimit_InflightDeliveriesPerChannel(t *testing.T) {
	target := newRecTarget()
	target.gate = make(chan struct{})
	c, w, _ := newXAgent(t, target, &Options{MaxInflight: 1})
	ctx := context.Background()
	first := userPacket(t, "u1", "one")
	require.NoError(t, c.Receive(ctx, first))
	second := userPacket(t, "u2", "two")
	require.ErrorIs(t, c.Receive(ctx, second), &Error{Code: CodeChannelBusy})
	a := ackOf(t, second, w.next(t))
	require.Equal(t, AckRejected, a.Status)
	require.Equal(t, CodeChannelBusy, a.Code)
	require.True(t, a.Retryable, "busy is temporary: the sender resends after backoff")
	close(target.gate)
	require.Equal(t, AckAccepted, ackOf(t, first, w.next(t)).Status)
	require.Equal(t, 1, target.postCount("u1"))
	require.Zero(t, target.postCount("u2"))
}

func TestLimit_ResendsWaitingOnOneMessage(t *testing.T) {
	target := newRecTarget()
	target.gate = make(chan struct{})
	c, w, _ := newXAgent(t, target, &Options{MaxWaiters: 1})
	ctx := context.Background()
	first := userPacket(t, "u1", "one")
	require.NoError(t, c.Receive(ctx, first))
	waiter := userPacket(t, "u1", "one")
	require.NoError(t, c.Receive(ctx, waiter))
	extra := userPacket(t, "u1", "one")
	require.ErrorIs(t, c.Receive(ctx, extra), &Error{Code: CodeChannelBusy})
	a := ackOf(t, extra, w.next(t))
	require.Equal(t, CodeChannelBusy, a.Code)
	require.True(t, a.Retryable)
	close(target.gate)
	got := map[string]AckStatus{}
	for range 2 {
		p := w.next(t)
		a, err := DecodeChatMessageAck(p)
		require.NoError(t, err)
		got[p.ReplyTo] = a.Status
	}
	require.Equal(t, map[string]AckStatus{first.PacketID: AckAccepted, waiter.PacketID: AckDuplicate}, got)
	require.Equal(t, 1, target.postCount("u1"))
}
