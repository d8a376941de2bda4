package imv2

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestForbidden_E5_EachRuleWhereItApplies: every name of I2, M8 and C4 in
// every IM v2 payload, at the top, inside an unknown member and (for a
// message) inside a files[] item: the reference decoder refuses it with
// forbidden_field exactly where its rule applies (I2 everywhere, M8 in
// chat.message and its deltas, C4 in chat.activity), and the fast decoder
// takes exactly what the reference takes.
func TestForbidden_E5_EachRuleWhereItApplies(t *testing.T) {
	file := `{"type":"file","file_ref":"file_1","filename":"a","mime_type":"text/plain","byte_size":1,"expires_at":1,"download_url":"/a"%s}`
	shapes := map[string][]string{ // %s: the member, with its leading comma
		TypeChatMessage:      {`{"message_id":"m","text":"x"%s}`, `{"message_id":"m","text":"x","ext":{"k":1%s}}`, `{"message_id":"m","files":[` + file + `]}`},
		TypeChatMessageDelta: {`{"message_id":"m","sequence":1,"text":"x"%s}`, `{"message_id":"m","sequence":1,"text":"x","ext":[{"k":1%s}]}`},
		TypeChatMessageAck:   {`{"message_id":"m","status":"accepted"%s}`, `{"message_id":"m","status":"accepted","ext":{"k":1%s}}`},
		TypeChatActivity:     {`{"status":"thinking"%s}`, `{"status":"thinking","ext":{"k":1%s}}`},
	}
	fast := map[string]func([]byte) bool{
		TypeChatMessage:      func(b []byte) bool { _, ok := decodeChatMessageFast(b); return ok },
		TypeChatMessageDelta: func(b []byte) bool { _, ok := decodeDeltaFast(b); return ok },
		TypeChatMessageAck:   func(b []byte) bool { _, ok := decodeAckFast(b); return ok },
		TypeChatActivity:     func(b []byte) bool { _, ok := decodeActivityFast(b); return ok },
	}
	ref := map[string]func([]byte) error{
		TypeChatMessage:      func(b []byte) error { return decodeIMBytes(TypeChatMessage, b, new(ChatMessage)) },
		TypeChatMessageDelta: func(b []byte) error { return decodeIMBytes(TypeChatMessageDelta, b, new(ChatMessageDelta)) },
		TypeChatMessageAck:   func(b []byte) error { return decodeIMBytes(TypeChatMessageAck, b, new(ackWire)) },
		TypeChatActivity:     func(b []byte) error { return decodeIMBytes(TypeChatActivity, b, new(ChatActivity)) },
	}
	names := slices.Concat(identityFields, m8Fields, c4Fields)
	for typ, forms := range shapes {
		for _, name := range names {
			want := slices.Contains(identityFields, name) ||
				slices.Contains(m8Fields, name) && typ != TypeChatMessageAck ||
				slices.Contains(c4Fields, name) && typ == TypeChatActivity
			for _, form := range forms {
				payload := []byte(fmt.Sprintf(form, `,"`+name+`":1`))
				err := ref[typ](payload)
				if got := err != nil && AsError(err, "").Code == CodeForbiddenField; got != want {
					t.Errorf("%s %s: reference refuses %v (%v), want %v", typ, payload, got, err, want)
				}
				if err != nil && !strings.Contains(err.Error(), name) {
					t.Errorf("%s %s: %v does not name the member", typ, payload, err)
				}
				if ok := fast[typ](payload); ok != (err == nil) {
					t.Errorf("%s %s: fast decoder takes it %v, reference error %v", typ, payload, ok, err)
				}
			}
		}
	}
}
