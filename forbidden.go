package imv2

import (
	"bytes"
	"errors"
	"io"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// The four IM v2 payloads are read tolerantly (E5): a member this version
// does not define is ignored, as Common Protocol §12 makes adding an
// optional member a compatible change (the profile's "extension profiles
// cannot modify these packets' fields" binds extension profiles, not a
// receiver). Members that I2, M8 or C4 name stay refused at any depth —
// in the payload, in a files[] item, inside an unknown member — with the
// specific code forbidden_field, so a peer learns which rule it broke.
// Builders never write an unknown member: the payload structs have no
// place for one.

// identityFields are the payload members I2 forbids on every IM v2 packet:
// identity is carried by the route and the direction, never by the payload.
var identityFields = []string{"session_id", "user_connector_id", "user_id", "connector_id", "role"}

// transferFields are member names that carry what M8 keeps out of a
// chat.message (file bytes, base64, local paths, target tokens, CDN auth)
// and what C4 keeps out of chat.activity (reasoning, arguments, results).
var transferFields = []string{
	"data", "bytes", "base64", "content", "content_base64", "body",
	"path", "local_path", "file_path",
	"token", "access_token", "auth", "authorization", "cookie", "headers", "credentials", "secret",
	"reasoning", "arguments", "args", "input", "result", "output", "error", "url",
}

// forbiddenKind classifies a member name: 0 allowed, 'I' identity (I2),
// 'T' transfer (M8, C4). It is a constant table built from the lists.
var forbiddenKind = func() map[string]byte {
	m := make(map[string]byte, len(identityFields)+len(transferFields))
	for _, n := range identityFields {
		m[n] = 'I'
	}
	for _, n := range transferFields {
		m[n] = 'T'
	}
	return m
}()

// forbiddenName reports whether a member of that name is refused anywhere
// in an IM v2 payload. The lookup does not allocate.
func forbiddenName(name []byte) bool { return forbiddenKind[string(name)] != 0 }

// decodeIMPayload decodes p's payload into v: unknown members ignored,
// forbidden ones refused (E5).
func decodeIMPayload(p *Packet, v any) error {
	if len(p.Payload) == 0 {
		return Errorf(CodeInvalidPacket, "%s: payload is missing", p.Type)
	}
	return decodeIMBytes(p.Type, p.Payload, v)
}

// decodeIMBytes is the reference decoder of an IM v2 payload of type typ,
// the one the fast decoders (fastdecode.go) are held to: one pass over
// every token refuses a forbidden name at any depth (and a delta's files,
// D7) and checks the syntax, UTF-8 and duplicate names; then the codec
// fills v, ignoring unknown members.
func decodeIMBytes(typ string, payload []byte, v any) error {
	if err := checkIMNames(typ, payload); err != nil {
		return err
	}
	if err := jsonv2.Unmarshal(payload, v); err != nil {
		return Errorf(CodeInvalidPacket, "%s payload: %s", typ, jsonErrText(err))
	}
	return nil
}

// checkIMNames walks payload and refuses the first forbidden member name.
func checkIMNames(typ string, payload []byte) error {
	dec := jsontext.NewDecoder(bytes.NewReader(payload))
	for {
		tok, err := dec.ReadToken()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return Errorf(CodeInvalidPacket, "%s payload: %s", typ, jsonErrText(err))
		}
		depth := dec.StackDepth()
		if depth == 0 { // the payload's one value ended; the codec judges the rest
			return nil
		}
		if tok.Kind() != '"' {
			continue
		}
		kind, n := dec.StackIndex(depth)
		if kind != '{' || n%2 != 1 { // a string value, not a member name
			continue
		}
		name := tok.String()
		if typ == TypeChatMessageDelta && depth == 1 && name == "files" {
			return Errorf(CodeInvalidPacket, "%s: a delta carries no files (D7)", typ)
		}
		switch forbiddenKind[name] {
		case 'I':
			return Errorf(CodeForbiddenField, "%s: member %q at %s is an identity field the profile forbids (I2)", typ, name, dec.StackPointer())
		case 'T':
			return Errorf(CodeForbiddenField, "%s: member %q at %s is not allowed in an IM v2 payload (M8, C4)", typ, name, dec.StackPointer())
		}
	}
}
