package protocol

import "encoding/json"

// Payloads of the Common Protocol 3.0 packets around the profile. They are
// open structs (unknown members ignored), as the Common Protocol evolves by
// adding members; decode them with Packet.DecodePayload.

// ConnectorHello is the payload of connector.hello, the first packet of a
// data-plane connection, xAgent → Connector (W3, W4).
type ConnectorHello struct {
	ConnectorCardID string `json:"connector_card_id"`
	// ConnectorID is empty on a first connection; later the one the
	// Connector issued, so it can restore state within the offline grace.
	ConnectorID     string `json:"connector_id,omitempty"`
	ProtocolVersion string `json:"protocol_version"`
	// SupportedProfiles must be present: profiles are never enabled
	// implicitly (P3).
	SupportedProfiles []string `json:"supported_profiles"`
}

// ConnectorHelloAck is the payload of connector.hello.ack (W4).
type ConnectorHelloAck struct {
	ConnectorCardID string `json:"connector_card_id"`
	ConnectorID     string `json:"connector_id"`
	ProtocolVersion string `json:"protocol_version"`
}

// ChannelOpen is the payload of channel.open; empty in 3.0. The channel to
// reuse travels in the envelope's connector_channel_id (W5).
type ChannelOpen struct{}

// ChannelOpenAck is the payload of channel.open.ack: the channel ID (also in
// the envelope) and the channel's Connection Descriptor (W5).
type ChannelOpenAck struct {
	ConnectorChannelID   string      `json:"connector_channel_id"`
	ConnectionDescriptor *Descriptor `json:"connection_descriptor"`
}

// StatusOK is the payload of channel.close.ack and auth.logout.ack (W6).
type StatusOK struct {
	Status string `json:"status"`
	// ConnectionDescriptor is set on auth.logout.ack: the state after logout.
	ConnectionDescriptor *Descriptor `json:"connection_descriptor,omitempty"`
}

// DescriptorPayload is the payload of connection.descriptor.get.ack and
// connection.descriptor.push (W7).
type DescriptorPayload struct {
	ConnectionDescriptor *Descriptor `json:"connection_descriptor"`
}

// ToolInvoke is the payload of tool.invoke (W12). Route by the envelope's
// connector_channel_id only; Arguments' copy of it must not be consumed.
type ToolInvoke struct {
	ToolID    string          `json:"tool_id"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Context carries correlation only (session_id, tool_call_id), never
	// authorization.
	Context json.RawMessage `json:"context,omitempty"`
}

// ToolInvokeAck is the payload of a successful tool.invoke.ack; a failure
// sets the envelope's error (code tool_invoke_failed) instead (W12).
type ToolInvokeAck struct {
	ToolID string          `json:"tool_id"`
	Result json.RawMessage `json:"result,omitempty"`
}

// AuthStart is the payload of auth.start: the Card's auth flow and, for a
// form flow, its field values (W12).
type AuthStart struct {
	FlowID string            `json:"flow_id"`
	Input  map[string]string `json:"input,omitempty"`
}

// AuthStatusRequest is the payload of auth.status.
type AuthStatusRequest struct {
	FlowID        string `json:"flow_id,omitempty"`
	AuthSessionID string `json:"auth_session_id"`
	Refresh       bool   `json:"refresh,omitempty"`
}

// AuthCancel is the payload of auth.cancel.
type AuthCancel struct {
	AuthSessionID string `json:"auth_session_id"`
}

// AuthState is the status of an auth session in auth.start.ack and
// auth.status.ack.
type AuthState string

// Auth session states of the Common Protocol 3.0.
const (
	AuthPending           AuthState = "pending"
	AuthScanned           AuthState = "scanned"
	AuthAuthenticated     AuthState = "authenticated"
	AuthUnauthenticated   AuthState = "unauthenticated"
	AuthExpired           AuthState = "expired"
	AuthQRRefreshRequired AuthState = "qr_refresh_required"
	AuthFailed            AuthState = "failed"
)

// AuthAck is the payload of auth.start.ack and auth.status.ack.
type AuthAck struct {
	ConnectorChannelID string    `json:"connector_channel_id,omitempty"`
	FlowID             string    `json:"flow_id,omitempty"`
	AuthSessionID      string    `json:"auth_session_id,omitempty"`
	Status             AuthState `json:"status"`
	QRCodeText         string    `json:"qr_code_text,omitempty"`
	QRCodeImage        string    `json:"qr_code_image,omitempty"`
	ExpiresAt          int64     `json:"expires_at,omitzero"`
	PollIntervalMillis int64     `json:"poll_interval_millis,omitzero"`
	Message            string    `json:"message,omitempty"`
	// ConnectionDescriptor is set once authenticated.
	ConnectionDescriptor *Descriptor `json:"connection_descriptor,omitempty"`
}

// AuthCancelAck is the payload of auth.cancel.ack; Status is "canceled",
// "ignored" or "not_found".
type AuthCancelAck struct {
	ConnectorChannelID   string      `json:"connector_channel_id,omitempty"`
	AuthSessionID        string      `json:"auth_session_id,omitempty"`
	Status               string      `json:"status"`
	AuthStatus           AuthState   `json:"auth_status,omitempty"`
	Message              string      `json:"message,omitempty"`
	ConnectionDescriptor *Descriptor `json:"connection_descriptor,omitempty"`
}
