package imv2test

import (
	"slices"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/xagentkit/imv2"
)

// A peer reads tolerantly and writes strictly (E5): the suite accepts
// every member it does not know when it drives an implementation, and
// refuses one in what the implementation writes ("valid" in expect).

// definedMembers are the members the profile defines per IM v2 payload.
var definedMembers = map[string][]string{
	imv2.TypeChatMessage:      {"message_id", "text", "files", "created_at"},
	imv2.TypeChatMessageDelta: {"message_id", "sequence", "text"},
	imv2.TypeChatMessageAck:   {"message_id", "status", "code", "message", "retryable"},
	imv2.TypeChatActivity:     {"status", "tool_name"},
}

// definedFileMembers are the members of a files[] item (M4–M7).
var definedFileMembers = []string{"type", "file_ref", "filename", "mime_type", "byte_size", "expires_at", "download_url"}

// undefinedMember returns the first payload member of p, or of one of its
// files[] items, that the profile does not define; "" when there is none
// or p is not an IM v2 packet.
func undefinedMember(p *imv2.Packet) string {
	defined, ok := definedMembers[p.Type]
	if !ok || len(p.Payload) == 0 {
		return ""
	}
	var top map[string]jsontext.Value
	if jsonv2.Unmarshal(p.Payload, &top) != nil {
		return ""
	}
	for _, name := range sortedKeys(top) {
		if !slices.Contains(defined, name) {
			return name
		}
	}
	var files []map[string]jsontext.Value
	if raw, ok := top["files"]; ok && jsonv2.Unmarshal(raw, &files) == nil {
		for _, f := range files {
			for _, name := range sortedKeys(f) {
				if !slices.Contains(definedFileMembers, name) {
					return "files[]." + name
				}
			}
		}
	}
	return ""
}

func sortedKeys(m map[string]jsontext.Value) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
