package dataplane

import (
	"context"
	"encoding/json"

	"github.com/xagentkit/imv2/protocol"
)

// AuthHandler serves the auth packets of a channel (W12): auth.start,
// auth.status, auth.cancel and auth.logout. The Server calls it only for a
// channel open on the calling connection, each call in its own goroutine
// with a context that ends with the connection.
//
// A returned ack is sent as the matching *.ack; the Server fills in
// connector_channel_id (and flow_id, auth_session_id) when left empty, and
// the channel's Descriptor when the ack reports authenticated (and always
// on auth.logout). A returned error is sent in that ack's envelope error:
// an *imv2.Error keeps its code and message (auth_session_not_found for an
// unknown session, say); any other error becomes
// connector_channel_unavailable with a generic message and is logged,
// since platform errors may carry tokens. The Server does not keep auth
// state: the Connector author owns it, and it survives channel.close (W6).
type AuthHandler interface {
	Start(ctx context.Context, channelID string, req protocol.AuthStart) (*protocol.AuthAck, error)
	Status(ctx context.Context, channelID string, req protocol.AuthStatusRequest) (*protocol.AuthAck, error)
	Cancel(ctx context.Context, channelID string, req protocol.AuthCancel) (*protocol.AuthCancelAck, error)
	Logout(ctx context.Context, channelID string) (*protocol.StatusOK, error)
}

// ToolHandler runs the Card's tools (W12). The Server calls Invoke only for
// a channel open on the calling connection and a tool_id the Card declares;
// channelID is the envelope's connector_channel_id, the only route (the
// copy inside the arguments is not consulted). result becomes
// tool.invoke.ack's payload.result. An error becomes the ack's envelope
// error: an *imv2.Error keeps its code and message, any other error is
// sent as tool_invoke_failed with a generic message and logged. A replay
// of a call (same request_id, channel, tool_id and arguments) within 10
// minutes is answered from the first call without calling Invoke again
// (W13); the bounds are in the package doc.
type ToolHandler interface {
	Invoke(ctx context.Context, channelID string, req protocol.ToolInvoke) (result json.RawMessage, err error)
}

// ToolFunc adapts a function to ToolHandler.
type ToolFunc func(ctx context.Context, channelID string, req protocol.ToolInvoke) (json.RawMessage, error)

// Invoke calls f.
func (f ToolFunc) Invoke(ctx context.Context, channelID string, req protocol.ToolInvoke) (json.RawMessage, error) {
	return f(ctx, channelID, req)
}

// ChannelInfo is the author-owned, per-channel part of a Connection
// Descriptor, reported by ServerConfig.Describe.
type ChannelInfo struct {
	// Status is connection.status; "" means created (Common Protocol §9).
	Status string
	// DisplayName and AccountHint override the config's, redacted only.
	DisplayName string
	AccountHint string
	// Tools lists the state of Card tools on this channel; entries naming
	// a tool the Card does not declare are dropped.
	Tools []protocol.ToolState
}
