package imv2_test

import (
	"encoding/json"
	"fmt"

	"github.com/xagentkit/imv2"
)

// A Connector reads one WebSocket text frame, checks the envelope, and
// decodes a user message travelling Connector → xAgent... or, as here, the
// xAgent side decoding what a Connector sent.
func ExampleDecodeChatMessage() {
	frame := []byte(`{"schema":"xagent.connector.packet/v1","packet_id":"pkt_1","connector_channel_id":"cch_123",
		"type":"chat.message","time":1790000000000,
		"payload":{"message_id":"msg_1","text":"Summarise this page",
		"files":[{"type":"image","file_ref":"file_abc","download_url":"/files/refs/file_abc"}]}}`)
	p, err := imv2.DecodePacket(frame)
	if err != nil {
		fmt.Println("envelope:", err)
		return
	}
	m, err := imv2.DecodeChatMessage(p, imv2.ToXAgent)
	if err != nil {
		fmt.Println("payload:", err)
		return
	}
	fmt.Println(p.ConnectorChannelID, m.MessageID, m.Text, m.Files[0].Type, m.Files[0].DownloadURL)

	// A payload carrying an identity field is refused with a stable code (I2).
	p.Payload = json.RawMessage(`{"message_id":"msg_2","text":"hi","session_id":"s1"}`)
	_, err = imv2.DecodeChatMessage(p, imv2.ToXAgent)
	fmt.Println(err)
	// Output:
	// cch_123 msg_1 Summarise this page image /files/refs/file_abc
	// imv2: forbidden_field: chat.message: member "session_id" at /session_id is an identity field the profile forbids (I2)
}

// xAgent sends the final of an assistant message. Keep the message ID:
// every resend reuses it (S2).
func ExampleNewChatMessage() {
	p, err := imv2.NewChatMessage("cch_123", imv2.ToConnector, imv2.ChatMessage{
		MessageID: "assistant_1",
		Text:      "The page is about JSON.",
		Files:     []imv2.File{{Type: imv2.FileFile, FileRef: "file_up_1", Filename: "notes.pdf"}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(p.Type, p.ConnectorChannelID)
	fmt.Println(string(p.Payload))
	// Output:
	// chat.message cch_123
	// {"message_id":"assistant_1","text":"The page is about JSON.","files":[{"type":"file","file_ref":"file_up_1","filename":"notes.pdf"}]}
}

// The receiver of a chat.message answers with an ack that copies reply_to,
// the channel and the message_id from it, so they cannot disagree (A1, A2).
func ExampleNewAck() {
	orig := &imv2.Packet{Schema: imv2.PacketSchema, PacketID: "pkt_message_1", ConnectorChannelID: "cch_123",
		Type: imv2.TypeChatMessage, Payload: json.RawMessage(`{"message_id":"msg_1","text":"hi"}`)}

	ack, err := imv2.NewAck(orig, "msg_1", imv2.AckRejected,
		&imv2.Error{Code: imv2.CodeTargetDeliveryFailed, Message: "target platform rejected the message"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(ack.Type, ack.ReplyTo, ack.ConnectorChannelID)
	fmt.Println(string(ack.Payload))

	a, _ := imv2.DecodeChatMessageAck(ack)
	fmt.Println(a.Status, a.Retryable)
	// Output:
	// chat.message.ack pkt_message_1 cch_123
	// {"message_id":"msg_1","status":"rejected","code":"target_delivery_failed","message":"target platform rejected the message","retryable":false}
	// rejected false
}

// The Connector intersects the hello's supported_profiles with its Card
// (P3); channels ask only the result (P5, P6, P7).
func ExampleCatalog_Negotiate() {
	hello := []string{"xagent.im.v1", "xagent.im.v2"}
	card := []string{"xagent.im.v2"}
	n := imv2.DefaultCatalog().Negotiate(hello, card)

	fmt.Println(n.Profiles())
	fmt.Println(n.Allows(imv2.TypeChatMessageDelta, imv2.ToConnector), n.Allows(imv2.TypeChatMessageDelta, imv2.ToXAgent))
	fmt.Println(n.MayProject(imv2.KindAssistantMessageFinal), n.MayProject("session.sync_message"))

	// A hello without supported_profiles enables nothing.
	fmt.Println(imv2.DefaultCatalog().Negotiate(nil, card).Profiles())
	// Output:
	// [xagent.im.v2]
	// true false
	// true false
	// []
}
