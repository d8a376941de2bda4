// Package imv2 implements the xAgent IM Profile v2 (xagent.im.v2) for both
// sides of the Connector data plane: an IM Connector bridging a chat
// platform into xAgent, and xAgent's virtual Connector channel.
//
// # Packets
//
// The profile moves four packets inside the Common Protocol 3.0 envelope
// (Packet): complete messages both ways (ChatMessage), assistant text
// deltas (ChatMessageDelta), receipts (ChatMessageAck) and redacted
// activity snapshots (ChatActivity). DecodePacket checks the envelope
// once; DecodeChatMessage and friends decode and validate a payload for
// its direction (on a packet from DecodePacket they take the payload
// DecodePacket already read in its pass, so a frame's bytes are walked
// once). Reading is tolerant (E5): a member this version does not
// define — in the envelope, in any payload, in a files[] item, at any
// depth — is ignored, as Common Protocol §12 lets a peer add optional
// members; ChatMessage.Raw keeps the payload as received for a Connector
// that needs one. The names a rule forbids stay forbidden_field, each
// where its rule applies: identity fields (session_id, user_id …, I2) in
// every payload at any depth, transfer material (base64, token …, M8) at
// a chat.message's or a delta's top level and in a files[] item, tool
// detail (result, url …, C4) anywhere in chat.activity; duplicate names and invalid UTF-8 stay invalid_packet. Writing is
// strict: builders (NewChatMessage, NewAck, NewChatMessageDelta, and
// Channel.SendActivity for activity) write only the members the profile
// defines and cannot produce an invalid packet.
//
// # Channels
//
// A Channel serves one connector_channel_id in one Role and makes the
// delivery contract the default: a sent message stays pending until a
// terminal ack and is resent with the same message_id; a received message
// reaches the Target at most once per message_id and is acked accepted
// only after the Target returned; deltas are sequenced, idempotent,
// bounded and cleared by the final; activity has a local timeout. Packets
// travel only as the Negotiated set from the profile catalog allows.
//
// # Order
//
// One rule, for both directions and every display mode. On one channel:
//
//   - Sending: messages handed to Channel.Send (user messages on a
//     Connector, finals on xAgent) go on the wire in the order Send took
//     them — past the send window (Options.MaxUnacked), across resends
//     and reconnects, where every unacknowledged message is sent again
//     in that order.
//   - Receiving: messages reach the Target in the order they started: a
//     message's first delta, or its final when it streamed none. A
//     message's first draft (the kit's Drafter or Editor) is its place in the chat:
//     it is shown only after every message that started before it is
//     shown or ended, and a final goes to the Target only after those
//     (each wait at most Options.TargetTimeout; a first draft that could
//     not wait is skipped, the message then shown by its final alone in
//     its place). So two replies that overlap (B's first delta before
//     A's final) show A then B in every mode, whatever order their
//     finals come in; in a mode that shows no drafts (the kit's buffer
//     mode, or a plain Target) the finals are held in that order.
//   - A message rejected retryable (A8) holds the channel's later ones:
//     they are rejected channel_busy, retryable, in the order they came,
//     and shown after it once the sender resent it — until it is
//     delivered, rejected for good, or not sent again for
//     Options.OrderTTL. At most Options.MaxInflight are promised their
//     order behind it.
//
// Messages of different channels are not ordered with each other.
//
// # Bounds
//
// Every map keyed by remote input has a cap and a TTL:
//
//	pending messages per channel   DefaultPendingCap, Options.PendingTTL
//	messages awaiting an ack       Options.MaxUnacked per channel; later ones wait, pending
//	completed records              DefaultCompletedCap, DefaultCompletedTTL
//	messages queued for the Target Options.MaxInflight per channel
//	resends waiting on one message Options.MaxWaiters
//	open delta streams             Options.MaxOpenDeltas per channel, Options.DeltaIdleTTL
//	assembled delta text           Options.MaxDeltaBytes
//
// Each Options field states its default and what happens when it is hit;
// the README's "Default limits" table lists them all, checked against
// these constants by a test.
//
// Time is read from a clock.Clock (package clock); tests inject package
// fakeclock and never sleep.
//
// # What is here and what is not
//
// This package is the profile and the part of the Common Protocol a
// Channel cannot do without: the envelope (Packet, DecodePacket), the
// error packet (TypeError) and the codes the Channel answers with
// (invalid_packet, unsupported_packet, channel_not_open,
// connector_channel_id_required, connector_channel_unavailable). Of the
// SDK it imports only package clock and an internal text helper. The
// rest of the Common Protocol 3.0 control plane is package protocol: the
// Connector Card and Connection Descriptor with their validation
// (including the profile's own Card rules P1, P2, P8, which call this
// package's catalog), the hello, channel, Descriptor, auth and tool
// payloads, the tool input schema helpers, Subprotocol, ProtocolVersion,
// Version and ParseVersion, the control-plane packet types
// (connector.hello … auth.logout.ack, ping, pong) and the error codes
// only the control and data planes use (hello_required,
// connector_id_mismatch, connection_*, …). An in-memory transport for
// tests is in package imv2test.
//
// # Common Protocol versions
//
// The profile core — Channel, the four payloads, their codecs — does not
// depend on the Common Protocol version around it. Its one seam is
// Transport (outbound) and Channel.Receive (inbound): package dataplane
// is the Common Protocol 3.0 binding behind that seam (WebSocket, hello,
// channel.open, the 3.0 envelope), with package protocol for its
// control-plane payloads; it admits xAgents announcing 3.0 or newer while
// itself speaking 3.0 (W4, protocol.Version). When a 4.x text is
// published, its data plane is a sibling package beside dataplane that
// also hands each channel a Transport and feeds Channel.Receive; nothing
// in this package changes for it.
package imv2
