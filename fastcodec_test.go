package imv2

import (
	"bytes"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	jsonv2 "github.com/go-json-experiment/json"
	"pgregory.net/rapid"
)

// Differential tests of the hot-path codec (internal/fastjson,
// fastdecode.go, fastencode.go) against go-json-experiment/json, the reference: whenever a
// fast reader takes an input, the codec must take it too and produce the
// same value; every fast encoder must produce the codec's bytes. The
// inputs are the golden vectors, the fuzz seeds, hand-written edge cases,
// seeded mutations of all of them, and generated messages and token soup.

// codecCorpus returns the frames of testdata (vectors and fuzz seeds) and
// the edge cases below.
func codecCorpus(t testing.TB) [][]byte {
	t.Helper()
	var out [][]byte
	err := filepath.WalkDir("testdata", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := readTestdata(path)
		if err != nil {
			return err
		}
		out = append(out, data...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range codecEdgeCases {
		out = append(out, []byte(s))
	}
	return out
}

// readTestdata returns a vector file as is, or the []byte arguments of a
// fuzz seed file.
func readTestdata(path string) ([][]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if !bytes.HasPrefix(data, []byte("go test fuzz v1\n")) {
		return [][]byte{data}, nil
	}
	var out [][]byte
	for _, line := range strings.Split(string(data), "\n")[1:] {
		if lit, ok := strings.CutPrefix(line, "[]byte("); ok {
			if s, err := strconv.Unquote(strings.TrimSuffix(lit, ")")); err == nil {
				out = append(out, []byte(s))
			}
		}
	}
	return out, nil
}

const env = `"schema":"xagent.connector.packet/v1","packet_id":"p1","connector_channel_id":"c1","time":1,`

var codecEdgeCases = []string{
	// More deferred bytes than fastjson's arenaMaxChunk: the ones past it are made as read.
	`{` + env + `"type":"chat.message","payload":{"message_id":"m","text":"t","files":[` + strings.TrimSuffix(strings.Repeat(`{"type":"file","file_ref":"f`+strings.Repeat("r", 250)+`","filename":"n","download_url":"/x"},`, 6), ",") + `]}}`,
	// More strings than fastjson's maxDeferred: the ones past it are made as read.
	`{` + env + `"type":"chat.message","payload":{"message_id":"m","text":"t","files":[` + strings.TrimSuffix(strings.Repeat(`{"type":"file","file_ref":"f","filename":"n","mime_type":"text/plain","download_url":"/x"},`, 7), ",") + `]}}`,
	// The string arena (fastjson.arena): escaped IDs in the envelope, and strings
	// past fastjson's arenaMaxString beside short ones in the payload and a file.
	`{"schema":"xagent.connector.packet/v1","packet_id":"p\u00e9\n1","request_id":"","reply_to":"r\"","connector_channel_id":"c\/1","time":1,"type":"chat.message","payload":{"message_id":"m\t","text":"` + strings.Repeat("long ", 60) + `","files":[{"type":"file","file_ref":"f","filename":"` + strings.Repeat("n\u4e2d", 50) + `","mime_type":"","download_url":"/x"}]}}`,
	`{` + env + `"type":"chat.message","payload":{"message_id":"m","text":"a\"b\\c\/d\b\f\n\r\t\u00e9\u4e2d\u0000"}}`,
	`{` + env + `"type":"chat.message","payload":{"message_id":"m","text":"\ud83d\ude00"}}`,
	`{` + env + `"type":"chat.message","payload":{"message_id":"m","text":"\ud800"}}`,
	`{` + env + `"type":"chat.message","payload":{"message_id":"m","text":"x","text":"y"}}`,
	`{` + env + `"type":"chat.message","payload":{"message_id":"m","Text":"x"}}`,
	`{` + env + `"type":"chat.message","payload":{"message_id":"m","te\u0078t":"x"}}`,
	`{` + env + `"type":"chat.message","payload":{"message_id":"m","text":null}}`,
	`{` + env + `"type":"chat.message","payload":{"message_id":"m","files":[]}}`,
	`{` + env + `"type":"chat.message","payload":{"message_id":"m","files":null}}`,
	`{` + env + `"type":"chat.message","payload":{"message_id":"m","text":"t","created_at":-0}}`,
	`{` + env + `"type":"chat.message","payload":{"message_id":"m","text":"t","created_at":1.0}}`,
	`{` + env + `"type":"chat.message","payload":{"message_id":"m","text":"t","created_at":1e3}}`,
	`{` + env + `"type":"chat.message","payload":{"message_id":"m","text":"t","created_at":01}}`,
	`{` + env + `"type":"chat.message","payload":{"message_id":"m","text":"t","created_at":99999999999999999999}}`,
	`{` + env + `"type":"chat.message","payload":{"message_id":"m","text":"t","created_at":-5}}`,
	`{` + env + `"type":"chat.message","payload":{"message_id":"m","files":[{"type":"image","file_ref":"f","download_url":"/x","x":1}]}}`,
	`{` + env + `"type":"chat.message","payload":{"message_id":"m","files":[{"type":"image","file_ref":"f","type":"file"}]}}`,
	`{` + env + `"type":"chat.message","payload":{"message_id":"m","files":[{"type":"im\u0061ge","file_ref":"f"}]}}`,
	`{` + env + `"type":"chat.message","payload":{"message_id":"m","files":[{"type":"image","file_ref":"f"},{"type":"pdf","file_ref":"g","byte_size":0}]}}`,
	// M8's names where the profile puts file material and inside members
	// the SDK does not know (E5): both decoders agree where each applies.
	`{` + env + `"type":"chat.message","payload":{"message_id":"m","text":"t","quote":{"content":"q"},"reply":{"body":"b"}}}`,
	`{` + env + `"type":"chat.message","payload":{"message_id":"m","files":[{"type":"file","file_ref":"f","metadata":{"data":1,"path":"/x"}}]}}`,
	`{` + env + `"type":"chat.message","payload":{"message_id":"m","files":[{"type":"file","file_ref":"f","content":"aGk="}]}}`,
	`{` + env + `"type":"chat.message","payload":{"message_id":"m","text":"t","token":"x"}}`,
	`{` + env + `"type":"chat.message","payload":{"message_id":"m","text":"t","ext":[{"user_id":"u"}]}}`,
	`{` + env + `"type":"chat.message.delta","payload":{"message_id":"m","sequence":1,"text":"t","ext":{"body":"b"}}}`,
	`{` + env + `"type":"chat.activity","payload":{"status":"thinking","ext":{"path":"/x"}}}`,
	`{` + env + `"type":"chat.message","payload":{ "message_id" : "m" , "text" : "t" } }`,
	` {` + env + `"type":"chat.message","payload":{"message_id":"m","text":"t"}} `,
	`{` + env + `"type":"chat.message","payload":{"message_id":"m","text":"t"}}x`,
	`{` + env + `"type":"chat.message","payload":{"message_id":"m","text":"t"},}`,
	`{` + env + `"type":"chat.message","payload":{"message_id":"m","text":"t"}`,
	`{` + env + `"type":"chat.message","payload":{"a":{"b":[1,2.5,-3e-2,true,false,null,{"c":"d","c":"e"}]}}}`,
	`{` + env + `"type":"chat.message","payload":{"a":{"b":[1,2.5,-3e-2,true,false,null,{"c":"d","e":"\u00e9"}]}}}`,
	`{` + env + `"type":"chat.message","payload":{"a":[01]}}`,
	`{` + env + `"type":"chat.message","payload":{"a":[1.]}}`,
	`{` + env + `"type":"chat.message","payload":{"a":[-]}}`,
	`{` + env + `"type":"chat.message","payload":{"a":"` + "\xff" + `"}}`,
	`{` + env + `"type":"chat.message","payload":{"a":"` + "\x01" + `"}}`,
	`{` + env + `"type":"chat.message","payload":{"a":"\x"}}`,
	`{` + env + `"type":"chat.message","payload":[]}`,
	`{` + env + `"type":"chat.message","payload":null}`,
	`{` + env + `"type":"chat.message","payload":{}}`,
	`{` + env + `"type":"chat.message","payload":{"message_id":"m"},"payload":{}}`,
	`{"schema":"xagent.connector.packet/v1","packet_id":"p","type":"ping","time":-1}`,
	`{"schema":"xagent.connector.packet/v1","packet_id":"p","type":"ping","time":null}`,
	`{"schema":"xagent.connector.packet/v1","packet_id":"p","type":"ping","extra":[1,{"a":2}]}`,
	`{"schema":"xagent.connector.packet/v1","packet_id":"p","type":"ping","Type":"pong"}`,
	`{"schema":"xagent.connector.packet/v1","packet_id":"p","type":"ping","packet_id":"q"}`,
	`{"schema":"xagent.connector.packet/v1","packet_id":"p","type":"pi\u006eg"}`,
	`{"schema":"xagent.connector.packet/v1","packet_id":"p","type":"error","error":{"code":"x"}}`,
	`{}`, `[]`, `null`, ``, `{`, `{"schema":}`, `{"schema":"x" "type":"y"}`,
	`{` + env + `"type":"chat.message.delta","payload":{"message_id":"m","sequence":1,"text":""}}`,
	`{` + env + `"type":"chat.message.delta","payload":{"message_id":"m","sequence":0,"text":"a\nb"}}`,
	`{` + env + `"type":"chat.message.delta","payload":{"message_id":"m","sequence":1,"text":"a","files":[]}}`,
	`{` + env + `"type":"chat.message.ack","reply_to":"q","payload":{"message_id":"m","status":"rejected","code":"x","message":"m\u00e9","retryable":false}}`,
	`{` + env + `"type":"chat.message.ack","reply_to":"q","payload":{"message_id":"m","status":"rejected","code":"x","retryable":null}}`,
	`{` + env + `"type":"chat.message.ack","reply_to":"q","payload":{"message_id":"m","status":"accepted","retryable":tru}}`,
	`{` + env + `"type":"chat.activity","payload":{"status":"tool","tool_name":"web_search"}}`,
	`{` + env + `"type":"chat.activity","payload":{"status":"idle","reasoning":"x"}}`,
	// E5: unknown members, flat and nested, in the envelope and every payload.
	`{` + env + `"type":"chat.message","trace":{"id":"t1","hops":[1,2]},"payload":{"message_id":"m","text":"t","resource_key":"rk_1"}}`,
	`{` + env + `"type":"chat.message","payload":{"message_id":"m","text":"t","ext":{"a":[{"b":null}],"c":1.5e3}}}`,
	`{` + env + `"type":"chat.message","payload":{"message_id":"m","files":[{"type":"image","file_ref":"f","download_url":"/x","width":640,"meta":{"h":480}}]}}`,
	`{` + env + `"type":"chat.message","payload":{"message_id":"m","text":"t","x":1,"x":2}}`,
	`{` + env + `"type":"chat.message","payload":{"message_id":"m","text":"t","a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9}}`,
	`{` + env + `"type":"chat.message","payload":{"message_id":"m","text":"t","ext":{"session_id":"s"}}}`,
	`{` + env + `"type":"chat.message","payload":{"message_id":"m","files":[{"type":"image","file_ref":"f","session_id":"s"}]}}`,
	`{` + env + `"type":"chat.message","payload":{"message_id":"m","files":[{"type":"image","file_ref":"f","meta":[{"token":"k"}]}]}}`,
	`{` + env + `"type":"chat.message","payload":{"message_id":"m","text":"t","ext":"` + "ÿ" + `"}}`,
	`{` + env + `"type":"chat.message.delta","payload":{"message_id":"m","sequence":1,"text":"a","resource_key":"rk"}}`,
	`{` + env + `"type":"chat.message.delta","payload":{"message_id":"m","sequence":1,"text":"a","ext":{"files":[]}}}`,
	`{` + env + `"type":"chat.message.ack","reply_to":"q","payload":{"message_id":"m","status":"accepted","resource_key":"rk","ext":{"n":[true]}}}`,
	`{` + env + `"type":"chat.message.ack","reply_to":"q","payload":{"message_id":"m","status":"accepted","ext":{"user_id":"u"}}}`,
	`{` + env + `"type":"chat.activity","payload":{"status":"thinking","since":17}}`,
	`{` + env + `"type":"chat.activity","payload":{"status":"tool","tool_name":"w","ext":{"arguments":{}}}}`,
	`{"schema":"xagent.connector.packet/v1","packet_id":"p","type":"ping","a":1,"a":2}`,
	`{"schema":"xagent.connector.packet/v1","packet_id":"p","type":"ping","session_id":"s","trace":"` + "ÿ" + `"}`,
	// Time as the public schema's integer, in any notation.
	`{"schema":"xagent.connector.packet/v1","packet_id":"p","type":"ping","time":1790000000000}`,
	`{"schema":"xagent.connector.packet/v1","packet_id":"p","type":"ping","time":1.79e12}`,
	`{"schema":"xagent.connector.packet/v1","packet_id":"p","type":"ping","time":1790000000000.0}`,
	`{"schema":"xagent.connector.packet/v1","packet_id":"p","type":"ping","time":17900000000000E-1}`,
	`{"schema":"xagent.connector.packet/v1","packet_id":"p","type":"ping","time":0.000179e16}`,
	`{"schema":"xagent.connector.packet/v1","packet_id":"p","type":"ping","time":1790000000000.5}`,
	`{"schema":"xagent.connector.packet/v1","packet_id":"p","type":"ping","time":1.5}`,
	`{"schema":"xagent.connector.packet/v1","packet_id":"p","type":"ping","time":-1e3}`,
	`{"schema":"xagent.connector.packet/v1","packet_id":"p","type":"ping","time":-0}`,
	`{"schema":"xagent.connector.packet/v1","packet_id":"p","type":"ping","time":0e999999999}`,
	`{"schema":"xagent.connector.packet/v1","packet_id":"p","type":"ping","time":1e19}`,
	`{"schema":"xagent.connector.packet/v1","packet_id":"p","type":"ping","time":9223372036854775807}`,
	`{"schema":"xagent.connector.packet/v1","packet_id":"p","type":"ping","time":9.223372036854775808e18}`,
	`{"schema":"xagent.connector.packet/v1","packet_id":"p","type":"ping","time":"1"}`,
}

// mutations returns seeded variants of data: bytes deleted, doubled,
// replaced by JSON-significant ones, and bytes inserted.
func mutations(data []byte, r *rand.Rand, n int) [][]byte {
	if len(data) == 0 {
		return nil
	}
	specials := []string{`"`, `\`, `{`, `}`, `[`, `]`, `,`, `:`, ` `, `0`, `-`, `.`, `e`, `n`, "\xff", "\x01", `\u00e9`, `\ud800`, `"x"`, `null`}
	out := make([][]byte, 0, n)
	for range n {
		i := r.IntN(len(data))
		var m []byte
		switch r.IntN(4) {
		case 0:
			m = append(append(m, data[:i]...), data[i+1:]...)
		case 1:
			m = append(append(m, data[:i+1]...), data[i:]...)
		case 2:
			m = append(append(append(m, data[:i]...), specials[r.IntN(len(specials))]...), data[i+1:]...)
		default:
			m = append(append(append(m, data[:i]...), specials[r.IntN(len(specials))]...), data[i:]...)
		}
		out = append(out, m)
	}
	return out
}

// hits counts inputs the fast paths took, so the tests can show they are
// not vacuous.
type hits struct{ envelope, onePass, message, delta, ack, activity int }

func TestFastCodec_MatchesCodec(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	var h hits
	for _, data := range codecCorpus(t) {
		checkFastDecode(t, data, &h)
		for _, m := range mutations(data, r, 6) {
			checkFastDecode(t, m, &h)
		}
	}
	t.Logf("fast path taken: %+v", h)
	if h.envelope < 100 || h.onePass < 50 || h.message < 20 || h.delta < 5 || h.ack < 5 || h.activity < 5 {
		t.Fatalf("the fast paths took too few inputs: %+v", h)
	}
}

// checkFastDecode holds every fast reader to the codec on data.
func checkFastDecode(t *testing.T, data []byte, h *hits) {
	t.Helper()
	fp, fTime, ok := decodeEnvelopeFast(data)
	cp, cTime, err := decodeEnvelopeCodec(data)
	if ok {
		h.envelope++
		if err != nil {
			t.Fatalf("fast envelope took what the codec refuses (%v):\n%s", err, data)
		}
		if fw := WireFields(fp); !reflect.DeepEqual(&fw, cp) || fTime != cTime {
			t.Fatalf("envelopes differ:\nfast  %+v %v\ncodec %+v %v\n%s", fp, fTime, cp, cTime, data)
		}
		if fp.decoded != nil {
			h.onePass++
			checkOnePass(t, fp, data)
		}
	}
	payloads := [][]byte{data}
	if err == nil && len(cp.Payload) > 0 {
		payloads = append(payloads, cp.Payload)
	}
	for _, b := range payloads {
		if m, ok := decodeChatMessageFast(b); ok {
			h.message++
			sameAsCodec(t, TypeChatMessage, b, m, new(ChatMessage))
		}
		if d, ok := decodeDeltaFast(b); ok {
			h.delta++
			sameAsCodec(t, TypeChatMessageDelta, b, d, new(ChatMessageDelta))
		}
		if w, ok := decodeAckFast(b); ok {
			h.ack++
			sameAsCodec(t, TypeChatMessageAck, b, w, new(ackWire))
		}
		if a, ok := decodeActivityFast(b); ok {
			h.activity++
			sameAsCodec(t, TypeChatActivity, b, a, new(ChatActivity))
		}
		checkFastEncode(t, b)
	}
}

// checkOnePass holds the payload the envelope scan of data decoded (p's)
// to the reference decoder and to its own fast reader, and the typed
// decoder's verdict on it (both directions) to the verdict on the same
// payload decoded apart, as before the single pass: same value or same
// error.
func checkOnePass(t *testing.T, p *Packet, data []byte) {
	t.Helper()
	apart := func() *Packet { q := WireFields(p); return &q }
	switch v := p.decoded.v.(type) {
	case *ChatMessage:
		sameAsCodec(t, p.Type, p.Payload, v, new(ChatMessage))
		if f, ok := decodeChatMessageFast(p.Payload); !ok || !reflect.DeepEqual(f, v) {
			t.Fatalf("one pass and the payload reader differ (%v):\n%+v\n%+v\n%s", ok, v, f, data)
		}
		for _, dir := range []Direction{ToXAgent, ToConnector} {
			got, gerr := DecodeChatMessage(p, dir)
			want, werr := DecodeChatMessage(apart(), dir)
			sameVerdict(t, data, got, gerr, want, werr)
		}
	case *ChatMessageDelta:
		sameAsCodec(t, p.Type, p.Payload, v, new(ChatMessageDelta))
		got, gerr := DecodeChatMessageDelta(p)
		want, werr := DecodeChatMessageDelta(apart())
		sameVerdict(t, data, got, gerr, want, werr)
	case *ackWire:
		sameAsCodec(t, p.Type, p.Payload, v, new(ackWire))
		got, gerr := DecodeChatMessageAck(p)
		want, werr := DecodeChatMessageAck(apart())
		sameVerdict(t, data, got, gerr, want, werr)
	case *ChatActivity:
		sameAsCodec(t, p.Type, p.Payload, v, new(ChatActivity))
		got, gerr := DecodeChatActivity(p)
		want, werr := DecodeChatActivity(apart())
		sameVerdict(t, data, got, gerr, want, werr)
	default:
		t.Fatalf("decoded payload of type %T", v)
	}
}

// sameVerdict fails unless two decodes gave equal values or equal errors.
func sameVerdict(t *testing.T, data []byte, got any, gerr error, want any, werr error) {
	t.Helper()
	if (gerr == nil) != (werr == nil) || (gerr != nil && gerr.Error() != werr.Error()) || (gerr == nil && !reflect.DeepEqual(got, want)) {
		t.Fatalf("one pass and two passes differ:\none  %+v (%v)\ntwo  %+v (%v)\n%s", got, gerr, want, werr, data)
	}
}

// sameAsCodec decodes b, a payload of type typ, with the reference
// decoder into ref and compares with fast.
func sameAsCodec(t *testing.T, typ string, b []byte, fast, ref any) {
	t.Helper()
	if err := decodeIMBytes(typ, b, ref); err != nil {
		t.Fatalf("fast %T took what the codec refuses (%v):\n%s", fast, err, b)
	}
	if !reflect.DeepEqual(fast, ref) {
		t.Fatalf("%T differs:\nfast  %+v\ncodec %+v\n%s", fast, fast, ref, b)
	}
}

// checkFastEncode encodes whatever the codec decodes from b with both
// encoders and compares the bytes.
func checkFastEncode(t *testing.T, b []byte) {
	t.Helper()
	var m ChatMessage
	if jsonv2.Unmarshal(b, &m) == nil {
		sameEncoding(t, &m, func() ([]byte, error) { return marshalChatMessage(&m) })
	}
	var d ChatMessageDelta
	if jsonv2.Unmarshal(b, &d) == nil {
		sameEncoding(t, &d, func() ([]byte, error) { return marshalDelta(&d) })
	}
	var w ackWire
	if jsonv2.Unmarshal(b, &w) == nil {
		sameEncoding(t, &w, func() ([]byte, error) { return marshalAck(&w) })
	}
	var a ChatActivity
	if jsonv2.Unmarshal(b, &a) == nil {
		sameEncoding(t, &a, func() ([]byte, error) { return marshalActivity(&a) })
	}
}

func sameEncoding(t *testing.T, v any, fast func() ([]byte, error)) {
	t.Helper()
	want, werr := jsonv2.Marshal(v)
	got, gerr := fast()
	if (werr == nil) != (gerr == nil) || !bytes.Equal(got, want) {
		t.Fatalf("%T encodes differently:\nfast  %s (%v)\ncodec %s (%v)", v, got, gerr, want, werr)
	}
}

// genString draws strings with the characters that matter to JSON:
// quotes, backslashes, controls, multi-byte runes, and invalid UTF-8.
func genString() *rapid.Generator[string] {
	return rapid.OneOf(
		rapid.StringOf(rapid.RuneFrom([]rune("ab/_-.:?=&%#@ \"\\\n\t\x00\x1f\u007f\u00e9\u2028\u4e2d\U0001F600"))),
		rapid.SampledFrom([]string{"", "msg_1", "/files/refs/a?sig=1", "https://h.example/f", "image", "file", "\xff", "a\xc3"}),
	)
}

func genMessage() *rapid.Generator[ChatMessage] {
	return rapid.Custom(func(t *rapid.T) ChatMessage {
		m := ChatMessage{
			MessageID: genString().Draw(t, "id"),
			Text:      genString().Draw(t, "text"),
			CreatedAt: rapid.Int64().Draw(t, "created"),
		}
		for i := range rapid.IntRange(0, 3).Draw(t, "files") {
			_ = i
			m.Files = append(m.Files, File{
				Type:        FileType(genString().Draw(t, "type")),
				FileRef:     genString().Draw(t, "ref"),
				Filename:    genString().Draw(t, "name"),
				MimeType:    genString().Draw(t, "mime"),
				ByteSize:    rapid.Int64().Draw(t, "size"),
				ExpiresAt:   rapid.Int64Range(-2, 2).Draw(t, "exp"),
				DownloadURL: genString().Draw(t, "url"),
			})
		}
		return m
	})
}

// TestFastCodec_GeneratedMessages: the fast encoder writes the codec's
// bytes, and the fast decoder reads its own output back (it must take
// every payload this SDK writes, or the hot path is not hot).
func TestFastCodec_GeneratedMessages(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := genMessage().Draw(t, "m")
		want, werr := jsonv2.Marshal(&m)
		got, gerr := marshalChatMessage(&m)
		if (werr == nil) != (gerr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("encodings differ:\nfast  %s (%v)\ncodec %s (%v)", got, gerr, want, werr)
		}
		if gerr != nil {
			return
		}
		back, ok := decodeChatMessageFast(got)
		if !ok {
			t.Fatalf("the fast decoder refuses the SDK's own encoding %s", got)
		}
		var ref ChatMessage
		if err := decodeIMBytes(TypeChatMessage, got, &ref); err != nil || !reflect.DeepEqual(back, &ref) {
			t.Fatalf("decodings differ (%v):\nfast  %+v\ncodec %+v", err, back, ref)
		}

		d := ChatMessageDelta{MessageID: m.MessageID, Sequence: m.CreatedAt, Text: m.Text}
		sameEncodingRapid(t, &d, func() ([]byte, error) { return marshalDelta(&d) })
		r := m.CreatedAt%2 == 0
		w := ackWire{MessageID: m.MessageID, Status: AckStatus(m.Text), Code: Code(m.MessageID), Message: m.Text, Retryable: &r}
		if m.CreatedAt%3 == 0 {
			w.Retryable = nil
		}
		sameEncodingRapid(t, &w, func() ([]byte, error) { return marshalAck(&w) })
		a := ChatActivity{Status: ActivityStatus(m.MessageID), ToolName: m.Text}
		sameEncodingRapid(t, &a, func() ([]byte, error) { return marshalActivity(&a) })
	})
}

func sameEncodingRapid(t *rapid.T, v any, fast func() ([]byte, error)) {
	want, werr := jsonv2.Marshal(v)
	got, gerr := fast()
	if (werr == nil) != (gerr == nil) || !bytes.Equal(got, want) {
		t.Fatalf("%T encodes differently:\nfast  %s (%v)\ncodec %s (%v)", v, got, gerr, want, werr)
	}
}

// TestFastCodec_TokenSoup feeds random token sequences to every fast
// reader: whatever one takes, the codec takes the same way.
func TestFastCodec_TokenSoup(t *testing.T) {
	t.Parallel()
	tokens := []string{`{`, `}`, `[`, `]`, `,`, `:`, ` `, `"a"`, `"message_id"`, `"text"`, `"files"`,
		`"type"`, `"file_ref"`, `"sequence"`, `"status"`, `"retryable"`, `"accepted"`, `"image"`,
		`"result"`, `"url"`, `"token"`, `"user_id"`, // forbidden names, most in some payloads only (E5)
		`1`, `-0`, `0`, `12`, `1.5e3`, `null`, `true`, `false`, `"\u00e9"`, `"\ud800"`, `"\n"`, "\"\xff\""}
	r := rand.New(rand.NewPCG(3, 4))
	var h hits
	for range 5000 {
		var b []byte
		if r.IntN(2) == 0 {
			b = append(b, '{')
		}
		for range r.IntN(12) {
			b = append(b, tokens[r.IntN(len(tokens))]...)
		}
		if r.IntN(2) == 0 {
			b = append(b, '}')
		}
		checkFastDecode(t, b, &h)
	}
	t.Logf("fast path taken: %+v", h)
}

// TestPlainDownloadURL_MatchesParse: every URL the fast check accepts,
// url.Parse accepts too.
func TestPlainDownloadURL_MatchesParse(t *testing.T) {
	cases := []string{"/files/refs/a?sig=1&x=2", "//host/x", "/", "https://h.example/a/b?c=d", "https://h.example",
		"http://h/", "https://", "https:///x", "https://u:p@h/x", "https://h:80/x", "/a%zz", "/a#b", "/a b", "/a\x7f",
		"HTTPS://h/x", "https://h?x", "javascript:alert(1)", "file:///etc/passwd", "data:x", "/a:b", "/a\\b"}
	alphabet := []byte("/:?#@%=&._-~!$'()*+,; \\\x00\x7fazAZ09")
	r := rand.New(rand.NewPCG(5, 6))
	accepted := 0
	for i := range 20000 {
		var u string
		if i < len(cases) {
			u = cases[i]
		} else {
			prefix := []string{"/", "//", "http://", "https://", "h", ""}[r.IntN(6)]
			b := []byte(prefix)
			for range r.IntN(10) {
				b = append(b, alphabet[r.IntN(len(alphabet))])
			}
			u = string(b)
		}
		if plainDownloadURL(u) {
			accepted++
			if err := checkDownloadURLParse(u); err != nil {
				t.Fatalf("fast check takes %q, url.Parse refuses it: %v", u, err)
			}
		}
	}
	if accepted < 1000 {
		t.Fatalf("the fast check took only %d URLs", accepted)
	}
}

// FuzzFastCodec holds the fast readers and encoders to the codec on
// arbitrary input. Run it with, for example:
//
//	go test -run '^$' -fuzz FuzzFastCodec -fuzztime 60s .
func FuzzFastCodec(f *testing.F) {
	for _, s := range codecEdgeCases {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkFastDecode(t, data, &hits{})
	})
}

// FuzzOnePass holds the payload DecodePacket decodes with the envelope
// (decodedpayload.go) to the reference decoder, and the typed decoders'
// verdict on it to their verdict on the payload decoded apart, on
// mutations of every vector, fuzz seed and edge case:
//
//	go test -run '^$' -fuzz FuzzOnePass -fuzztime 30s .
func FuzzOnePass(f *testing.F) {
	for _, data := range codecCorpus(f) {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := DecodePacket(data)
		if err != nil || p.decoded == nil {
			return
		}
		checkOnePass(t, p, data)
	})
}

// TestFastCodec_E5_SkipsUnknownMembers: members this version does not
// define keep a frame on the fast path (the scanner skips them), and a
// forbidden name anywhere sends it to the reference decoder, which refuses
// it.
func TestFastCodec_E5_SkipsUnknownMembers(t *testing.T) {
	p := &Packet{Schema: PacketSchema, PacketID: "p1", ConnectorChannelID: "c1", Type: TypeChatMessage, Time: 1}
	raw, err := marshalChatMessage(&ChatMessage{MessageID: "m", Text: "t", Files: []File{{Type: FileImage, FileRef: "f", DownloadURL: "/x"}}})
	if err != nil {
		t.Fatal(err)
	}
	p.Payload = raw
	data, err := p.Encode()
	if err != nil {
		t.Fatal(err)
	}
	frame := unknownMembersFrame(data)
	fp, _, ok := decodeEnvelopeFast(frame)
	if !ok {
		t.Fatalf("the fast envelope reader refuses unknown members:\n%s", frame)
	}
	if _, ok := decodeChatMessageFast(fp.Payload); !ok {
		t.Fatalf("the fast chat.message reader refuses unknown members:\n%s", fp.Payload)
	}
	for _, bad := range []string{`{"message_id":"m","text":"t","ext":{"session_id":"s"}}`, `{"message_id":"m","files":[{"type":"file","file_ref":"f","token":"k"}]}`} {
		if _, ok := decodeChatMessageFast([]byte(bad)); ok {
			t.Fatalf("the fast reader took a forbidden name: %s", bad)
		}
		if err := decodeIMBytes(TypeChatMessage, []byte(bad), new(ChatMessage)); !errors.Is(err, &Error{Code: CodeForbiddenField}) {
			t.Fatalf("the reference decoder took a forbidden name (%v): %s", err, bad)
		}
	}
}

// TestStrArena_StringsOwnTheirBytes: the strings a decode returns lie in
// none of the input's bytes (a kept message_id must not keep a frame of up
// to 1 MiB alive, and a write into Raw or the frame must not change a
// string); fastjson's TestArena_BoundsItsArrays bounds the arrays.
func TestStrArena_StringsOwnTheirBytes(t *testing.T) {
	_, frame := benchPacket(t)
	p, err := DecodePacket(frame)
	if err != nil {
		t.Fatal(err)
	}
	m, err := DecodeChatMessage(p, ToXAgent)
	if err != nil {
		t.Fatal(err)
	}
	strs := []string{p.PacketID, p.ConnectorChannelID, m.MessageID, m.Text}
	for _, f := range m.Files {
		strs = append(strs, f.FileRef, f.Filename, f.MimeType, f.DownloadURL)
	}
	within := func(s string, b []byte) bool {
		if len(s) == 0 || len(b) == 0 {
			return false
		}
		sp, bp := uintptr(unsafe.Pointer(unsafe.StringData(s))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
		return sp >= bp && sp < bp+uintptr(cap(b))
	}
	want := slices.Clone(strs)
	for i, s := range strs {
		if within(s, frame) || within(s, p.Payload) {
			t.Fatalf("string %d (%q) lies in the frame or the payload", i, s)
		}
	}
	for i := range frame {
		frame[i] = 'x'
	}
	for i := range p.Payload {
		p.Payload[i] = 'x'
	}
	if !slices.Equal(strs, want) {
		t.Fatalf("writing the frame and Raw changed the strings: %q", strs)
	}
}
