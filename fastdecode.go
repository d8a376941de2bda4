package imv2

import (
	"encoding/json"
	"unsafe"
)

// Fast decoders for the envelope and the four IM v2 payloads: one pass of
// the scanner straight into the Go values, with no reflection. Each returns
// ok = false for anything it does not take on, and its caller then runs the
// codec (see scanner), so results and errors are the codec's in every case.

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
	s := scanner{b: data}
	if !s.eat('{') {
		return nil, false, false
	}
	var pk Packet
	var seen uint
	var unknown unknownNames
	var payload []byte
	// A payload decoded in this pass comes with the packet to fill.
	var p *Packet
	var m *ChatMessage
	// The short strings, the envelope's and the payload's, are made at the
	// end in one array of their exact size.
	var d deferredStrs
	s.ws()
	if s.peek() == '}' {
		s.i++
		return new(Packet), false, s.end()
	}
	for {
		name, ok := s.name()
		if !ok {
			return nil, false, false
		}
		var bit uint
		switch string(name) {
		case "schema":
			bit = envSchema
			raw, esc, ok := s.str()
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
			ok = s.deferText(&d, &pk.PacketID, fileEnvelope, strPacketID)
		case "request_id":
			bit = envRequestID
			ok = s.deferText(&d, &pk.RequestID, fileEnvelope, strRequestID)
		case "reply_to":
			bit = envReplyTo
			ok = s.deferText(&d, &pk.ReplyTo, fileEnvelope, strReplyTo)
		case "connector_channel_id":
			bit = envChannel
			ok = s.deferText(&d, &pk.ConnectorChannelID, fileEnvelope, strChannel)
		case "type":
			bit = envType
			raw, esc, ok := s.str()
			if !ok || esc {
				return nil, false, false
			}
			pk.Type = internType(raw)
		case "time":
			bit = envTime
			if pk.Time, ok = s.int(); !ok { // the common case, read once
				pk.Time, ok = s.integral()
			}
		case "payload":
			bit = envPayload
			start := s.i
			if s.peek() != '{' || seen&envPayload != 0 {
				return nil, false, false
			}
			if seen&envType != 0 {
				p, m = s.payload(pk.Type, &d)
			}
			if p == nil && !s.value(0) {
				return nil, false, false
			}
			payload = data[start:s.i]
		case "error":
			return nil, false, false // rare: the codec decodes it
		default:
			// An unknown member (E5) is checked and skipped.
			if !unknown.add(name) || !s.value(0) {
				return nil, false, false
			}
			ok = true
		}
		if !ok || seen&bit != 0 {
			return nil, false, false
		}
		seen |= bit
		more, ok := s.next('}')
		if !ok {
			return nil, false, false
		}
		if !more {
			break
		}
	}
	if !s.end() {
		return nil, false, false
	}
	if p == nil {
		p = new(Packet)
	}
	pk.decoded = p.decoded
	*p = pk
	s.strs.reserve(d.size)
	for i := range d.e[:d.n] {
		e := &d.e[i]
		*e.dst(p, m) = s.strs.str(e.raw, e.esc, 0)
	}
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

// textOf reads a string value and returns the matching constant of known
// without an allocation when there is one, else the string in s.strs.
func (s *scanner) textOf(known ...string) (string, bool) {
	s.ws()
	rest := len(s.b) - s.i
	raw, esc, ok := s.str()
	if !ok {
		return "", false
	}
	if !esc {
		for _, k := range known {
			if string(raw) == k {
				return k, true
			}
		}
	}
	return s.strs.str(raw, esc, rest), true
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
// made at the end, in one array of their exact size (deferredStrs).
func decodeChatMessageFast(b []byte) (*ChatMessage, bool) {
	s := scanner{b: b, forbid: rulesOf(TypeChatMessage), deep: deepRulesOf(TypeChatMessage)}
	m := new(ChatMessage)
	var d deferredStrs
	if !s.chatMessage(m, &d) || !s.end() {
		return nil, false
	}
	s.strs.reserve(d.size)
	for i := range d.e[:d.n] {
		e := &d.e[i]
		*e.dst(nil, m) = s.strs.str(e.raw, e.esc, 0)
	}
	return m, true
}

// chatMessage reads a chat.message payload at the cursor into m and
// defers its short strings to d.
func (s *scanner) chatMessage(m *ChatMessage, d *deferredStrs) bool {
	const (
		fID = 1 << iota
		fText
		fFiles
		fCreated
	)
	return s.members(func(name []byte) (uint, bool) {
		var bit uint
		var ok bool
		switch string(name) {
		case "message_id":
			bit = fID
			ok = s.deferText(d, &m.MessageID, fileNone, strMessageID)
		case "text":
			bit = fText
			ok = s.deferText(d, &m.Text, fileNone, strText)
		case "files":
			bit = fFiles
			m.Files, ok = s.files(d)
		case "created_at":
			bit = fCreated
			m.CreatedAt, ok = s.int()
		default:
			return 0, true // unknown: members skips it
		}
		return bit, ok
	})
}

// The string fields of an envelope, a chat.message and its files, for
// deferredStrs.
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

// What a deferredStr's file names besides an index in Files.
const (
	fileNone     = -1 // the message's own fields
	fileEnvelope = -2 // the envelope's
	fileFixed    = -3 // a field that stays where it is (deferredStr.to)
)

// maxDeferredStrs bounds the strings of one frame made at its end; the
// rest are made as they are read, in arrays of their own.
const maxDeferredStrs = 24

// deferredStrs holds the raw strings of one frame or payload until its
// end, so that one array of their exact size holds them all. A string is
// named by its place, not by a pointer: the files slice may still grow,
// and the envelope and the message are still on the stack.
type deferredStrs struct {
	n, size int
	e       [maxDeferredStrs]deferredStr
}

type deferredStr struct {
	file  int // index in Files, fileNone, fileEnvelope or fileFixed
	field int
	to    *string // the field, for fileFixed
	raw   []byte
	esc   bool
}

// dst returns the field of p or m that e names.
func (e *deferredStr) dst(p *Packet, m *ChatMessage) *string {
	switch e.file {
	case fileFixed:
		return e.to
	case fileEnvelope:
		switch e.field {
		case strPacketID:
			return &p.PacketID
		case strRequestID:
			return &p.RequestID
		case strReplyTo:
			return &p.ReplyTo
		}
		return &p.ConnectorChannelID
	case fileNone:
		if e.field == strMessageID {
			return &m.MessageID
		}
		return &m.Text
	}
	f := &m.Files[e.file]
	switch e.field {
	case strFileRef:
		return &f.FileRef
	case strFilename:
		return &f.Filename
	case strMimeType:
		return &f.MimeType
	}
	return &f.DownloadURL
}

// makeDeferred makes the strings deferred to d, all of them fileFixed,
// in one array of their exact size.
func (s *scanner) makeDeferred(d *deferredStrs) {
	s.strs.reserve(d.size)
	for i := range d.e[:d.n] {
		e := &d.e[i]
		*e.to = s.strs.str(e.raw, e.esc, 0)
	}
}

// deferFixed is deferText for a field that stays where it is until the
// strings are made (in a heap value, not on the stack).
func (s *scanner) deferFixed(d *deferredStrs, dst *string) bool {
	n := d.n
	if !s.deferText(d, dst, fileFixed, 0) {
		return false
	}
	if d.n > n {
		d.e[n].to = dst
	}
	return true
}

// deferText reads a string value for the field (file, field), whose
// storage now is dst: an empty one is left "", a short one is deferred to
// d while d stays within maxDeferredStrs and arenaMaxChunk bytes, and any
// other is made now.
func (s *scanner) deferText(d *deferredStrs, dst *string, file, field int) bool {
	s.ws()
	rest := len(s.b) - s.i
	raw, esc, ok := s.str()
	switch {
	case !ok:
		return false
	case len(raw) == 0:
		*dst = ""
	case len(raw) <= arenaMaxString && d.n < maxDeferredStrs && d.size+len(raw) <= arenaMaxChunk:
		d.e[d.n] = deferredStr{file: file, field: field, raw: raw, esc: esc}
		d.n++
		d.size += len(raw) // unescaping only shortens
	default:
		*dst = s.strs.str(raw, esc, rest)
	}
	return true
}

// files reads a non-empty array of file objects.
func (s *scanner) files(d *deferredStrs) ([]File, bool) {
	if !s.eat('[') {
		return nil, false
	}
	files := make([]File, 0, 2)
	for {
		files = append(files, File{})
		if !s.file(&files[len(files)-1], len(files)-1, d) {
			return nil, false
		}
		more, ok := s.next(']')
		if !ok {
			return nil, false
		}
		if !more {
			return files, true
		}
	}
}

func (s *scanner) file(f *File, i int, d *deferredStrs) bool {
	const (
		fType = 1 << iota
		fRef
		fName
		fMime
		fSize
		fExpires
		fURL
	)
	return s.members(func(name []byte) (uint, bool) {
		var bit uint
		var ok bool
		switch string(name) {
		case "type":
			bit = fType
			var t string
			t, ok = s.textOf(string(FileImage), string(FileVideo), string(FileAudio), string(FileFile))
			f.Type = FileType(t)
		case "file_ref":
			bit = fRef
			ok = s.deferText(d, &f.FileRef, i, strFileRef)
		case "filename":
			bit = fName
			ok = s.deferText(d, &f.Filename, i, strFilename)
		case "mime_type":
			bit = fMime
			ok = s.deferText(d, &f.MimeType, i, strMimeType)
		case "byte_size":
			bit = fSize
			f.ByteSize, ok = s.int()
		case "expires_at":
			bit = fExpires
			f.ExpiresAt, ok = s.int()
		case "download_url":
			bit = fURL
			ok = s.deferText(d, &f.DownloadURL, i, strDownloadURL)
		default:
			return 0, true // unknown: members skips it
		}
		return bit, ok
	})
}

// members reads a non-empty object at the cursor, handing each member name
// to member, which reads the value and returns the member's bit, or
// ok = false for a value it does not take. Bit 0 is an unknown member
// (E5): members skips its value, checked like any value and clear of
// the names forbidden inside it (scanner.deep). A duplicate or a forbidden member ends
// the read too, and the codec decides.
func (s *scanner) members(member func(name []byte) (bit uint, ok bool)) bool {
	if !s.eat('{') {
		return false
	}
	var seen uint
	var unknown unknownNames
	for {
		name, ok := s.name()
		if !ok {
			return false
		}
		bit, ok := member(name)
		switch {
		case !ok:
			return false
		case bit == 0:
			if forbiddenName(name, s.forbid) || !unknown.add(name) || !s.value(1) {
				return false
			}
		case seen&bit != 0:
			return false
		}
		seen |= bit
		more, ok := s.next('}')
		if !ok {
			return false
		}
		if !more {
			return true
		}
	}
}

// decodeDeltaFast decodes a chat.message.delta payload.
func decodeDeltaFast(b []byte) (*ChatMessageDelta, bool) {
	s := scanner{b: b, forbid: rulesOf(TypeChatMessageDelta), deep: deepRulesOf(TypeChatMessageDelta)}
	d := new(ChatMessageDelta)
	var strs deferredStrs
	if !s.delta(d, &strs) || !s.end() {
		return nil, false
	}
	s.makeDeferred(&strs)
	return d, true
}

// delta reads a chat.message.delta payload at the cursor into d.
func (s *scanner) delta(d *ChatMessageDelta, strs *deferredStrs) bool {
	const (
		fID = 1 << iota
		fSeq
		fText
	)
	return s.members(func(name []byte) (uint, bool) {
		var bit uint
		var ok bool
		switch string(name) {
		case "message_id":
			bit = fID
			ok = s.deferFixed(strs, &d.MessageID)
		case "sequence":
			bit = fSeq
			d.Sequence, ok = s.int()
		case "files":
			return 0, false // D7: the codec words the rejection
		case "text":
			bit = fText
			ok = s.deferFixed(strs, &d.Text)
		default:
			return 0, true // unknown: members skips it
		}
		return bit, ok
	})
}

// decodeAckFast decodes a chat.message.ack payload.
func decodeAckFast(b []byte) (*ackWire, bool) {
	s := scanner{b: b, forbid: rulesOf(TypeChatMessageAck), deep: deepRulesOf(TypeChatMessageAck)}
	w := new(ackWire)
	var d deferredStrs
	if !s.ack(w, &d) || !s.end() {
		return nil, false
	}
	s.makeDeferred(&d)
	return w, true
}

// ack reads a chat.message.ack payload at the cursor into w.
func (s *scanner) ack(w *ackWire, d *deferredStrs) bool {
	const (
		fID = 1 << iota
		fStatus
		fCode
		fMessage
		fRetryable
	)
	return s.members(func(name []byte) (uint, bool) {
		var bit uint
		var ok bool
		switch string(name) {
		case "message_id":
			bit = fID
			ok = s.deferFixed(d, &w.MessageID)
		case "status":
			bit = fStatus
			var st string
			st, ok = s.textOf(string(AckAccepted), string(AckDuplicate), string(AckRejected))
			w.Status = AckStatus(st)
		case "code":
			bit = fCode
			ok = s.deferFixed(d, (*string)(&w.Code))
		case "message":
			bit = fMessage
			ok = s.deferFixed(d, &w.Message)
		case "retryable":
			bit = fRetryable
			var r bool
			switch {
			case s.literal("true"):
				r, ok = true, true
			case s.literal("false"):
				ok = true
			}
			w.Retryable = &r
		default:
			return 0, true // unknown: members skips it
		}
		return bit, ok
	})
}

// decodeActivityFast decodes a chat.activity payload.
func decodeActivityFast(b []byte) (*ChatActivity, bool) {
	s := scanner{b: b, forbid: rulesOf(TypeChatActivity), deep: deepRulesOf(TypeChatActivity)}
	a := new(ChatActivity)
	var d deferredStrs
	if !s.activity(a, &d) || !s.end() {
		return nil, false
	}
	s.makeDeferred(&d)
	return a, true
}

// activity reads a chat.activity payload at the cursor into a.
func (s *scanner) activity(a *ChatActivity, d *deferredStrs) bool {
	const (
		fStatus = 1 << iota
		fTool
	)
	return s.members(func(name []byte) (uint, bool) {
		var bit uint
		var ok bool
		switch string(name) {
		case "status":
			bit = fStatus
			var st string
			st, ok = s.textOf(string(ActivityThinking), string(ActivityTool), string(ActivityIdle))
			a.Status = ActivityStatus(st)
		case "tool_name":
			bit = fTool
			ok = s.deferFixed(d, &a.ToolName)
		default:
			return 0, true // unknown: members skips it
		}
		return bit, ok
	})
}

// maxUnknownNames bounds the unknown members one object of the fast path
// takes; more go to the codec.
const maxUnknownNames = 8

// unknownNames remembers the unknown member names of one object, to refuse
// a duplicate without an allocation.
type unknownNames struct {
	names [maxUnknownNames][]byte
	n     int
}

// add records name; false for a repeat or one too many.
func (u *unknownNames) add(name []byte) bool {
	if u.n == maxUnknownNames {
		return false
	}
	for _, prev := range u.names[:u.n] {
		if string(prev) == string(name) {
			return false
		}
	}
	u.names[u.n] = name
	u.n++
	return true
}
