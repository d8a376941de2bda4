package imv2

// ActivityStatus is chat.activity status (C2).
type ActivityStatus string

// The three activity statuses of C2.
const (
	ActivityThinking ActivityStatus = "thinking"
	ActivityTool     ActivityStatus = "tool"
	ActivityIdle     ActivityStatus = "idle"
)

// ChatActivity is the payload of a chat.activity: a full, redacted snapshot
// of what the agent is doing, xAgent → Connector only (C1). Each snapshot
// replaces the last; it has no ack and no idempotency. Reasoning,
// arguments, results, paths, URLs and keys have no field and are rejected
// on receive at any depth (C4); other unknown members are ignored (E5).
type ChatActivity struct {
	Status ActivityStatus `json:"status"`
	// ToolName is required for ActivityTool and forbidden otherwise (C3).
	ToolName string `json:"tool_name,omitempty"`
}

// Validate checks C1–C4.
func (a *ChatActivity) Validate(dir Direction) error {
	if dir != ToConnector {
		return Errorf(CodeInvalidPacket, "chat.activity travels xAgent → Connector only (C1)")
	}
	switch a.Status {
	case ActivityTool:
		if a.ToolName == "" {
			return Errorf(CodeInvalidPacket, "chat.activity: status tool needs tool_name (C3)")
		}
		if len(a.ToolName) > maxToolNameBytes {
			return Errorf(CodeInvalidPacket, "chat.activity: tool_name is %d bytes, over %d (C3)", len(a.ToolName), maxToolNameBytes)
		}
	case ActivityThinking, ActivityIdle:
		if a.ToolName != "" {
			return Errorf(CodeInvalidPacket, "chat.activity: tool_name is forbidden for status %s (C3)", a.Status)
		}
	default:
		return Errorf(CodeInvalidPacket, "chat.activity: status %q is not thinking, tool or idle (C2)", a.Status)
	}
	return nil
}

// DecodeChatActivity decodes and validates a chat.activity.
func DecodeChatActivity(p *Packet) (*ChatActivity, error) {
	if p.Type != TypeChatActivity {
		return nil, Errorf(CodeInvalidPacket, "packet type is %q, not %s", p.Type, TypeChatActivity)
	}
	if err := checkRoute(p); err != nil {
		return nil, err
	}
	a := takeDecoded[ChatActivity](p)
	if a == nil {
		var ok bool
		if a, ok = decodeActivityFast(p.Payload); !ok {
			a = new(ChatActivity)
			if err := decodeIMPayload(p, a); err != nil {
				return nil, err
			}
		}
	}
	if err := a.Validate(ToConnector); err != nil {
		return nil, err
	}
	return a, nil
}

// newChatActivity validates a and returns a chat.activity packet for channel.
func newChatActivity(channel string, a ChatActivity) (*Packet, error) {
	if err := a.Validate(ToConnector); err != nil {
		return nil, err
	}
	if channel == "" {
		return nil, Errorf(CodeChannelIDRequired, "chat.activity: connector_channel_id is required (I1)")
	}
	raw, err := marshalActivity(&a)
	if err != nil {
		return nil, Errorf(CodeInvalidPacket, "chat.activity: %s", jsonErrText(err))
	}
	return NewPacket(TypeChatActivity, channel, jsonRaw(raw))
}
