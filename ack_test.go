package imv2_test

import (
	"errors"
	"testing"

	"github.com/xagentkit/imv2"
)

// origMessage returns a chat.message packet as a sender would keep it pending.
func origMessage(t *testing.T) (*imv2.Packet, string) {
	t.Helper()
	p, err := imv2.NewChatMessage("cch_1", imv2.ToXAgent, imv2.ChatMessage{MessageID: "msg_1", Text: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	p.RequestID = "req_1"
	return p, "msg_1"
}

func decodeAck(t *testing.T, p *imv2.Packet) (*imv2.Packet, *imv2.ChatMessageAck) {
	t.Helper()
	b, err := p.Encode()
	if err != nil {
		t.Fatal(err)
	}
	q, err := imv2.DecodePacket(b)
	if err != nil {
		t.Fatal(err)
	}
	a, err := imv2.DecodeChatMessageAck(q)
	if err != nil {
		t.Fatal(err)
	}
	return q, a
}

func TestNewAck_A1_A2_CopiesReplyToChannelAndMessageID(t *testing.T) {
	orig, id := origMessage(t)
	for _, st := range []imv2.AckStatus{imv2.AckAccepted, imv2.AckDuplicate} {
		p, err := imv2.NewAck(orig, id, st, nil)
		if err != nil {
			t.Fatal(err)
		}
		q, a := decodeAck(t, p)
		if q.ReplyTo != orig.PacketID || q.ConnectorChannelID != orig.ConnectorChannelID || q.RequestID != orig.RequestID {
			t.Errorf("%s: envelope %+v does not answer %+v", st, q, orig)
		}
		if q.PacketID == orig.PacketID {
			t.Errorf("%s: the ack reuses the original packet_id", st)
		}
		if a.MessageID != id || a.Status != st || a.Err() != nil {
			t.Errorf("%s: payload %+v", st, a)
		}
		if !imv2.MatchesAck(orig, id, q, a) {
			t.Errorf("%s: NewAck's ack does not match its original", st)
		}
	}
}

func TestNewAck_A3_A8_RejectedCarriesCodeAndRetryable(t *testing.T) {
	orig, id := origMessage(t)
	for _, retry := range []bool{false, true} {
		rej := &imv2.Error{Code: imv2.CodeTargetDeliveryFailed, Message: "platform said no", Retryable: retry}
		p, err := imv2.NewAck(orig, id, imv2.AckRejected, rej)
		if err != nil {
			t.Fatal(err)
		}
		_, a := decodeAck(t, p)
		e := a.Err()
		if e == nil || e.Code != rej.Code || e.Message != rej.Message || e.Retryable != retry {
			t.Errorf("retryable=%v: decoded rejection %+v", retry, e)
		}
		if imv2.IsRetryable(e) != retry {
			t.Errorf("IsRetryable = %v, want %v", !retry, retry)
		}
	}
}

func TestAckFor_A2_ReadsMessageIDFromPayload(t *testing.T) {
	orig, id := origMessage(t)
	p, err := imv2.AckFor(orig, imv2.AckAccepted, nil)
	if err != nil {
		t.Fatal(err)
	}
	q, a := decodeAck(t, p)
	if a.MessageID != id || q.ReplyTo != orig.PacketID {
		t.Errorf("AckFor: %+v %+v", q, a)
	}
}

func TestNewAck_A3_RefusesBadInput(t *testing.T) {
	orig, id := origMessage(t)
	delta, err := imv2.NewChatMessageDelta("cch_1", imv2.ChatMessageDelta{MessageID: "m", Sequence: 1, Text: "x"})
	if err != nil {
		t.Fatal(err)
	}
	noChannel := *orig
	noChannel.ConnectorChannelID = ""
	noPacketID := *orig
	noPacketID.PacketID = ""
	cases := []struct {
		name   string
		orig   *imv2.Packet
		id     string
		status imv2.AckStatus
		rej    *imv2.Error
		code   imv2.Code
	}{
		{"nil original", nil, id, imv2.AckAccepted, nil, imv2.CodeInvalidPacket},
		{"acks only chat.message", delta, "m", imv2.AckAccepted, nil, imv2.CodeInvalidPacket},
		{"rejection without error", orig, id, imv2.AckRejected, nil, imv2.CodeInvalidPacket},
		{"rejection without code", orig, id, imv2.AckRejected, &imv2.Error{}, imv2.CodeInvalidPacket},
		{"unknown status", orig, id, "ok", nil, imv2.CodeInvalidPacket},
		{"empty message_id", orig, "", imv2.AckAccepted, nil, imv2.CodeInvalidPacket},
		{"original without channel", &noChannel, id, imv2.AckAccepted, nil, imv2.CodeChannelIDRequired},
		{"original without packet_id", &noPacketID, id, imv2.AckAccepted, nil, imv2.CodeInvalidPacket},
	}
	for _, c := range cases {
		_, err := imv2.NewAck(c.orig, c.id, c.status, c.rej)
		if !errors.Is(err, &imv2.Error{Code: c.code}) {
			t.Errorf("%s: err = %v, want %s", c.name, err, c.code)
		}
	}
}

func TestNewAck_A3_TruncatesLongMessageOnRuneBoundary(t *testing.T) {
	orig, id := origMessage(t)
	long := ""
	const maxAckMessage = 1024 // the documented cap of a rejected ack's message
	for len(long) < maxAckMessage+10 {
		long += "é"
	}
	p, err := imv2.NewAck(orig, id, imv2.AckRejected, &imv2.Error{Code: "x", Message: "a" + long})
	if err != nil {
		t.Fatal(err)
	}
	_, a := decodeAck(t, p)
	if len(a.Message) > maxAckMessage || len(a.Message) < maxAckMessage-1 {
		t.Errorf("message is %d bytes", len(a.Message))
	}
}

func TestMatchesAck_A1_A2_RefusesMismatch(t *testing.T) {
	orig, id := origMessage(t)
	good, err := imv2.NewAck(orig, id, imv2.AckAccepted, nil)
	if err != nil {
		t.Fatal(err)
	}
	q, a := decodeAck(t, good)
	if !imv2.MatchesAck(orig, id, q, a) {
		t.Fatal("a matching ack does not match")
	}
	otherReply := *q
	otherReply.ReplyTo = "pkt_other"
	otherChannel := *q
	otherChannel.ConnectorChannelID = "cch_2"
	otherMsg := *a
	otherMsg.MessageID = "msg_2"
	cases := []struct {
		name   string
		orig   *imv2.Packet
		id     string
		ackPkt *imv2.Packet
		ack    *imv2.ChatMessageAck
	}{
		{"A1 reply_to names another packet", orig, id, &otherReply, a},
		{"A2 another channel", orig, id, &otherChannel, a},
		{"A2 another message_id", orig, id, q, &otherMsg},
		{"A2 pending message has another id", orig, "msg_9", q, a},
		{"nil original", nil, id, q, a},
		{"nil ack packet", orig, id, nil, a},
		{"nil ack", orig, id, q, nil},
	}
	for _, c := range cases {
		if imv2.MatchesAck(c.orig, c.id, c.ackPkt, c.ack) {
			t.Errorf("%s: matched", c.name)
		}
	}
}
