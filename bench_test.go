package imv2

import (
	"encoding/json"
	"strings"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/xagentkit/imv2/internal/benchcpu"
)

// Benchmarks compare the SDK's typed path with the baseline it replaces:
// encoding/json into (and from) map[string]any, as the protocol-1.0
// Connectors do. sdk decodes the envelope and the payload and validates
// both (DecodePacket, DecodeChatMessage, as a Channel does on receive);
// it encodes the same packet as Channel.Send and its transport do:
// ChatMessage.Validate, the payload encoder, Packet.Encode (envelope and
// payload checked). Minting a packet_id is left out on both sides, as the
// map baseline mints none. scripts/bench.sh runs them with the others;
// BENCHMARKS.md has the numbers. Run alone:
//
//	go test -run '^$' -bench 'ChatMessage' -benchmem -count 6 .

// benchMessage is a chat.message with text and two files (~650 bytes).
var benchMessage = ChatMessage{
	MessageID: "msg_01J9ZK3V6Q8W2R4T5Y7U9I0O1P",
	Text:      "Please summarise the two attached documents and tell me which of them is newer, then draft a short reply to the sender.",
	Files: []File{
		{Type: FileImage, FileRef: "file_abc123def456", Filename: "page.png", MimeType: "image/png",
			ByteSize: 155000, ExpiresAt: 1790000300000, DownloadURL: "/files/refs/file_abc123def456?sig=8f3a9c2e7b1d"},
		{Type: FileFile, FileRef: "file_789ghi012jkl", Filename: "report-2026-q3.pdf", MimeType: "application/pdf",
			ByteSize: 2481733, ExpiresAt: 1790000300000, DownloadURL: "https://connector.example/files/refs/file_789ghi012jkl?sig=44be01"},
	},
	CreatedAt: 1790000000000,
}

func benchPacket(b testing.TB) (*Packet, []byte) {
	b.Helper()
	payload, err := jsonv2.Marshal(&benchMessage)
	if err != nil {
		b.Fatal(err)
	}
	p := &Packet{Schema: PacketSchema, PacketID: "pkt_5f0c7f0e-8d3b-4c1a-9e2f-6a7b8c9d0e1f",
		ConnectorChannelID: "cch_conn_im_wechat_0069", Type: TypeChatMessage, Time: 1790000000000, Payload: payload}
	data, err := p.Encode()
	if err != nil {
		b.Fatal(err)
	}
	return p, data
}

// unknownMembersFrame adds members 3.0 does not define to the envelope,
// the payload and the first file of data, an encoded benchPacket.
func unknownMembersFrame(data []byte) []byte {
	s := string(data)
	s = strings.Replace(s, `"payload":{`, `"trace":{"span":"s1","hops":[1,2]},"payload":{"resource_key":"rk_main","render":{"format":"markdown"},`, 1)
	s = strings.Replace(s, `"files":[{`, `"files":[{"width":640,`, 1)
	return []byte(s)
}

var (
	sinkMessage *ChatMessage
	sinkMap     map[string]any
	sinkBytes   []byte
)

// benchDecode measures the SDK's decode of one chat.message frame.
func benchDecode(data []byte) func(*testing.B) {
	return func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		defer benchcpu.Measure(b)()
		for b.Loop() {
			p, err := DecodePacket(data)
			if err != nil {
				b.Fatal(err)
			}
			m, err := DecodeChatMessage(p, ToXAgent)
			if err != nil {
				b.Fatal(err)
			}
			sinkMessage = m
		}
	}
}

func BenchmarkDecodeChatMessage(b *testing.B) {
	_, data := benchPacket(b)
	b.Run("sdk", benchDecode(data))
	// sdk-unknown is the same packet as a newer peer writes it, with
	// members this version does not define in the envelope, the payload
	// and a file (E5): the scanner skips them on the fast path.
	unknown := unknownMembersFrame(data)
	b.Run("sdk-unknown", benchDecode(unknown))
	b.Run("map", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		defer benchcpu.Measure(b)()
		for b.Loop() {
			var v map[string]any
			if err := json.Unmarshal(data, &v); err != nil {
				b.Fatal(err)
			}
			sinkMap = v
		}
	})
}

func BenchmarkEncodeChatMessage(b *testing.B) {
	p, data := benchPacket(b)
	var asMap map[string]any
	if err := json.Unmarshal(data, &asMap); err != nil {
		b.Fatal(err)
	}
	b.Run("sdk", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		defer benchcpu.Measure(b)()
		for b.Loop() {
			m := benchMessage
			if err := m.Validate(ToXAgent); err != nil {
				b.Fatal(err)
			}
			payload, err := marshalChatMessage(&m)
			if err != nil {
				b.Fatal(err)
			}
			q := Packet{Schema: PacketSchema, PacketID: p.PacketID, ConnectorChannelID: p.ConnectorChannelID,
				Type: TypeChatMessage, Time: p.Time, Payload: payload}
			out, err := q.Encode()
			if err != nil {
				b.Fatal(err)
			}
			sinkBytes = out
		}
	})
	b.Run("map", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		defer benchcpu.Measure(b)()
		for b.Loop() {
			out, err := json.Marshal(asMap)
			if err != nil {
				b.Fatal(err)
			}
			sinkBytes = out
		}
	})
}
