package imv2

import (
	"encoding/json"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"
)

// FileType is files[].type of a chat.message (M4).
type FileType string

// The four file types of M4.
const (
	FileImage FileType = "image"
	FileVideo FileType = "video"
	FileAudio FileType = "audio"
	FileFile  FileType = "file"
)

// Valid reports whether t is one of the four file types.
func (t FileType) Valid() bool {
	switch t {
	case FileImage, FileVideo, FileAudio, FileFile:
		return true
	}
	return false
}

// ChatMessage is the payload of a chat.message: a complete user message
// (ToXAgent) or the final of one assistant message (ToConnector, M1, M10).
// Text and all files form one business message and one ack unit (M12).
type ChatMessage struct {
	// MessageID is the business idempotency key inside the channel (I4, M2).
	MessageID string `json:"message_id"`
	// Text is the whole body; a file-only message may leave it empty (M3).
	Text string `json:"text,omitempty"`
	// Files are references to bytes on the Transfer Plane, never the bytes (M5, M8).
	Files []File `json:"files,omitempty"`
	// CreatedAt is Unix milliseconds; optional.
	CreatedAt int64 `json:"created_at,omitzero"`
	// Raw is the payload exactly as received, nil on a message built in
	// Go. Decoding ignores members this version does not define (E5); a
	// Connector whose platform needs one (a newer xAgent's resource_key,
	// say) reads it from Raw, for example with json.Unmarshal into a
	// struct of its own. Raw is never sent: builders and encoders write
	// the fields above only (strict writing). Treat it as read-only.
	Raw json.RawMessage `json:"-"`
}

// File is one entry of chat.message files[] (M4–M7). It has no field for
// bytes, base64, paths or tokens: those cannot be sent (M8).
type File struct {
	Type    FileType `json:"type"`
	FileRef string   `json:"file_ref"`
	// Optional metadata (M5).
	Filename  string `json:"filename,omitempty"`
	MimeType  string `json:"mime_type,omitempty"`
	ByteSize  int64  `json:"byte_size,omitzero"`
	ExpiresAt int64  `json:"expires_at,omitzero"`
	// DownloadURL is required ToXAgent: an absolute http(s) URL or a relative
	// Connector URI (M6). ToConnector files were uploaded first (M7) and need none.
	DownloadURL string `json:"download_url,omitempty"`
}

// Validate checks the message against the rules of its direction:
// M3–M8 and the I2 identity ban, plus the package bounds (limits.go).
func (m *ChatMessage) Validate(dir Direction) error {
	if dir != ToConnector && dir != ToXAgent {
		return Errorf(CodeInvalidPacket, "chat.message: invalid direction")
	}
	if err := checkID("chat.message: message_id", m.MessageID); err != nil {
		return err
	}
	if m.Text == "" && len(m.Files) == 0 {
		return Errorf(CodeInvalidPacket, "chat.message: text and files are both empty (M3)")
	}
	if len(m.Text) > MaxTextBytes {
		return Errorf(CodeInvalidPacket, "chat.message: text is %d bytes, over %d", len(m.Text), MaxTextBytes)
	}
	if !utf8.ValidString(m.Text) {
		return Errorf(CodeInvalidPacket, "chat.message: text is not valid UTF-8")
	}
	if m.CreatedAt < 0 {
		return Errorf(CodeInvalidPacket, "chat.message: created_at is negative")
	}
	if len(m.Files) > MaxFilesPerMessage {
		return Errorf(CodeInvalidPacket, "chat.message: %d files, over %d", len(m.Files), MaxFilesPerMessage)
	}
	for i := range m.Files {
		f := &m.Files[i]
		if err := f.validate(dir); err != nil {
			return err
		}
		for j := 0; j < i; j++ {
			if m.Files[j].FileRef == f.FileRef {
				return Errorf(CodeInvalidPacket, "chat.message: file_ref %q appears twice (M5)", f.FileRef)
			}
		}
	}
	return nil
}

func (f *File) validate(dir Direction) error {
	if !f.Type.Valid() {
		return Errorf(CodeInvalidPacket, "chat.message: files[].type %q is not image, video, audio or file (M4)", f.Type)
	}
	if err := checkID("chat.message: files[].file_ref", f.FileRef); err != nil {
		return err
	}
	if len(f.Filename) > MaxFilenameChars && utf8.RuneCountInString(f.Filename) > MaxFilenameChars {
		return Errorf(CodeInvalidPacket, "chat.message: filename is %d characters, over %d", utf8.RuneCountInString(f.Filename), MaxFilenameChars)
	}
	if localPath(f.Filename) {
		return Errorf(CodeForbiddenField, "chat.message: filename %q is a local path (M8)", shortName(f.Filename))
	}
	if f.ByteSize < 0 || f.ExpiresAt < 0 {
		return Errorf(CodeInvalidPacket, "chat.message: byte_size and expires_at must not be negative")
	}
	if f.DownloadURL == "" {
		if dir == ToXAgent {
			return Errorf(CodeInvalidPacket, "chat.message: file %q has no download_url (M6)", f.FileRef)
		}
		return nil
	}
	return CheckDownloadURL(f.DownloadURL)
}

// CheckDownloadURL reports whether u may stand in files[].download_url (M6):
// an absolute http or https URL without user info, or a relative Connector
// URI (a path reference such as "/files/refs/abc"), with no raw space.
// Every other scheme
// (file:, data:, ftp:, javascript: …) is rejected, as are user:password@
// credentials, which M8 keeps out of a message.
func CheckDownloadURL(u string) error {
	if len(u) > 4096 {
		return Errorf(CodeInvalidPacket, "chat.message: download_url is longer than 4096 bytes")
	}
	if plainDownloadURL(u) {
		return nil
	}
	return checkDownloadURLParse(u)
}

// checkDownloadURLParse is CheckDownloadURL by url.Parse, the reference
// for plainDownloadURL.
func checkDownloadURLParse(u string) error {
	if strings.IndexFunc(u, isURLSpace) >= 0 { // url.Parse takes one; no URI has one (RFC 3986)
		return Errorf(CodeInvalidPacket, "chat.message: download_url has a space; escape it (%%20)")
	}
	parsed, err := url.Parse(u)
	if err != nil {
		return Errorf(CodeInvalidPacket, "chat.message: download_url does not parse")
	}
	if parsed.User != nil {
		return Errorf(CodeForbiddenField, "chat.message: download_url carries credentials (M8)")
	}
	switch parsed.Scheme {
	case "http", "https":
		if parsed.Host == "" {
			return Errorf(CodeInvalidPacket, "chat.message: download_url has no host")
		}
		return nil
	case "":
		if parsed.Host != "" || strings.HasPrefix(u, "//") {
			return Errorf(CodeInvalidPacket, "chat.message: download_url is scheme-relative; use an absolute URL or a path (M6)")
		}
		if parsed.Path == "" {
			return Errorf(CodeInvalidPacket, "chat.message: download_url has no path")
		}
		rel := u
		if i := strings.IndexAny(rel, "?#"); i >= 0 {
			rel = rel[:i]
		}
		if !strings.HasPrefix(rel, "/") && strings.Contains(rel, ":") {
			// A colon reads as a scheme's end (RFC 3986 §4.2); the schema's
			// pattern refuses one anywhere in such a path.
			return Errorf(CodeInvalidPacket, "chat.message: download_url is a relative path with a colon; start it with /")
		}
		return nil
	}
	return Errorf(CodeInvalidPacket, "chat.message: download_url scheme %q is not http or https (M6)", parsed.Scheme)
}

// isURLSpace reports a rune JSON Schema's \s matches (ECMA-262: Unicode
// white space and U+FEFF), which readers of the profile's pattern refuse.
func isURLSpace(r rune) bool { return unicode.IsSpace(r) || r == '\uFEFF' }

// plainDownloadURL reports the common download_url shapes that
// CheckDownloadURL accepts without parsing: a path reference "/…" (not
// "//…") or "http://host/…" / "https://host/…" with a plain host, made only
// of characters url.Parse takes as they are. Anything else is parsed.
func plainDownloadURL(u string) bool {
	rest := u
	switch {
	case strings.HasPrefix(u, "/"):
		if strings.HasPrefix(u, "//") {
			return false
		}
	case strings.HasPrefix(u, "https://"):
		rest = u[len("https://"):]
	case strings.HasPrefix(u, "http://"):
		rest = u[len("http://"):]
	default:
		return false
	}
	if rest != u { // a host, then a path, query or the end
		n := 0
		for n < len(rest) && hostByte(rest[n]) {
			n++
		}
		if n == 0 || (n < len(rest) && rest[n] != '/') {
			return false
		}
		rest = rest[n:]
	}
	for i := 0; i < len(rest); i++ {
		if !pathByte(rest[i]) {
			return false
		}
	}
	return true
}

func hostByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.'
}

// pathByte admits unreserved characters, sub-delims and the path and
// query separators; '%' (escapes), '#', '@', ':' and everything else goes
// to url.Parse.
func pathByte(c byte) bool {
	if hostByte(c) {
		return true
	}
	switch c {
	case '_', '~', '/', '?', '=', '&', '!', '$', '\'', '(', ')', '*', '+', ',', ';':
		return true
	}
	return false
}

// localPath reports a filename that is a local path (M8): absolute ("/x",
// "\\x", "C:\\x", "C:/x", "~/x") or climbing out with a ".." element. A
// filename is metadata (profile §5), so a slash or backslash inside a
// name ("Q3/Q4 chart.png", "a\\b.png") is kept as sent; a receiver cleans
// it where it becomes a path or a display name.
func localPath(name string) bool {
	if name == "" {
		return false
	}
	switch {
	case name[0] == '/' || name[0] == '\\':
		return true
	case len(name) >= 2 && name[0] == '~' && isSlash(name[1]):
		return true
	case len(name) >= 3 && name[1] == ':' && isSlash(name[2]) && ('a' <= name[0]|0x20 && name[0]|0x20 <= 'z'):
		return true
	}
	for start := 0; start <= len(name); {
		end := start
		for end < len(name) && !isSlash(name[end]) {
			end++
		}
		if name[start:end] == ".." {
			return true
		}
		start = end + 1
	}
	return false
}

func isSlash(c byte) bool { return c == '/' || c == '\\' }

// shortName cuts a filename for an error message.
func shortName(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return s
}

func checkID(what, id string) error {
	if id == "" {
		return Errorf(CodeInvalidPacket, "%s is empty", what)
	}
	if len(id) > MaxIDBytes {
		return Errorf(CodeInvalidPacket, "%s is %d bytes, over %d", what, len(id), MaxIDBytes)
	}
	return nil
}

// checkRoute enforces I1 on every IM v2 packet.
func checkRoute(p *Packet) error {
	if p.ConnectorChannelID == "" {
		return Errorf(CodeChannelIDRequired, "%s: connector_channel_id is required (I1)", p.Type)
	}
	return nil
}

// DecodeChatMessage decodes and validates the payload of a chat.message
// travelling in dir. The packet must carry connector_channel_id (I1).
// The first call on a packet from DecodePacket takes the message decoded
// with the envelope (one read of the payload on receive); later calls
// decode a message of their own.
func DecodeChatMessage(p *Packet, dir Direction) (*ChatMessage, error) {
	if p.Type != TypeChatMessage {
		return nil, Errorf(CodeInvalidPacket, "packet type is %q, not %s", p.Type, TypeChatMessage)
	}
	if err := checkRoute(p); err != nil {
		return nil, err
	}
	m := takeDecoded[ChatMessage](p)
	if m == nil {
		var ok bool
		if m, ok = decodeChatMessageFast(p.Payload); !ok {
			m = new(ChatMessage)
			if err := decodeIMPayload(p, m); err != nil {
				return nil, err
			}
		}
	}
	if err := m.Validate(dir); err != nil {
		return nil, err
	}
	m.Raw = p.Payload
	return m, nil
}

// NewChatMessage validates m for dir and returns a chat.message packet for
// channel. An empty MessageID is filled with NewMessageID (M2); keep the
// returned packet (or at least m.MessageID) to resend the same message.
func NewChatMessage(channel string, dir Direction, m ChatMessage) (*Packet, error) {
	if m.MessageID == "" {
		m.MessageID = NewMessageID()
	}
	if err := m.Validate(dir); err != nil {
		return nil, err
	}
	if channel == "" {
		return nil, Errorf(CodeChannelIDRequired, "chat.message: connector_channel_id is required (I1)")
	}
	raw, err := marshalChatMessage(&m)
	if err != nil {
		return nil, Errorf(CodeInvalidPacket, "chat.message: %s", jsonErrText(err))
	}
	return NewPacket(TypeChatMessage, channel, jsonRaw(raw))
}
