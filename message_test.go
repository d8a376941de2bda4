package imv2

import (
	"errors"
	"strings"
	"testing"
)

func TestNewChatMessage_M2_GeneratesMessageID(t *testing.T) {
	p, err := NewChatMessage("cch_1", ToConnector, ChatMessage{Text: "final"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := DecodeChatMessage(p, ToConnector)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(m.MessageID, "msg_") || m.MessageID == p.PacketID {
		t.Errorf("message_id %q (packet_id %q): I4 keeps them apart", m.MessageID, p.PacketID)
	}
	q, _ := NewChatMessage("cch_1", ToConnector, ChatMessage{Text: "final"})
	m2, _ := DecodeChatMessage(q, ToConnector)
	if m2.MessageID == m.MessageID {
		t.Error("two messages got one message_id")
	}
}

func TestNewChatMessage_I1_M3_M6_Refuses(t *testing.T) {
	cases := []struct {
		name string
		ch   string
		dir  Direction
		m    ChatMessage
		code Code
	}{
		{"I1 no channel", "", ToXAgent, ChatMessage{Text: "x"}, CodeChannelIDRequired},
		{"M3 empty", "c", ToXAgent, ChatMessage{}, CodeInvalidPacket},
		{"M6 no download_url", "c", ToXAgent, ChatMessage{Files: []File{{Type: FileImage, FileRef: "f"}}}, CodeInvalidPacket},
		{"M1 no direction", "c", 0, ChatMessage{Text: "x"}, CodeInvalidPacket},
	}
	for _, c := range cases {
		if _, err := NewChatMessage(c.ch, c.dir, c.m); !errors.Is(err, &Error{Code: c.code}) {
			t.Errorf("%s: %v, want %s", c.name, err, c.code)
		}
	}
	if _, err := NewChatMessage("c", ToConnector, ChatMessage{Files: []File{{Type: FileImage, FileRef: "f"}}}); err != nil {
		t.Errorf("M7: an uploaded file needs no download_url: %v", err)
	}
}

func TestCheckDownloadURL_M6_M8(t *testing.T) {
	ok := []string{"/files/refs/a", "files/refs/a", "https://c.example/a?sig=1", "HTTP://c.example:8080/a", "./a"}
	for _, u := range ok {
		if err := CheckDownloadURL(u); err != nil {
			t.Errorf("%q: %v", u, err)
		}
	}
	bad := map[string]Code{
		"file:///etc/passwd":            CodeInvalidPacket,
		"data:text/plain,hi":            CodeInvalidPacket,
		"//cdn.example/a":               CodeInvalidPacket,
		"https:///a":                    CodeInvalidPacket,
		"https://u:p@c.example/a":       CodeForbiddenField,
		"?only=query":                   CodeInvalidPacket,
		"http://[::1":                   CodeInvalidPacket,
		"/" + strings.Repeat("a", 4096): CodeInvalidPacket,
	}
	for u, code := range bad {
		if err := CheckDownloadURL(u); !errors.Is(err, &Error{Code: code}) {
			t.Errorf("%.40q: %v, want %s", u, err, code)
		}
	}
}

func TestTypedDecoders_I1_RefuseOtherTypes(t *testing.T) {
	p, err := NewPacket("ping", "cch_1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeChatMessage(p, ToXAgent); !errors.Is(err, &Error{Code: CodeInvalidPacket}) {
		t.Error("DecodeChatMessage took a ping")
	}
	if _, err := DecodeChatMessageDelta(p); !errors.Is(err, &Error{Code: CodeInvalidPacket}) {
		t.Error("DecodeChatMessageDelta took a ping")
	}
	if _, err := DecodeChatMessageAck(p); !errors.Is(err, &Error{Code: CodeInvalidPacket}) {
		t.Error("DecodeChatMessageAck took a ping")
	}
	if _, err := DecodeChatActivity(p); !errors.Is(err, &Error{Code: CodeInvalidPacket}) {
		t.Error("DecodeChatActivity took a ping")
	}
}

func TestNewChatMessageDelta_D1_D2_AndActivity_C1_C3(t *testing.T) {
	if _, err := NewChatMessageDelta("c", ChatMessageDelta{MessageID: "m", Sequence: 0, Text: "x"}); !errors.Is(err, &Error{Code: CodeInvalidPacket}) {
		t.Error("D2: sequence 0 was sent")
	}
	d := ChatMessageDelta{MessageID: "m", Sequence: 1, Text: "x"}
	if err := d.Validate(ToXAgent); !errors.Is(err, &Error{Code: CodeInvalidPacket}) {
		t.Error("D1: a delta toward xAgent validated")
	}
	a := ChatActivity{Status: ActivityThinking}
	if err := a.Validate(ToXAgent); !errors.Is(err, &Error{Code: CodeInvalidPacket}) {
		t.Error("C1: activity toward xAgent validated")
	}
	if _, err := newChatActivity("c", ChatActivity{Status: ActivityIdle, ToolName: "x"}); !errors.Is(err, &Error{Code: CodeInvalidPacket}) {
		t.Error("C3: idle with tool_name was sent")
	}
	if _, err := newChatActivity("", a); !errors.Is(err, &Error{Code: CodeChannelIDRequired}) {
		t.Error("I1: activity without a channel was sent")
	}
}

// The codec's omitempty does not omit numbers, so unset optional metadata
// went out as byte_size 0 and expires_at 0 (a file that expired in 1970).
// Unset numbers must stay off the wire.
func TestChatMessage_M5_UnsetMetadataNotSent(t *testing.T) {
	p, err := NewChatMessage("cch_1", ToConnector, ChatMessage{
		MessageID: "m1", Files: []File{{Type: FileImage, FileRef: "f"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, member := range []string{"byte_size", "expires_at", "created_at", "download_url", "filename", "text"} {
		if strings.Contains(string(p.Payload), member) {
			t.Errorf("unset %s is on the wire: %s", member, p.Payload)
		}
	}
}
