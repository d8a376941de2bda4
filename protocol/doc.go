// Package protocol is the Common Protocol 3.0 control plane of an xAgent
// Connector, as the IM Profile v2 SDK uses it. The profile itself (the
// envelope Packet, the four IM payloads, errors, the catalog and the
// Channel) is the root package imv2; this package imports it, never the
// other way round.
//
// # What a Connector publishes
//
// A Connector describes itself with a Card (Common Protocol §4.1), served
// at GET /connector-card.json: who it is (CardInfo, Build), what it
// supports (Supports: target types and profiles, SupportedTarget), how a
// user signs in (AuthFlow, LoginFlow, LoginStep, AuthField), its tools
// (Tool, with ToolInputSchema adding the connector_channel_id every tool
// needs, H2) and its Security. Card.Validate and DecodeCard check the
// Common Protocol's rules and the profile's own rules on a Card (P1, P2,
// P8, through imv2.DefaultCatalog); Card.CheckSkill checks the skill's
// header (SkillName, SkillHeaderName, Common Protocol §4.2). Per channel, a Connection
// Descriptor (Common Protocol §9) says what one channel enabled: Descriptor,
// DescriptorTarget and its Connection with a Status (StatusCreated …
// StatusRevoked); DecodeDescriptor checks it against its Card.
//
// # What travels on the WebSocket
//
// The data plane (package dataplane) carries, besides the profile's four
// packet types, the control packets named by the Type constants here:
// connector.hello and its ack (ConnectorHello, ConnectorHelloAck: the
// peers' versions, W4, and the offered profiles, P3), channel.open and
// channel.close (ChannelOpen, ChannelOpenAck), Descriptor get and push
// (DescriptorPayload), sign-in (AuthStart, AuthStatusRequest, AuthCancel,
// AuthAck with an AuthState), tools (ToolInvoke, ToolInvokeAck with a
// ToolState) and keepalives (TypePing, TypePong). Their error codes
// (CodeHelloRequired, CodeConnectorIDMismatch, CodeConnectionNotFound …)
// are imv2.Code values, so an *imv2.Error carries them like the profile's.
//
// # Versions
//
// ProtocolVersion is the Common Protocol version this SDK speaks and
// writes; Version and ParseVersion compare the versions peers announce
// (W4: a peer is admitted when its version lies in the range this side
// is compatible with).
//
// # Where a 4.x control plane goes
//
// The public xAgent has moved its Common Protocol to 4.x while the IM
// Profile v2 stayed the same. A 4.x binding is a sibling of this package
// (its own Card, hello and tool payloads) beside a sibling of dataplane;
// both keep handing the root's imv2.Channel a Transport and feeding
// Channel.Receive, which is the profile's whole seam. Nothing in the
// root package changes for it.
package protocol
