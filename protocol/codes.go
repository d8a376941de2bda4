package protocol

import "github.com/xagentkit/imv2"

// Common Protocol 3.0 error codes (W10) of the control plane. They travel in
// packets of type "error". The codes the Channel itself uses
// (invalid_packet, unsupported_packet, channel_not_open,
// connector_channel_id_required, connector_channel_unavailable) are in the
// root package.
const (
	// CodeHelloRequired: a user-level packet arrived before connector.hello.ack (W3).
	CodeHelloRequired imv2.Code = "hello_required"
	// CodeConnectorCardIDMismatch: the hello names another Card (W4).
	CodeConnectorCardIDMismatch imv2.Code = "connector_card_id_mismatch"
	// CodeConnectorIDMismatch: the hello names a connector_id this Connector
	// did not issue or no longer honours.
	CodeConnectorIDMismatch imv2.Code = "connector_id_mismatch"
	// CodeChannelNotOwned: the channel belongs to another connection.
	CodeChannelNotOwned imv2.Code = "connector_channel_not_owned"
	// CodeChannelConnectorMismatch: the channel belongs to another connector_id.
	CodeChannelConnectorMismatch imv2.Code = "connector_channel_connector_mismatch"
	// CodeConnectionNotFound: no connection state for the request.
	CodeConnectionNotFound imv2.Code = "connection_not_found"
	// CodeConnectionNotAuthenticated: the channel has not completed sign-in.
	CodeConnectionNotAuthenticated imv2.Code = "connection_not_authenticated"
	// CodeAuthSessionNotFound: an auth packet names an unknown auth session.
	CodeAuthSessionNotFound imv2.Code = "auth_session_not_found"
	// CodeToolInvokeFailed: a tool.invoke could not be carried out.
	CodeToolInvokeFailed imv2.Code = "tool_invoke_failed"
)

// ErrHelloRequired matches, with errors.Is, any error of code hello_required.
var ErrHelloRequired = &imv2.Error{Code: CodeHelloRequired}
