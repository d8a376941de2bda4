package imv2

import (
	"encoding/json"
	"unsafe"

	"github.com/xagentkit/imv2/internal/fastjson"
)

// Fast decoders for the envelope and the four IM v2 payloads: one pass of
// the scanner straight into the Go values, with no reflection. Each returns
// ok = false for anything it does not take on, and its caller then runs the
// codec (see fastjson.Scanner), so results and errors are the codec's in
// every case. The machinery is in internal/fastjson; here is what maps it
// onto the profile's types. They pay end to end: with the codec instead, a
// message acknowledged over a loopback WebSocket costs 1.8× the time and
// 50 allocations instead of 16 (issue 24; the figures and the command are
// in fastjson's package doc).

// Envelope member bits, to refuse duplicates.
const (
	envSchema = 1 << iota
	envPacketID
	envRequestID
	envReplyTo
	envChannel
	envType
	envTime
	envPayload
)

// decodeEnvelopeFast decodes a frame whose envelope has no error member and
// whose payload, if any, is an object; unknown members are skipped (E5).
// hasTime reports a time member.
//
// A payload of one of the four IM v2 types that follows its type member
// is decoded in the same pass, by the reader its typed decoder runs
// (DecodeChatMessage and friends), and the packet carries the result
// (decodedPayload): one walk of the payload's bytes on the receive path
// instead of one to check it here and one to decode it there. When that
// reader gives up, the payload is only checked, as any other, and the
// typed decoder later decides.
func decodeEnvelopeFast(data []byte) (_ *Packet, hasTime, ok bool) {
	s := fastjson.New(data)
	if !s.Eat('{') {
		return nil, false, false
	}
	var pk Packet
	var seen uint
	var unknown fastjson.UnknownNames
	var payload []byte
	// A payload decoded in this pass comes with the packet to fill.
	var p *Packet
	var m *ChatMessage
	// The short strings, the envelope's and the payload's, are made at the
	// end in one array of their exact size.
	var d fastjson.Deferred
	if s.Eat('}') {
		return new(Packet), false, s.End()
	}
	for {
		name, ok := s.Name()
		if !ok {
			return nil, false, false
		}
		var bit uint
		switch string(name) {
		case "schema":
			bit = envSchema
			raw, esc, ok := s.Str()
			if !ok || esc {
				return nil, false, false
			}
			if string(raw) == PacketSchema {
				pk.Schema = PacketSchema
			} else {
				pk.Schema = string(raw)
			}
		case "packet_id":
			bit = envPacketID
			ok = s.DeferText(&d, &pk.PacketID, fileEnvelope, strPacketID)
		case "request_id":
			bit = envRequestID
			ok = s.DeferText(&d, &pk.RequestID, fileEnvelope, strRequestID)
		case "reply_to":
			bit = envReplyTo
			ok = s.DeferText(&d, &pk.ReplyTo, fileEnvelope, strReplyTo)
		case "connector_channel_id":
			bit = envChannel
			ok = s.DeferText(&d, &pk.ConnectorChannelID, fileEnvelope, strChannel)
		case "type":
			bit = envType
			raw, esc, ok := s.Str()
			if !ok || esc {
				return nil, false, false
			}
			pk.Type = internType(raw)
		case "time":
			bit = envTime
			if pk.Time, ok = s.Int(); !ok { // the common case, read once
				pk.Time, ok = s.Integral()
			}
		case "payload":
			bit = envPayload
			start := s.Pos()
			if s.Peek() != '{' || seen&envPayload != 0 {
				return nil, false, false
			}
			if seen&envType != 0 {
				p, m = decodePayload(&s, pk.Type, &d)
			}
			if p == nil && !s.Value(0) {
				return nil, false, false
			}
			payload = data[start:s.Pos()]
		case "error":
			return nil, false, false // rare: the codec decodes it
		default:
			// An unknown member (E5) is checked and skipped.
			if !unknown.Add(name) || !s.Value(0) {
				return nil, false, false
			}
			ok = true
		}
		if !ok || seen&bit != 0 {
			return nil, false, false
		}
		seen |= bit
		more, ok := s.Next('}')
		if !ok {
			return nil, false, false
		}
		if !more {
			break
		}
	}
	if !s.End() {
		return nil, false, false
	}
	if p == nil {
		p = new(Packet)
	}
	pk.decoded = p.decoded
	*p = pk
	s.MakeDeferred(&d, func(file, field int) *string { return fieldOf(p, m, file, field) })
	if payload != nil {
		// A copy: the frame's buffer is the transport's. append does not
		// zero the new array first, as make would.
		p.Payload = json.RawMessage(append([]byte(nil), payload...))
		if p.decoded != nil {
			p.decoded.of, p.decoded.n = unsafe.SliceData(p.Payload), len(p.Payload)
		}
	}
	return p, seen&envTime != 0, true
}

// internType returns the constant for a known packet type, so routing
// strings cost no allocation.
func internType(raw []byte) string {
	switch string(raw) {
	case TypeChatMessage:
		return TypeChatMessage
	case TypeChatMessageDelta:
		return TypeChatMessageDelta
	case TypeChatMessageAck:
		return TypeChatMessageAck
	case TypeChatActivity:
		return TypeChatActivity
	case "ping": // the data plane's keepalives (package protocol)
		return "ping"
	case "pong":
		return "pong"
	}
	return string(raw)
}

// decodeChatMessageFast decodes a chat.message payload. Its strings are
// made at the end, in one array of their exact size (fastjson.Deferred).
func decodeChatMessageFast(b []byte) (*ChatMessage, bool) {
	s := fastjson.New(b)
	s.SetRules(rulesOf(TypeChatMessage), deepRulesOf(TypeChatMessage))
	m := new(ChatMessage)
	var d fastjson.Deferred
	if !readChatMessage(&s, m, &d) || !s.End() {
		return nil, false
	}
	s.MakeDeferred(&d, func(file, field int) *string { return fieldOf(nil, m, file, field) })
	return m, true
}

// readChatMessage reads a chat.message payload at the cursor into m and
// defers its short strings to d.
func readChatMessage(s *fastjson.Scanner, m *ChatMessage, d *fastjson.Deferred) bool {
	const (
		fID = 1 << iota
		fText
		fFiles
		fCreated
	)
	return s.Members(func(name []byte) (uint, bool) {
		var bit uint
		var ok bool
		switch string(name) {
		case "message_id":
			bit = fID
			ok = s.DeferText(d, &m.MessageID, fileNone, strMessageID)
		case "text":
			bit = fText
			ok = s.DeferText(d, &m.Text, fileNone, strText)
		case "files":
			bit = fFiles
			m.Files, ok = readFiles(s, d)
		case "created_at":
			bit = fCreated
			m.CreatedAt, ok = s.Int()
		default:
			return 0, true // unknown: Members skips it
		}
		return bit, ok
	})
}

// The string fields of an envelope, a chat.message and its files, for
// fastjson.Deferred.
const (
	strMessageID = iota
	strText
	strFileRef
	strFilename
	strMimeType
	strDownloadURL
	strPacketID
	strRequestID
	strReplyTo
	strChannel
)

// What a deferred string's file names besides an index in Files.
const (
	fileNone     = -1 // the message's own fields
	fileEnvelope = -2 // the envelope's
)

// fieldOf returns the string field of p or m that (file, field) names, a
// string deferred by DeferText (fastjson.Deferred).
func fieldOf(p *Packet, m *ChatMessage, file, field int) *string {
	switch file {
	case fileEnvelope:
		switch field {
		case strPacketID:
			return &p.PacketID
		case strRequestID:
			return &p.RequestID
		case strReplyTo:
			return &p.ReplyTo
		}
		return &p.ConnectorChannelID
	case fileNone:
		if field == strMessageID {
			return &m.MessageID
		}
		return &m.Text
	}
	f := &m.Files[file]
	switch field {
	case strFileRef:
		return &f.FileRef
	case strFilename:
		return &f.Filename
	case strMimeType:
		return &f.MimeType
	}
	return &f.DownloadURL
}

// readFiles reads a non-empty array of file objects.
func readFiles(s *fastjson.Scanner, d *fastjson.Deferred) ([]File, bool) {
	if !s.Eat('[') {
		return nil, false
	}
	files := make([]File, 0, 2)
	for {
		files = append(files, File{})
		if !readFile(s, &files[len(files)-1], len(files)-1, d) {
			return nil, false
		}
		more, ok := s.Next(']')
		if !ok {
			return nil, false
		}
		if !more {
			return files, true
		}
	}
}

// readFile reads one file object, Files[i], at the cursor into f.
func readFile(s *fastjson.Scanner, f *File, i int, d *fastjson.Deferred) bool {
	const (
		fType = 1 << iota
		fRef
		fName
		fMime
		fSize
		fExpires
		fURL
	)
	return s.Members(func(name []byte) (uint, bool) {
		var bit uint
		var ok bool
		switch string(name) {
		case "type":
			bit = fType
			var t string
			t, ok = s.Text(string(FileImage), string(FileVideo), string(FileAudio), string(FileFile))
			f.Type = FileType(t)
		case "file_ref":
			bit = fRef
			ok = s.DeferText(d, &f.FileRef, i, strFileRef)
		case "filename":
			bit = fName
			ok = s.DeferText(d, &f.Filename, i, strFilename)
		case "mime_type":
			bit = fMime
			ok = s.DeferText(d, &f.MimeType, i, strMimeType)
		case "byte_size":
			bit = fSize
			f.ByteSize, ok = s.Int()
		case "expires_at":
			bit = fExpires
			f.ExpiresAt, ok = s.Int()
		case "download_url":
			bit = fURL
			ok = s.DeferText(d, &f.DownloadURL, i, strDownloadURL)
		default:
			return 0, true // unknown: Members skips it
		}
		return bit, ok
	})
}

// decodeDeltaFast decodes a chat.message.delta payload.
func decodeDeltaFast(b []byte) (*ChatMessageDelta, bool) {
	s := fastjson.New(b)
	s.SetRules(rulesOf(TypeChatMessageDelta), deepRulesOf(TypeChatMessageDelta))
	d := new(ChatMessageDelta)
	var strs fastjson.Deferred
	if !readDelta(&s, d, &strs) || !s.End() {
		return nil, false
	}
	s.MakeDeferred(&strs, nil)
	return d, true
}

// readDelta reads a chat.message.delta payload at the cursor into d.
func readDelta(s *fastjson.Scanner, d *ChatMessageDelta, strs *fastjson.Deferred) bool {
	const (
		fID = 1 << iota
		fSeq
		fText
	)
	return s.Members(func(name []byte) (uint, bool) {
		var bit uint
		var ok bool
		switch string(name) {
		case "message_id":
			bit = fID
			ok = s.DeferFixed(strs, &d.MessageID)
		case "sequence":
			bit = fSeq
			d.Sequence, ok = s.Int()
		case "files":
			return 0, false // D7: the codec words the rejection
		case "text":
			bit = fText
			ok = s.DeferFixed(strs, &d.Text)
		default:
			return 0, true // unknown: Members skips it
		}
		return bit, ok
	})
}

// decodeAckFast decodes a chat.message.ack payload.
func decodeAckFast(b []byte) (*ackWire, bool) {
	s := fastjson.New(b)
	s.SetRules(rulesOf(TypeChatMessageAck), deepRulesOf(TypeChatMessageAck))
	w := new(ackWire)
	var d fastjson.Deferred
	if !readAck(&s, w, &d) || !s.End() {
		return nil, false
	}
	s.MakeDeferred(&d, nil)
	return w, true
}

// readAck reads a chat.message.ack payload at the cursor into w.
func readAck(s *fastjson.Scanner, w *ackWire, d *fastjson.Deferred) bool {
	const (
		fID = 1 << iota
		fStatus
		fCode
		fMessage
		fRetryable
	)
	return s.Members(func(name []byte) (uint, bool) {
		var bit uint
		var ok bool
		switch string(name) {
		case "message_id":
			bit = fID
			ok = s.DeferFixed(d, &w.MessageID)
		case "status":
			bit = fStatus
			var st string
			st, ok = s.Text(string(AckAccepted), string(AckDuplicate), string(AckRejected))
			w.Status = AckStatus(st)
		case "code":
			bit = fCode
			ok = s.DeferFixed(d, (*string)(&w.Code))
		case "message":
			bit = fMessage
			ok = s.DeferFixed(d, &w.Message)
		case "retryable":
			bit = fRetryable
			var r bool
			switch {
			case s.Literal("true"):
				r, ok = true, true
			case s.Literal("false"):
				ok = true
			}
			w.Retryable = &r
		default:
			return 0, true // unknown: Members skips it
		}
		return bit, ok
	})
}

// decodeActivityFast decodes a chat.activity payload.
func decodeActivityFast(b []byte) (*ChatActivity, bool) {
	s := fastjson.New(b)
	s.SetRules(rulesOf(TypeChatActivity), deepRulesOf(TypeChatActivity))
	a := new(ChatActivity)
	var d fastjson.Deferred
	if !readActivity(&s, a, &d) || !s.End() {
		return nil, false
	}
	s.MakeDeferred(&d, nil)
	return a, true
}

// readActivity reads a chat.activity payload at the cursor into a.
func readActivity(s *fastjson.Scanner, a *ChatActivity, d *fastjson.Deferred) bool {
	const (
		fStatus = 1 << iota
		fTool
	)
	return s.Members(func(name []byte) (uint, bool) {
		var bit uint
		var ok bool
		switch string(name) {
		case "status":
			bit = fStatus
			var st string
			st, ok = s.Text(string(ActivityThinking), string(ActivityTool), string(ActivityIdle))
			a.Status = ActivityStatus(st)
		case "tool_name":
			bit = fTool
			ok = s.DeferFixed(d, &a.ToolName)
		default:
			return 0, true // unknown: Members skips it
		}
		return bit, ok
	})
}
