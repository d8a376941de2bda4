package imv2

import (
	"context"
	"strings"
	"testing"
)

// FuzzDeltaAssembler drives one delta stream with arbitrary (sequence,
// text) pairs and checks it against a model: a gap is rejected (D4), a
// retransmission is idempotent or a conflict (D3), the byte bound holds
// (D9), and the text is exactly the accepted deltas in order.
func FuzzDeltaAssembler(f *testing.F) {
	f.Add([]byte{1, 'a', 2, 'b', 2, 'b', 4, 'd', 1, 'x'})
	f.Add([]byte{2, 'z'})
	f.Add([]byte{1, 0, 1, 1})
	f.Fuzz(func(t *testing.T, ops []byte) {
		const maxBytes = 64
		s := &deltaStream{}
		var model []string
		size := 0
		for i := 0; i+1 < len(ops); i += 2 {
			seq := int64(ops[i]%12) + 1
			text := strings.Repeat(string(rune('a'+ops[i+1]%26)), int(ops[i+1]%5))
			grew, err := s.apply(seq, text, maxBytes, nil)
			n := int64(len(model))
			switch {
			case seq <= n && model[seq-1] == text:
				if grew || err != nil {
					t.Fatalf("retransmission of %d changed the stream: %v", seq, err)
				}
			case seq <= n:
				if err == nil || err.Code != CodeDeltaSequenceConflict {
					t.Fatalf("conflict at %d not rejected: %v", seq, err)
				}
			case seq > n+1:
				if err == nil || err.Code != CodeDeltaSequenceGap {
					t.Fatalf("gap at %d after %d not rejected: %v", seq, n, err)
				}
			case size+len(text)+deltaOverhead > maxBytes:
				if err == nil || err.Code != CodeDeltaLimitExceeded {
					t.Fatalf("bound not enforced: %v", err)
				}
			default:
				if grew != (text != "") || err != nil {
					t.Fatalf("delta %d: grew %v, %v", seq, grew, err)
				}
				model = append(model, text)
				size += len(text) + deltaOverhead
			}
			if got, want := s.text(), strings.Join(model, ""); got != want {
				t.Fatalf("assembled %q, want %q", got, want)
			}
		}
	})
}

// FuzzAckMatch hands arbitrary ack payloads and reply_to values to a
// channel with one pending message: no panic, and only a well-formed ack
// that answers one of its transmissions with its message_id resolves it (A2).
func FuzzAckMatch(f *testing.F) {
	f.Add([]byte(`{"message_id":"m1","status":"accepted"}`), true)
	f.Add([]byte(`{"message_id":"m1","status":"accepted"}`), false)
	f.Add([]byte(`{"message_id":"m2","status":"duplicate"}`), true)
	f.Add([]byte(`{"message_id":"m1","status":"rejected","code":"x","retryable":false}`), true)
	f.Add([]byte(`{"message_id":"m1","status":"rejected"}`), true)
	f.Add([]byte(`{"message_id":"m1","status":"weird"}`), true)
	f.Fuzz(func(t *testing.T, payload []byte, rightReply bool) {
		c, w, _ := newConnector(t, newRecTarget(), nil)
		if _, err := c.Send(context.Background(), ChatMessage{MessageID: "m1", Text: "x"}); err != nil {
			t.Fatal(err)
		}
		sent := w.next(t)
		ack := &Packet{Schema: PacketSchema, PacketID: "pkt_ack", ConnectorChannelID: "cch_1", Type: TypeChatMessageAck, Payload: payload, ReplyTo: "pkt_other"}
		if rightReply {
			ack.ReplyTo = sent.PacketID
		}
		_ = c.Receive(context.Background(), ack)
		pending, _ := c.Pending(context.Background())
		a, err := DecodeChatMessageAck(ack)
		resolves := err == nil && rightReply && a.MessageID == "m1" && (a.Status != AckRejected || !a.Retryable)
		if resolves != (len(pending) == 0) {
			t.Fatalf("ack %s (reply ok %v): pending %d", payload, rightReply, len(pending))
		}
	})
}
