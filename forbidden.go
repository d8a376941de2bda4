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
// receiver). Members a rule names are refused with the specific code
// forbidden_field, so a peer learns which rule it broke, each rule where
// the profile puts it: I2's identity names in every IM v2 payload at any
// depth (profile §3: the payload carries no identity); M8's file-content
// names (profile §5) at a chat.message's top level and in its files[]
// items, and at a delta's top level (D7), but not inside a member the SDK
// does not know (a quote's content, a reply's body, a file's
// metadata.data), which is a newer peer's and not file material; C4's
// names (with M8's) at chat.activity's top level, and inside a member the
// SDK does not know only the names that say what they hold whatever their
// place (reasoning, arguments, url, path, token …): generic words such as
// input, output, result, error or data are the forbidden content only as
// an activity's own member, while {"usage": {"input": 812, "output": 64}}
// is a newer peer's token counts, ignored as unknown members are (E5).
// A newer peer's ack with a "result"
// member is an ack. Builders never write an unknown member: the payload
// structs have no place for one.

// nameRules is a set of the rules that forbid member names.
type nameRules uint8

const (
	ruleI2     nameRules = 1 << iota // identity: every IM v2 payload
	ruleM8                           // transfer material: chat.message and its deltas
	ruleC4                           // reasoning and tool detail: chat.activity
	ruleC4Deep                       // C4's and M8's names that mean the same at any depth
)

// identityFields are the payload members I2 forbids on every IM v2 packet:
// identity is carried by the route and the direction, never by the payload.
var identityFields = []string{"session_id", "user_connector_id", "user_id", "connector_id", "role"}

// m8Fields are member names that carry what M8 keeps out of a chat.message:
// file bytes, base64, local paths, target tokens, CDN auth.
var m8Fields = []string{
	"data", "bytes", "base64", "content", "content_base64", "body",
	"path", "local_path", "file_path",
	"token", "access_token", "auth", "authorization", "cookie", "headers", "credentials", "secret",
}

// c4Fields are the names C4 adds for chat.activity: reasoning, tool
// arguments and results, error details, URLs (its paths, keys and
// identities are M8's and I2's names, which activity refuses too).
var c4Fields = []string{"reasoning", "arguments", "args", "input", "result", "output", "error", "url"}

// c4DeepFields are the C4 and M8 names refused inside a member of an
// activity the SDK does not know: names that say they hold reasoning, tool
// arguments, a URL, a path or a key wherever they stand. The generic words
// of the other lists (input, output, result, error, data, bytes, content,
// body) are refused only as the activity's own members.
var c4DeepFields = []string{
	"reasoning", "arguments", "args", "url",
	"base64", "content_base64", "path", "local_path", "file_path",
	"token", "access_token", "auth", "authorization", "cookie", "headers", "credentials", "secret",
}

// forbiddenRules maps a member name to the rules that name it. It is a
// constant table built from the lists.
var forbiddenRules = func() map[string]nameRules {
	m := make(map[string]nameRules, len(identityFields)+len(m8Fields)+len(c4Fields))
	for rule, names := range map[nameRules][]string{ruleI2: identityFields, ruleM8: m8Fields, ruleC4: c4Fields, ruleC4Deep: c4DeepFields} {
		for _, n := range names {
			m[n] |= rule
		}
	}
	return m
}()

// rulesOf returns the rules whose names a payload of IM v2 type typ may
// not carry at its top level or in a chat.message's files[] item.
func rulesOf(typ string) nameRules {
	switch typ {
	case TypeChatMessage, TypeChatMessageDelta:
		return ruleI2 | ruleM8
	case TypeChatActivity:
		return ruleI2 | ruleM8 | ruleC4
	}
	return ruleI2 // chat.message.ack
}

// deepRulesOf returns the rules whose names a payload of IM v2 type typ
// may not carry anywhere else: inside a member the SDK does not know.
func deepRulesOf(typ string) nameRules {
	if typ == TypeChatActivity {
		return ruleI2 | ruleC4Deep
	}
	return ruleI2
}

// forbiddenName reports whether one of rules refuses a member of that
// name. The lookup does not allocate.
func forbiddenName(name []byte, rules nameRules) bool {
	return rules != 0 && forbiddenRules[string(name)]&rules != 0
}

// Has reports whether rules forbid name: the set the fast decoders
// refuse (fastjson.Names).
func (rules nameRules) Has(name []byte) bool { return forbiddenName(name, rules) }

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
// every token refuses a forbidden name where its rule applies (and a
// delta's files, D7) and checks the syntax, UTF-8 and duplicate names; then the codec
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
	rules, deep := rulesOf(typ), deepRulesOf(typ)
	dec := jsontext.NewDecoder(bytes.NewReader(payload))
	var top string // the payload member being read
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
		at := deep
		switch {
		case depth == 1:
			top, at = name, rules
		case depth == 3 && typ == TypeChatMessage && top == "files":
			if k, _ := dec.StackIndex(2); k == '[' { // a files[] item
				at = rules
			}
		}
		switch r := forbiddenRules[name] & at; {
		case r&ruleI2 != 0:
			return Errorf(CodeForbiddenField, "%s: member %q at %s is an identity field the profile forbids (I2)", typ, name, dec.StackPointer())
		case r != 0 && typ == TypeChatActivity: // its paths and keys are C4's too
			return Errorf(CodeForbiddenField, "%s: member %q at %s is not allowed in an activity (C4)", typ, name, dec.StackPointer())
		case r != 0:
			return Errorf(CodeForbiddenField, "%s: member %q at %s is not allowed in a message (M8)", typ, name, dec.StackPointer())
		}
	}
}
