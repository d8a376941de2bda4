// Package dataplane is the WebSocket data plane of the xAgent Connector
// Common Protocol 3.0 (rules W1–W12), carrying IM Profile v2 channels.
//
// A Connector mounts a Server as the GET /ws handler: it checks the
// subprotocol xagent.connector.packet.v1 (and, if configured, the bearer
// API key), requires connector.hello first, issues a connector_id, opens
// and closes channels, answers descriptor.get and ping, routes auth.* and
// tool.invoke to the author's handlers and every IM v2 packet to one
// imv2.Channel per connector_channel_id. xAgent (or a simulator) uses Dial
// with the Connector's base URL: it fetches the Card from
// /connector-card.json and dials /ws, and the Client says hello, opens
// channels and reconnects by itself, reopening its stored channels so
// pending finals are redelivered and nothing completed is resent (S10).
// Client.Send and Reply.Final return a Delivery whose Wait reports the
// final's terminal outcome, beside the client-wide OnDelivered and
// OnFailed callbacks of imv2.Options.
//
// # The xAgent side
//
// An agent dials with Dial, opens a channel with OpenChannel (both wait
// and retry a Connector not up yet, a lost connection and a refusal for
// now until their ctx ends) and answers each user message with one Reply:
// Client.NewReply, then Reply.Activity (thinking, tool, idle), Reply.Delta,
// Client.Upload for a file, and Reply.Final, whose Delivery reports the
// outcome. README.md's "The xAgent side" has a compiled sample and
// examples/agent a whole agent.
//
// The ack (A4): ClientConfig.Target's PostMessage returning nil acks the
// user message accepted; the Connector will not resend it. Return once the
// message is safely the agent's (queued, or written down), and run the
// agent's work elsewhere: a call is cut after imv2.Options.TargetTimeout
// (60 s) and unacked, and at most Options.MaxInflight (64) messages per
// channel wait for one. Return imv2.NotPosted(err) when the agent cannot
// take it now (the Connector resends it after a backoff), imv2.Refused(err)
// to refuse it for good; any other error means the agent may have taken
// it (the error contract of package imv2), answered as an unknown outcome. With a durable Options.Completed
// a message the Connector resends after the agent restarted is acked
// duplicate, not answered twice.
//
// # The outcome of a final
//
// A final's outcome reaches the agent twice: as Delivery.Wait's return
// (the Delivery of Client.Send or Reply.Final) and as the client-wide
// imv2.Options.OnDelivered or OnFailed callback. Errors are *imv2.Error:
// match one with errors.Is(err, &imv2.Error{Code: imv2.CodeExpired}) or
// read its Code with errors.As.
//
//	outcome                   Wait returns                    callback     what to do
//	accepted                  imv2.AckAccepted, nil           OnDelivered  nothing: shown
//	duplicate                 imv2.AckDuplicate, nil          OnDelivered  nothing: shown once, before (a resend after a lost ack)
//	rejected, retryable       — not an outcome                —            nothing: resent with backoff (A7)
//	rejected, not retryable   AckRejected, its code           OnFailed     report it: a resend fails alike
//	                          (target_rejected, invalid_packet …)
//	delivery_outcome_unknown  AckRejected, that code          OnFailed     maybe shown, never resent: report it,
//	                                                                       or answer anew under a new message_id
//	expired                   AckRejected, code expired       OnFailed     no terminal ack within Options.PendingTTL (1 h)
//	channel replaced          AckRejected, errors.Is(err,     OnFailed     a handed-over final the new channel refused:
//	                          ErrChannelReplaced)             (old ID)     as not retryable
//	Client closed first       imv2.ErrClosed                  —            still pending in Options.Pending: a Client on
//	                                                                       the same store resends it
//
// An error from Client.Send or Reply.Final itself means nothing new is
// pending, so no outcome will come: pending_full (Options.Pending holds
// its cap for the channel: wait for outcomes, send again),
// ErrChannelReplaced (the channel's successor is gone too), imv2.ErrClosed,
// or channel_not_open (a channel this Client does not hold).
//
// While the connection is down (until the channel is reopened),
// Reply.Delta and Reply.Activity return an *imv2.Error at once
// (connector_channel_unavailable) and send nothing: neither is queued or
// resent when the connection is back (the one snapshot the Client keeps
// per channel goes out again only when a previous answer's final is acked
// after it: C6, see Reply.Activity). The reply goes on: the Connector
// dropped its delta stream with the connection and refuses deltas that do
// not start a stream at 1 (D4), so the draft it shows stays as it was
// until the final, which carries the whole text (D5) and stays pending
// until acked. Log those errors; never hold the answer back for them (C8).
//
// A channel the Connector replaces (it forgot the ID and answered the
// reopen with a new one, W5) is followed: its pending finals, unfinished
// Replies, Send, NewReply, Upload and WaitOpen go to the new ID,
// Resolve maps old to new, and ClientConfig.OnChannelReplaced is told.
//
// Everything this side sends on a channel is checked against the
// channel's negotiated catalog (Client.Negotiated); Request sends only
// Common Protocol requests and negotiated types, so internal xAgent
// signals never reach the wire (profile §1, P7).
//
// Both sides speak to a small Conn (Read, Write, Close): the WebSocket
// one, NewPipe for tests, NewLoggingConn to log envelopes.
//
// This package is the Common Protocol 3.0 binding of the profile: it
// speaks 3.0 and admits newer xAgents (W4). It meets the profile core only
// through imv2.Transport and imv2.Channel.Receive, so a 4.x data plane,
// once its text is published, is a sibling package plugged in at that
// same seam, beside this one; nothing is built for 4.x here.
//
// # Choices where the protocol text is silent or loose
//
//   - Frames: text only (W2). A binary frame is answered like any invalid
//     frame, with an error packet invalid_packet, and the connection stays
//     up (E2). A frame over the read limit closes the connection with
//     close code 1009; this side refuses to write what it would not read.
//   - Versions (W4, Common Protocol §8.1, §12): xAgent's hello carries its
//     own current protocol_version; a missing, unparsable (not
//     major.minor) or older-than-3.0 one, or a hello without
//     supported_profiles, gets an error packet invalid_packet naming both
//     versions (no code is defined for either, P3); the connection
//     stays open for another hello. 3.0 and every newer version (4.3 …)
//     are admitted, and the ack always carries this side's 3.0. The
//     Client admits an ack whose version lies in
//     [ClientAdvanced.MinProtocolVersion, MaxProtocolVersion] (default
//     3.0–3.0) and always says 3.0 itself; Client.ProtocolVersion
//     returns the version admitted. A non-empty connector_id the Server
//     does not know (expired, or lost in a restart) gets a new
//     connector_id in the ack, as Common Protocol §8.1 allows, rather than
//     connector_id_mismatch; xAgent then replaces
//     its ConnectorClient. connector_id_mismatch is used only when every
//     connector_id slot is taken, or for a connector_id online on another
//     connection (below).
//   - One holder per connector_id: a hello naming a connector_id that is
//     online on another connection is refused connector_id_mismatch (the
//     message says to try again once that connection ended); it is not
//     handed the channels, and the first connection is not closed. Taking
//     over would give an online peer's channels and user messages to any
//     key holder that knows its connector_id, and two holders would throw
//     each other out in turn; refusing costs a holder whose connection
//     died unnoticed a wait for its keepalive to cut it (at most
//     PingInterval+PongTimeout, 45 s) before its reconnect is admitted.
//     A hello first waits up to 2 s for the holding connection to end,
//     so a client that closes and dials again at once is admitted.
//   - ping and pong are allowed before the hello; every other packet but
//     connector.hello gets hello_required until hello.ack (W3). Error
//     packets are never answered.
//   - channel.open with no profile in common between the hello and the
//     Card gets an error packet connector_channel_unavailable (P3).
//     Channels live in the namespace of their connector_id: an ID from
//     another connector_id is unknown and gets a new ID (W5).
//   - A hello or channel.open whose store call fails (the Registry, a
//     shared registry's ConnectorSeen; each bounded to 5 s) is refused
//     connector_channel_unavailable, never invalid_packet, and no new
//     connector_id or channel ID replaces one the store could not
//     confirm. The Client reconnects after a refused hello and retries a
//     reopen refused connector_channel_unavailable on the same connection,
//     both with its reconnect backoff, so channels resume by themselves
//     once the store answers.
//   - channel.close of a channel not open on this connection gets
//     channel_not_open; routing stops before the ack, the Channel keeps
//     its pending and completed state for a reopen (W6).
//   - A tool.invoke replayed with the same request_id (a reconnecting
//     xAgent's) is answered with the first call's answer, its own
//     reply_to, and the ToolHandler does not run again (W13;
//     Common Protocol §8.19 asks side-effecting tools for repeated-call
//     detection).
//   - Handler failures go in the envelope error of the matching ack (E3):
//     an *imv2.Error keeps its code; other errors become
//     tool_invoke_failed (tool.invoke) or connector_channel_unavailable
//     (auth.*) with a generic message, since platform errors may carry
//     secrets. auth.start must name a flow of the Card.
//   - request_id is echoed and reply_to set on every answer (W9), also on
//     error packets that answer a request.
//
// # Defaults and bounds
//
// Every map keyed by remote input is bounded:
//
//   - frame size: DefaultReadLimit (1 MiB), per frame, both directions;
//     64 KiB before the hello completed (a hello needs under 5 KiB);
//   - a message being read: one begun before a keepalive ping must be
//     complete at that ping's pong check (DefaultPongTimeout after it),
//     or the connection closes; answering pings does not keep an
//     unfinished message open;
//   - the hello's supported_profiles: MaxHelloProfiles (32) entries of at
//     most MaxProfileIDBytes (128) bytes, or invalid_packet; the session
//     keeps that list and the negotiated set, nothing else of the hello;
//   - connections per connector_id: one (see "One holder" above), so
//     after the hello at most MaxConnectors connections, each reading at
//     most one frame at a time;
//   - write timeout DefaultWriteTimeout (10 s); keepalive ping every
//     DefaultPingInterval (30 s), dropped after DefaultPongTimeout (15 s)
//     without any frame or pong; graceful close waits DefaultCloseTimeout;
//   - hello within DefaultHelloTimeout (30 s) or the connection closes;
//     at most DefaultMaxPreHello (256) connections without a hello per
//     Server, then ServeHTTP answers 503 before the upgrade;
//   - memory a peer makes the Server hold (delta buffers, finals queued
//     for or waiting on a Target call): DefaultMaxConnectorMemory (16 MiB)
//     per connector_id under DefaultMaxMemory (64 MiB) per Server
//     (imv2.Budget); over it a delta that needs room gets
//     delta_limit_exceeded and a final channel_busy, retryable. Each
//     connector_id held is guaranteed MaxMemory/(2·MaxConnectors) (512 KiB)
//     of it that no set of other peers can take (imv2.NewPooledBudget); a
//     connection's end drops its channels' delta streams at once, and a
//     stream lives at most imv2.Options.DeltaMaxAge (30 min) however
//     often it is extended;
//   - connector_id instances: DefaultMaxConnectors (64), each kept for
//     DefaultOfflineGrace (1 h) after its last connection ends (its TTL),
//     then its channels are closed and dropped (OnChannelDrop is called,
//     then the Registry forgets them, outside the Server's lock);
//     at the cap a hello for a new connector_id takes the slot of an
//     offline instance: one without channels, else the one seen least
//     recently whose channels hold no pending message (its channels
//     dropped, their completed records kept); it is refused
//     connector_id_mismatch only while every instance is online or holds
//     a pending message;
//   - channels per connector_id (so per connection): DefaultMaxChannels
//     (1,000), open or closed-but-kept; at the cap the least recently used
//     closed channel is dropped, and if all are open the open is refused;
//     closed channels live as long as their connector_id (same TTL);
//   - concurrent auth/tool handler calls per connection:
//     DefaultMaxHandlerCalls (32), then the read loop waits;
//   - tool.invoke answers kept for replays (W13: the same request_id,
//     channel, tool_id and arguments get the first answer and run
//     nothing): 10 min from the call, at most 256 per connector_id and
//     4,096 or 16 MiB of results per Server, the oldest going first;
//   - client: reconnect backoff DefaultReconnectMin..DefaultReconnectMax
//     (500 ms..30 s, jittered), dial/hello/reopen timeout
//     DefaultRequestTimeout (10 s), stored channel IDs state.DefaultChannelStoreCap
//     (1,000, no TTL: they are the caller's bindings), outstanding
//     requests are bounded by the callers waiting on them; the Card is
//     read up to 1 MiB; an open Delivery lives from its send to the
//     final's outcome (ack, or expiry after the PendingTTL), so they are
//     bounded by the pending store's caps, and all end at Close; the map
//     of replaced channel IDs holds at most MaxChannels entries, the
//     oldest forgotten first; the activity remembered per channel (one
//     snapshot and its message_id) ends with the reply's first delta,
//     final or idle, and at Close; an Upload tries MaxUploadAttempts (6)
//     times.
//
// The Channels' own bounds (pending, completed, deltas) are those of
// imv2.Options.
package dataplane
