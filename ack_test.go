package imv2

import (
	"errors"
	"testing"
)

// origMessage returns a chat.message packet as a sender would keep it pending.
func origMessage(t *testing.T) (*Packet, string) {
	t.Helper()
	p, err := NewChatMessage("cch_1", ToXAgent, ChatMessage{MessageID: "msg_1", Text: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	p.RequestID = "req_1"
	return p, "msg_1"
}

func decodeAck(t *testing.T, p *Packet) (*Packet, *ChatMessageAck) {
	t.Helper()
	b, err := p.Encode()
	if err != nil {
		t.Fatal(err)
	}
	q, err := DecodePacket(b)
	if err != nil {
		t.Fatal(err)
	}
	a, err := DecodeChatMessageAck(q)
	if err != nil {
		t.Fatal(err)
	}
	return q, a
}

func TestNewAck_A1_A2_CopiesReplyToChannelAndMessageID(t *testing.T) {
	orig, id := origMessage(t)
	for _, st := range []AckStatus{AckAccepted, AckDuplicate} {
		p, err := NewAck(orig, id, st, nil)
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
		if a.MessageID != id || a.Status != st || a.rejection() != nil {
			t.Errorf("%s: payload %+v", st, a)
		}
	}
}

func TestNewAck_A3_A8_RejectedCarriesCodeAndRetryable(t *testing.T) {
	orig, id := origMessage(t)
	for _, retry := range []bool{false, true} {
		rej := &Error{Code: CodeTargetDeliveryFailed, Message: "platform said no", Retryable: retry}
		p, err := NewAck(orig, id, AckRejected, rej)
		if err != nil {
			t.Fatal(err)
		}
		_, a := decodeAck(t, p)
		e := a.rejection()
		if e == nil || e.Code != rej.Code || e.Message != rej.Message || e.Retryable != retry {
			t.Errorf("retryable=%v: decoded rejection %+v", retry, e)
		}
		if SafeToRetry(e) != retry {
			t.Errorf("IsRetryable = %v, want %v", !retry, retry)
		}
	}
}

func TestNewAck_A3_RefusesBadInput(t *testing.T) {
	orig, id := origMessage(t)
	delta, err := NewChatMessageDelta("cch_1", ChatMessageDelta{MessageID: "m", Sequence: 1, Text: "x"})
	if err != nil {
		t.Fatal(err)
	}
	noChannel := *orig
	noChannel.ConnectorChannelID = ""
	noPacketID := *orig
	noPacketID.PacketID = ""
	cases := []struct {
		name   string
		orig   *Packet
		id     string
		status AckStatus
		rej    *Error
		code   Code
	}{
		{"nil original", nil, id, AckAccepted, nil, CodeInvalidPacket},
		{"acks only chat.message", delta, "m", AckAccepted, nil, CodeInvalidPacket},
		{"rejection without error", orig, id, AckRejected, nil, CodeInvalidPacket},
		{"rejection without code", orig, id, AckRejected, &Error{}, CodeInvalidPacket},
		{"unknown status", orig, id, "ok", nil, CodeInvalidPacket},
		{"empty message_id", orig, "", AckAccepted, nil, CodeInvalidPacket},
		{"original without channel", &noChannel, id, AckAccepted, nil, CodeChannelIDRequired},
		{"original without packet_id", &noPacketID, id, AckAccepted, nil, CodeInvalidPacket},
	}
	for _, c := range cases {
		_, err := NewAck(c.orig, c.id, c.status, c.rej)
		if !errors.Is(err, &Error{Code: c.code}) {
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
	p, err := NewAck(orig, id, AckRejected, &Error{Code: "x", Message: "a" + long})
	if err != nil {
		t.Fatal(err)
	}
	_, a := decodeAck(t, p)
	if len(a.Message) > maxAckMessage || len(a.Message) < maxAckMessage-1 {
		t.Errorf("message is %d bytes", len(a.Message))
	}
}
