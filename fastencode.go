package imv2

import (
	"strconv"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/xagentkit/imv2/internal/fastjson"
)

// Hand-written encoders for the four IM v2 payloads. Each writes the bytes
// jsonv2.Marshal writes for the same value (field order, omitempty and
// omitzero, string escaping), without reflection; the differential tests
// in fastcodec_test.go hold them to that. A string that is not valid UTF-8
// sends the value to jsonv2.Marshal, which reports the error. They pay end
// to end: with jsonv2.Marshal instead, a message acknowledged over a
// loopback WebSocket costs 1.23× the time and the CPU and 19 allocations
// instead of 16 (issue 24; the figures and the command are in fastjson's
// package doc).

func appendChatMessage(dst []byte, m *ChatMessage) ([]byte, bool) {
	ok := true
	q := func(s string) {
		var good bool
		dst, good = fastjson.Quote(dst, s)
		ok = ok && good
	}
	dst = append(dst, `{"message_id":`...)
	q(m.MessageID)
	if m.Text != "" {
		dst = append(dst, `,"text":`...)
		q(m.Text)
	}
	if len(m.Files) > 0 {
		dst = append(dst, `,"files":[`...)
		for i := range m.Files {
			f := &m.Files[i]
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"type":`...)
			q(string(f.Type))
			dst = append(dst, `,"file_ref":`...)
			q(f.FileRef)
			if f.Filename != "" {
				dst = append(dst, `,"filename":`...)
				q(f.Filename)
			}
			if f.MimeType != "" {
				dst = append(dst, `,"mime_type":`...)
				q(f.MimeType)
			}
			if f.ByteSize != 0 {
				dst = append(dst, `,"byte_size":`...)
				dst = strconv.AppendInt(dst, f.ByteSize, 10)
			}
			if f.ExpiresAt != 0 {
				dst = append(dst, `,"expires_at":`...)
				dst = strconv.AppendInt(dst, f.ExpiresAt, 10)
			}
			if f.DownloadURL != "" {
				dst = append(dst, `,"download_url":`...)
				q(f.DownloadURL)
			}
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	if m.CreatedAt != 0 {
		dst = append(dst, `,"created_at":`...)
		dst = strconv.AppendInt(dst, m.CreatedAt, 10)
	}
	return append(dst, '}'), ok
}

// chatMessageSize estimates the encoded size of m, so one allocation holds it.
func chatMessageSize(m *ChatMessage) int {
	n := 48 + len(m.MessageID) + len(m.Text) + len(m.Text)/8
	for i := range m.Files {
		f := &m.Files[i]
		n += 128 + len(f.Type) + len(f.FileRef) + len(f.Filename) + len(f.MimeType) + len(f.DownloadURL)
	}
	return n
}

// marshalChatMessage returns what jsonv2.Marshal(m) returns.
func marshalChatMessage(m *ChatMessage) ([]byte, error) {
	if b, ok := appendChatMessage(make([]byte, 0, chatMessageSize(m)), m); ok {
		return b, nil
	}
	fallback := *m // only this copy escapes, so m can live on its caller's stack
	return jsonv2.Marshal(&fallback)
}

// marshalDelta returns what jsonv2.Marshal(d) returns.
func marshalDelta(d *ChatMessageDelta) ([]byte, error) {
	b := make([]byte, 0, 64+len(d.MessageID)+len(d.Text)+len(d.Text)/8)
	b = append(b, `{"message_id":`...)
	b, ok1 := fastjson.Quote(b, d.MessageID)
	b = append(b, `,"sequence":`...)
	b = strconv.AppendInt(b, d.Sequence, 10)
	b = append(b, `,"text":`...)
	b, ok2 := fastjson.Quote(b, d.Text)
	if ok1 && ok2 {
		return append(b, '}'), nil
	}
	return jsonv2.Marshal(d)
}

// marshalAck returns what jsonv2.Marshal(w) returns.
func marshalAck(w *ackWire) ([]byte, error) {
	return appendAck(make([]byte, 0, ackSize(w)), w)
}

// ackSize is the capacity an ack's payload fits in.
func ackSize(w *ackWire) int { return 64 + len(w.MessageID) + len(w.Code) + len(w.Message) }

// appendAck appends what jsonv2.Marshal(w) returns to b.
func appendAck(b []byte, w *ackWire) ([]byte, error) {
	start := len(b)
	ok := true
	q := func(s string) {
		var good bool
		b, good = fastjson.Quote(b, s)
		ok = ok && good
	}
	b = append(b, `{"message_id":`...)
	q(w.MessageID)
	b = append(b, `,"status":`...)
	q(string(w.Status))
	if w.Code != "" {
		b = append(b, `,"code":`...)
		q(string(w.Code))
	}
	if w.Message != "" {
		b = append(b, `,"message":`...)
		q(w.Message)
	}
	if w.Retryable != nil {
		b = append(b, `,"retryable":`...)
		b = strconv.AppendBool(b, *w.Retryable)
	}
	if ok {
		return append(b, '}'), nil
	}
	fallback := *w // only this copy escapes, so w can live on its caller's stack
	out, err := jsonv2.Marshal(&fallback)
	return append(b[:start], out...), err
}

// marshalActivity returns what jsonv2.Marshal(a) returns.
func marshalActivity(a *ChatActivity) ([]byte, error) {
	b := make([]byte, 0, 48+len(a.Status)+len(a.ToolName))
	b = append(b, `{"status":`...)
	b, ok1 := fastjson.Quote(b, string(a.Status))
	ok2 := true
	if a.ToolName != "" {
		b = append(b, `,"tool_name":`...)
		b, ok2 = fastjson.Quote(b, a.ToolName)
	}
	if ok1 && ok2 {
		return append(b, '}'), nil
	}
	return jsonv2.Marshal(a)
}

// marshalKnown is jsonv2.Marshal, fast for the IM v2 payloads.
func marshalKnown(v any) ([]byte, error) {
	switch v := v.(type) {
	case *ChatMessage:
		if v != nil {
			return marshalChatMessage(v)
		}
	case ChatMessage:
		return marshalChatMessage(&v)
	case *ChatMessageDelta:
		if v != nil {
			return marshalDelta(v)
		}
	case ChatMessageDelta:
		return marshalDelta(&v)
	case *ackWire:
		if v != nil {
			return marshalAck(v)
		}
	case *ChatActivity:
		if v != nil {
			return marshalActivity(v)
		}
	case ChatActivity:
		return marshalActivity(&v)
	}
	return jsonv2.Marshal(v)
}
