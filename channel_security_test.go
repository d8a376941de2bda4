package imv2

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSecurity_I2_IdentityFieldsRejectedOnReceive sends every identity
// field I2 forbids in every IM v2 payload a channel receives, at the top
// level and inside files[]: each is answered with code forbidden_field (a
// rejected ack for a message whose message_id is readable, an error packet
// otherwise), and nothing reaches the Target.
func TestSecurity_I2_IdentityFieldsRejectedOnReceive(t *testing.T) {
	type rig struct {
		c      *Channel
		w      *wire
		target *streamTarget
	}
	connector := func(t *testing.T) rig {
		tg := newStreamTarget()
		c, w, _ := newConnector(t, tg, nil)
		return rig{c, w, tg}
	}
	xagent := func(t *testing.T) rig {
		tg := newStreamTarget()
		c, w, _ := newXAgent(t, tg, nil)
		return rig{c, w, tg}
	}
	file := map[string]any{"type": "file", "file_ref": "ref_1", "download_url": "/files/refs/ref_1"}
	cases := []struct {
		name    string
		rig     func(*testing.T) rig
		typ     string
		payload map[string]any
		nested  bool // the field goes into files[0]
		ack     bool // answered with a rejected ack (else an error packet)
	}{
		{"user message", xagent, TypeChatMessage, map[string]any{"message_id": "m1", "text": "hi"}, false, true},
		{"user message file", xagent, TypeChatMessage, map[string]any{"message_id": "m1", "files": []any{file}}, true, true},
		{"final", connector, TypeChatMessage, map[string]any{"message_id": "m1", "text": "hi"}, false, true},
		{"delta", connector, TypeChatMessageDelta, map[string]any{"message_id": "m1", "sequence": 1, "text": "h"}, false, false},
		{"activity", connector, TypeChatActivity, map[string]any{"status": "thinking"}, false, false},
		{"ack to connector", connector, TypeChatMessageAck, map[string]any{"message_id": "m1", "status": "accepted"}, false, false},
		{"ack to xagent", xagent, TypeChatMessageAck, map[string]any{"message_id": "m1", "status": "accepted"}, false, false},
	}
	for _, tc := range cases {
		for _, field := range identityFields {
			t.Run(tc.name+"/"+field, func(t *testing.T) {
				r := tc.rig(t)
				payload := map[string]any{}
				for k, v := range tc.payload {
					payload[k] = v
				}
				if tc.nested {
					f := map[string]any{field: "u_1"}
					for k, v := range file {
						f[k] = v
					}
					payload["files"] = []any{f}
				} else {
					payload[field] = "u_1"
				}
				p := rawPacket(tc.typ, payload)
				if tc.typ == TypeChatMessageAck {
					p.ReplyTo = "pkt_sent" // well-formed but for the payload
				}
				require.ErrorIs(t, r.c.Receive(context.Background(), p), &Error{Code: CodeForbiddenField})
				ans := r.w.next(t)
				require.Equal(t, p.PacketID, ans.ReplyTo)
				if tc.ack {
					a := ackOf(t, p, ans)
					require.Equal(t, AckRejected, a.Status)
					require.Equal(t, CodeForbiddenField, a.Code)
					require.False(t, a.Retryable)
				} else {
					require.Equal(t, TypeError, ans.Type)
					require.Equal(t, CodeForbiddenField, ans.Err().Code)
					require.Contains(t, ans.Err().Message, field)
				}
				r.target.mu.Lock()
				defer r.target.mu.Unlock()
				require.Empty(t, r.target.posts)
				require.Empty(t, r.target.drafts)
				require.Empty(t, r.target.acts)
			})
		}
	}
}
