package imv2

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestForbidden_E5_EachRuleWhereItApplies: every name of I2, M8 and C4 in
// every IM v2 payload, at the top, inside an unknown member and (for a
// message) inside a files[] item and inside an unknown member of one: the
// reference decoder refuses it with forbidden_field exactly where its rule
// applies (I2 everywhere at any depth; M8 at a chat.message's or a delta's
// top level and in a files[] item, not inside a member the SDK does not
// know; C4, with M8, at chat.activity's top level, and inside an unknown
// member of one only c4DeepFields, so {"usage":{"input":812}} is read),
// and the fast decoder
// takes exactly what the reference takes.
func TestForbidden_E5_EachRuleWhereItApplies(t *testing.T) {
	file := `{"type":"file","file_ref":"file_1","filename":"a","mime_type":"text/plain","byte_size":1,"expires_at":1,"download_url":"/a"%s}`
	type form struct {
		shape string // %s: the member, with its leading comma
		deep  bool   // inside a member the SDK does not know
	}
	shapes := map[string][]form{
		TypeChatMessage: {
			{`{"message_id":"m","text":"x"%s}`, false},
			{`{"message_id":"m","text":"x","ext":{"k":1%s}}`, true},
			{`{"message_id":"m","files":[` + file + `]}`, false},
			{`{"message_id":"m","files":[` + fmt.Sprintf(file, `,"metadata":{"k":1%s}`) + `]}`, true},
			{`{"message_id":"m","text":"x","quote":{"message_id":"q"%s}}`, true},
		},
		TypeChatMessageDelta: {{`{"message_id":"m","sequence":1,"text":"x"%s}`, false}, {`{"message_id":"m","sequence":1,"text":"x","ext":[{"k":1%s}]}`, true}},
		TypeChatMessageAck:   {{`{"message_id":"m","status":"accepted"%s}`, false}, {`{"message_id":"m","status":"accepted","ext":{"k":1%s}}`, true}},
		TypeChatActivity:     {{`{"status":"thinking"%s}`, false}, {`{"status":"thinking","ext":{"k":1%s}}`, true}},
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
			for _, f := range forms {
				i2, m8, c4 := slices.Contains(identityFields, name), slices.Contains(m8Fields, name), slices.Contains(c4Fields, name)
				c4Deep := slices.Contains(c4DeepFields, name)
				want := i2 ||
					m8 && !f.deep && typ != TypeChatMessageAck ||
					(m8 || c4) && !f.deep && typ == TypeChatActivity ||
					c4Deep && f.deep && typ == TypeChatActivity
				payload := []byte(fmt.Sprintf(f.shape, `,"`+name+`":1`))
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

// TestForbidden_C4_DeepNamesAreForbiddenAtTheTop: every name refused
// inside an unknown member of an activity is refused at its top level
// too, so c4DeepFields only narrows where a name is read as content.
func TestForbidden_C4_DeepNamesAreForbiddenAtTheTop(t *testing.T) {
	for _, name := range c4DeepFields {
		if forbiddenRules[name]&rulesOf(TypeChatActivity) == 0 {
			t.Errorf("%q is refused deep in an activity but not at its top", name)
		}
	}
}
