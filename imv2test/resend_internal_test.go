package imv2test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2"
)

// ackFrame is a chat.message.ack answering packetID, as the peer decodes it.
func ackFrame(t *testing.T, packetID string, payload map[string]any) *frame {
	t.Helper()
	data, err := json.Marshal(map[string]any{"type": imv2.TypeChatMessageAck, "reply_to": packetID, "payload": payload})
	require.NoError(t, err)
	doc, err := decodeJSON(string(data))
	require.NoError(t, err)
	return &frame{p: &imv2.Packet{Type: imv2.TypeChatMessageAck, ReplyTo: packetID}, raw: data, doc: doc}
}

func testResender(t *testing.T) (*resender, chan *imv2.Packet) {
	rs := newResender(&Config{RetryAttempts: 8, RetryMin: time.Millisecond, RetryBudget: time.Minute}, func(string, ...any) {})
	t.Cleanup(rs.close)
	return rs, make(chan *imv2.Packet, 1)
}

var retryable = map[string]any{"message_id": "m1", "status": "rejected", "code": "channel_busy", "retryable": true}

// TestResend_A8_TerminalAckForgetsEveryTransmission: a final rejected
// retryable twice and then accepted leaves nothing in the resender's map.
// Before, every resend's packet_id stayed (up to 9 per final, beside the
// cap) and a terminal ack removed none.
func TestResend_A8_TerminalAckForgetsEveryTransmission(t *testing.T) {
	for _, terminal := range []map[string]any{
		{"message_id": "m1", "status": "accepted"},
		{"message_id": "m1", "status": "duplicate"},
		{"message_id": "m1", "status": "rejected", "code": "invalid_packet", "retryable": false},
	} {
		rs, sent := testResender(t)
		send := func(p *imv2.Packet) error { sent <- p; return nil }
		release := func(*frame) { t.Error("no resend failed") }
		rs.track(&imv2.Packet{Type: imv2.TypeChatMessage, PacketID: "pkt_orig"})
		last := "pkt_orig"
		for range 2 {
			require.True(t, rs.onAck(ackFrame(t, last, retryable), send, release), "held back for a resend")
			p := <-sent
			assert.Equal(t, "pkt_orig", rs.origin(p.PacketID), "a resend answers for the script's packet")
			last = p.PacketID
		}
		require.False(t, rs.onAck(ackFrame(t, last, terminal), send, release), "a terminal answer goes to the script")
		rs.mu.Lock()
		assert.Empty(t, rs.finals, "status %v: every transmission forgotten", terminal["status"])
		rs.mu.Unlock()
	}
}

// TestResend_A8_ResendsCountAgainstTheCap: with maxTrackedFinals finals
// unanswered, a retryable rejection is handed to the script instead of
// resent, and the map never grows past the cap. Before, each resend added
// an entry beyond it.
func TestResend_A8_ResendsCountAgainstTheCap(t *testing.T) {
	rs, sent := testResender(t)
	send := func(p *imv2.Packet) error { sent <- p; return nil }
	for i := range maxTrackedFinals + 1 { // the last one is not tracked
		rs.track(&imv2.Packet{Type: imv2.TypeChatMessage, PacketID: fmt.Sprintf("pkt_%d", i)})
	}
	rs.mu.Lock()
	require.Len(t, rs.finals, maxTrackedFinals)
	rs.mu.Unlock()
	assert.False(t, rs.onAck(ackFrame(t, "pkt_0", retryable), send, func(*frame) {}), "not resent at the cap")
	rs.mu.Lock()
	defer rs.mu.Unlock()
	assert.LessOrEqual(t, len(rs.finals), maxTrackedFinals)
	assert.Empty(t, sent)
}

// TestResend_A8_RetryMaxCapsTheBackoff: with RetryMax the backoff stops
// doubling at the cap, so a final held behind an earlier one is resent
// soon after that one went through; without it the delay keeps doubling.
func TestResend_A8_RetryMaxCapsTheBackoff(t *testing.T) {
	for _, c := range []struct {
		max  time.Duration
		want string
	}{{0, "resend 6 in 3.2s"}, {400 * time.Millisecond, "resend 6 in 400ms"}} {
		var lines []string
		rs := newResender(&Config{RetryAttempts: 8, RetryMin: 100 * time.Millisecond, RetryMax: c.max, RetryBudget: time.Hour},
			func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) })
		send := func(*imv2.Packet) error { return nil }
		rs.track(&imv2.Packet{Type: imv2.TypeChatMessage, PacketID: "pkt_orig"})
		last := "pkt_orig"
		for range 6 {
			require.True(t, rs.onAck(ackFrame(t, last, retryable), send, func(*frame) {}))
			rs.mu.Lock()
			f := rs.finals["pkt_orig"]
			last = f.ids[len(f.ids)-1]
			rs.mu.Unlock()
		}
		rs.close()
		assert.Contains(t, lines[len(lines)-1], c.want, "RetryMax %v", c.max)
	}
}
