package protocol

// Wire constants of the Common Protocol 3.0 transport.
const (
	// Subprotocol is the WebSocket subprotocol of the data plane (W1).
	Subprotocol = "xagent.connector.packet.v1"
	// ProtocolVersion is the Common Protocol version this SDK speaks (W4).
	ProtocolVersion = "3.0"
)

// Packet types of the Common Protocol 3.0 control plane: hello, channel
// lifecycle, Descriptor, keepalive, tools and sign-in. The profile's four
// types and TypeError are in the root package.
const (
	TypeConnectorHello    = "connector.hello"
	TypeConnectorHelloAck = "connector.hello.ack"
	TypeChannelOpen       = "channel.open"
	TypeChannelOpenAck    = "channel.open.ack"
	TypeChannelClose      = "channel.close"
	TypeChannelCloseAck   = "channel.close.ack"
	TypeDescriptorGet     = "connection.descriptor.get"
	TypeDescriptorGetAck  = "connection.descriptor.get.ack"
	TypeDescriptorPush    = "connection.descriptor.push"
	TypePing              = "ping"
	TypePong              = "pong"
	TypeToolInvoke        = "tool.invoke"
	TypeToolInvokeAck     = "tool.invoke.ack"
	TypeAuthStart         = "auth.start"
	TypeAuthStartAck      = "auth.start.ack"
	TypeAuthStatus        = "auth.status"
	TypeAuthStatusAck     = "auth.status.ack"
	TypeAuthCancel        = "auth.cancel"
	TypeAuthCancelAck     = "auth.cancel.ack"
	TypeAuthLogout        = "auth.logout"
	TypeAuthLogoutAck     = "auth.logout.ack"
)
