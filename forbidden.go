package imv2

import (
	"errors"

	jsonv2 "github.com/go-json-experiment/json"
)

// The four IM v2 payloads are closed: the profile says extension profiles
// may not change their fields (section 4), so an unknown member is an
// invalid packet. Members that I2, M8 or C4 name get the more specific code
// forbidden_field, so a peer learns which rule it broke.

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

// strictPayload is the codec option set of the IM v2 payload decoders.
var strictPayload = jsonv2.RejectUnknownMembers(true)

// decodeIMPayload decodes p's payload into v, closed to unknown members.
func decodeIMPayload(p *Packet, v any) error {
	payload := p.Payload
	if len(payload) == 0 {
		return Errorf(CodeInvalidPacket, "%s: payload is missing", p.Type)
	}
	err := jsonv2.Unmarshal(payload, v, strictPayload)
	if err == nil {
		return nil
	}
	var se *jsonv2.SemanticError
	if errors.As(err, &se) && errors.Is(se.Err, jsonv2.ErrUnknownName) {
		name := se.JSONPointer.LastToken()
		switch {
		case contains(identityFields, name):
			return Errorf(CodeForbiddenField, "%s: member %q is an identity field the profile forbids (I2)", p.Type, name)
		case contains(transferFields, name):
			return Errorf(CodeForbiddenField, "%s: member %q is not allowed in an IM v2 payload (M8, C4)", p.Type, name)
		}
		return Errorf(CodeInvalidPacket, "%s: unknown member %q", p.Type, string(se.JSONPointer))
	}
	return Errorf(CodeInvalidPacket, "%s payload: %s", p.Type, jsonErrText(err))
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
