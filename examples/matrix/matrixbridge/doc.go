// Package matrixbridge is the Matrix reference Connector for the xAgent IM
// Profile v2: one Matrix room per connector_channel_id, built on the SDK
// kit — connector (Card, /health, /skill.md, uploads, signed downloads),
// dataplane (the /ws data plane), display (post-then-edit streaming and
// typing) and boltstore (pending and completed state across restarts).
// The command in the parent folder is a thin main around New.
//
// # Sign-in
//
// The Card has one auth flow, FlowID, of type form: homeserver URL, user
// ID, access token or password, and room. auth.start checks the account
// (/whoami, or one password login that creates a device of the
// Connector's own), joins the room, takes the /sync position and answers
// authenticated with a Descriptor in status connected. The access token
// stays in the Bridge's state file (mode 0600) and memory: it never goes
// into a Descriptor, an ack, a message or a log line. auth.logout stops
// the room and logs out the device the Connector created (a pasted token
// is left valid).
//
// # Inbound
//
// Each new m.room.message from another user becomes a chat.message whose
// message_id is MessageID(room, event): a /sync replayed after a restart
// yields the same IDs, so no second business message is created. m.image,
// m.video, m.audio and m.file are downloaded from the media repository,
// stored in the connector kit's file store and offered by a signed
// download_url (M6). The /sync position is stored after each batch.
//
// # Outbound
//
// A final is posted as one m.text event and one media event per file
// (uploaded to the media repository first), and acked accepted only after
// every event was sent (M12). Every event of a message is sent with a
// transaction ID derived from the channel and message_id, the final's text
// with the same ID whether it edits the draft or is posted new, so a
// resend — by the SDK's retry or by xAgent after a Connector restart — is
// deduplicated by the homeserver as well as by the completed store.
// Homeserver errors map to the ack's retryable flag (A8): 429, 5xx and
// network failures retryable; 400, 401, 403, 404, 413 permanent.
//
// Deltas are shown post-then-edit (display.Edit): the first delta posts a
// message, later ones edit it with m.replace at most once per
// display.Options.Interval (default 500 ms), and the final edits it to
// exactly the final text (M11). Draft handles are stored, so a final
// arriving after a restart still edits its draft.
//
// Activity thinking and tool show the bot as typing, refreshed every
// display.Options.TypingRefresh (4 s) with a DefaultTypingTimeout (10 s)
// timeout, and cleared with typing=false on idle, the final or the first
// shown delta (C5–C7); Dendrite does not report the expiry in /sync.
//
// # Bounds and defaults
//
//   - bindings: DefaultMaxBindings (1,000) channels in the Store; no TTL
//     (they are the user's sign-ins, removed by auth.logout).
//   - draft handles: MaxDraftsPerBinding (64) per channel, oldest first out.
//   - uploads remembered for retries: DefaultUploadCache (1,024), LRU.
//   - /sync: TimelineLimit (50) events per batch; a gap is filled from
//     /messages up to MaxGapEvents (500); failures back off from
//     SyncBackoffMin (1 s) to SyncBackoffMax (30 s).
//   - homeserver requests: DefaultHTTPTimeout (90 s) each; mautrix's own
//     retries and rate-limit sleeps are off, the Channel retries instead.
//   - files: the connector kit's limits (32 MiB per file, 1 h TTL).
//
// End-to-end encryption is not supported: use an unencrypted room.
package matrixbridge
