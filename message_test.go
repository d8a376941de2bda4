package imv2_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/protocol"
)

func TestNewChatMessage_M2_GeneratesMessageID(t *testing.T) {
	p, err := imv2.NewChatMessage("cch_1", imv2.ToConnector, imv2.ChatMessage{Text: "final"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := imv2.DecodeChatMessage(p, imv2.ToConnector)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(m.MessageID, "msg_") || m.MessageID == p.PacketID {
		t.Errorf("message_id %q (packet_id %q): I4 keeps them apart", m.MessageID, p.PacketID)
	}
	q, _ := imv2.NewChatMessage("cch_1", imv2.ToConnector, imv2.ChatMessage{Text: "final"})
	m2, _ := imv2.DecodeChatMessage(q, imv2.ToConnector)
	if m2.MessageID == m.MessageID {
		t.Error("two messages got one message_id")
	}
}

func TestNewChatMessage_I1_M3_M6_Refuses(t *testing.T) {
	cases := []struct {
		name string
		ch   string
		dir  imv2.Direction
		m    imv2.ChatMessage
		code imv2.Code
	}{
		{"I1 no channel", "", imv2.ToXAgent, imv2.ChatMessage{Text: "x"}, imv2.CodeChannelIDRequired},
		{"M3 empty", "c", imv2.ToXAgent, imv2.ChatMessage{}, imv2.CodeInvalidPacket},
		{"M6 no download_url", "c", imv2.ToXAgent, imv2.ChatMessage{Files: []imv2.File{{Type: imv2.FileImage, FileRef: "f"}}}, imv2.CodeInvalidPacket},
		{"M1 no direction", "c", 0, imv2.ChatMessage{Text: "x"}, imv2.CodeInvalidPacket},
	}
	for _, c := range cases {
		if _, err := imv2.NewChatMessage(c.ch, c.dir, c.m); !errors.Is(err, &imv2.Error{Code: c.code}) {
			t.Errorf("%s: %v, want %s", c.name, err, c.code)
		}
	}
	if _, err := imv2.NewChatMessage("c", imv2.ToConnector, imv2.ChatMessage{Files: []imv2.File{{Type: imv2.FileImage, FileRef: "f"}}}); err != nil {
		t.Errorf("M7: an uploaded file needs no download_url: %v", err)
	}
}

func TestCheckDownloadURL_M6_M8(t *testing.T) {
	ok := []string{"/files/refs/a", "files/refs/a", "https://c.example/a?sig=1", "HTTP://c.example:8080/a", "./a"}
	for _, u := range ok {
		if err := imv2.CheckDownloadURL(u); err != nil {
			t.Errorf("%q: %v", u, err)
		}
	}
	bad := map[string]imv2.Code{
		"file:///etc/passwd":            imv2.CodeInvalidPacket,
		"data:text/plain,hi":            imv2.CodeInvalidPacket,
		"//cdn.example/a":               imv2.CodeInvalidPacket,
		"https:///a":                    imv2.CodeInvalidPacket,
		"https://u:p@c.example/a":       imv2.CodeForbiddenField,
		"?only=query":                   imv2.CodeInvalidPacket,
		"http://[::1":                   imv2.CodeInvalidPacket,
		"/" + strings.Repeat("a", 4096): imv2.CodeInvalidPacket,
	}
	for u, code := range bad {
		if err := imv2.CheckDownloadURL(u); !errors.Is(err, &imv2.Error{Code: code}) {
			t.Errorf("%.40q: %v, want %s", u, err, code)
		}
	}
}

func TestTypedDecoders_I1_RefuseOtherTypes(t *testing.T) {
	p, err := imv2.NewPacket(protocol.TypePing, "cch_1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := imv2.DecodeChatMessage(p, imv2.ToXAgent); !errors.Is(err, imv2.ErrInvalidPacket) {
		t.Error("DecodeChatMessage took a ping")
	}
	if _, err := imv2.DecodeChatMessageDelta(p); !errors.Is(err, imv2.ErrInvalidPacket) {
		t.Error("DecodeChatMessageDelta took a ping")
	}
	if _, err := imv2.DecodeChatMessageAck(p); !errors.Is(err, imv2.ErrInvalidPacket) {
		t.Error("DecodeChatMessageAck took a ping")
	}
	if _, err := imv2.DecodeChatActivity(p); !errors.Is(err, imv2.ErrInvalidPacket) {
		t.Error("DecodeChatActivity took a ping")
	}
}

func TestNewChatMessageDelta_D1_D2_AndActivity_C1_C3(t *testing.T) {
	if _, err := imv2.NewChatMessageDelta("c", imv2.ChatMessageDelta{MessageID: "m", Sequence: 0, Text: "x"}); !errors.Is(err, imv2.ErrInvalidPacket) {
		t.Error("D2: sequence 0 was sent")
	}
	d := imv2.ChatMessageDelta{MessageID: "m", Sequence: 1, Text: "x"}
	if err := d.Validate(imv2.ToXAgent); !errors.Is(err, imv2.ErrInvalidPacket) {
		t.Error("D1: a delta toward xAgent validated")
	}
	a := imv2.ChatActivity{Status: imv2.ActivityThinking}
	if err := a.Validate(imv2.ToXAgent); !errors.Is(err, imv2.ErrInvalidPacket) {
		t.Error("C1: activity toward xAgent validated")
	}
	if _, err := imv2.NewChatActivity("c", imv2.ChatActivity{Status: imv2.ActivityIdle, ToolName: "x"}); !errors.Is(err, imv2.ErrInvalidPacket) {
		t.Error("C3: idle with tool_name was sent")
	}
	if _, err := imv2.NewChatActivity("", a); !errors.Is(err, &imv2.Error{Code: imv2.CodeChannelIDRequired}) {
		t.Error("I1: activity without a channel was sent")
	}
}

// The codec's omitempty does not omit numbers, so unset optional metadata
// went out as byte_size 0 and expires_at 0 (a file that expired in 1970).
// Unset numbers must stay off the wire.
func TestChatMessage_M5_UnsetMetadataNotSent(t *testing.T) {
	p, err := imv2.NewChatMessage("cch_1", imv2.ToConnector, imv2.ChatMessage{
		MessageID: "m1", Files: []imv2.File{{Type: imv2.FileImage, FileRef: "f"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, member := range []string{"byte_size", "expires_at", "created_at", "download_url", "filename", "text"} {
		if strings.Contains(string(p.Payload), member) {
			t.Errorf("unset %s is on the wire: %s", member, p.Payload)
		}
	}
	ack, err := imv2.NewPacket(protocol.TypeAuthStartAck, "cch_1", &protocol.AuthAck{Status: protocol.AuthPending})
	if err != nil {
		t.Fatal(err)
	}
	if s := string(ack.Payload); strings.Contains(s, "expires_at") || strings.Contains(s, "poll_interval_millis") {
		t.Errorf("unset auth ack numbers are on the wire: %s", s)
	}
}
