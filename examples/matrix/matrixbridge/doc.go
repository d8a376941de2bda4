// Package matrixbridge is the Matrix reference Connector for the xAgent IM
// Profile v2: one Matrix room per connector_channel_id, built on the
// Connector kit. New hands the Card, the API key, the kit's store
// (boltstore) and the Bridge itself, the kit's Platform, to connector.New;
// the kit serves every endpoint, keeps the channel ↔ room bindings, derives
// inbound message IDs, resolves the files of a final, paces and retries
// homeserver calls in order and streams replies post-then-edit. What the
// Bridge writes by hand is Matrix: the sign-in form, the mautrix client,
// the /sync loop, media, m.replace edits and typing. The command in the
// parent folder is a thin main around New.
//
// # Sign-in
//
// The Card (card.json) has one auth flow, FlowID, of type form: homeserver
// URL, user ID, access token or password, and room. Start (connector.SignIn)
// checks the account (/whoami, or one password login that creates a device
// of the Connector's own), joins the room, takes the /sync position and
// binds the channel to the room ID, its conversation key; the kit answers
// authenticated with a Descriptor in status connected. The access token
// stays in the Bridge's Store (bindings.json, mode 0600) and memory: it
// never goes into a Descriptor, an ack, a message or a log line. When the
// kit drops a binding (auth.logout, the end of the offline grace) Unbound
// (connector.Unbinder) stops the room and logs out the device the
// Connector created (a pasted token is left valid).
//
// # Inbound
//
// Each new m.room.message from another user is handed to the kit's
// Connector.Receive with the room as conversation and the Matrix event ID,
// so its message_id is connector.EventMessageID (MessageID) and a /sync
// replayed after a restart is a duplicate, never a second message.
// m.image, m.video, m.audio and m.file are downloaded from the media
// repository and attached; the kit stores them and offers a signed
// download_url (M6). The /sync position is stored after each batch.
//
// # Outbound
//
// A final is posted as one m.text event and one media event per file (the
// kit opened them; uploaded to the media repository first) and acked
// accepted only after every event was sent (M12). Every event is sent with a
// transaction ID made from Message.IdempotencyKey, the final's text with
// the same ID whether it edits the draft or is posted new, so the
// homeserver deduplicates a resend for the same access token within its
// transaction cache window; the Bridge is a connector.IdempotentPlatform.
// Homeserver errors map to the ack's retryable flag (A8): 429 (with its
// retry_after_ms as connector.RetryAfter), 5xx and network failures
// retryable — the kit retries them in order first; 400, 401, 403, 404, 413
// permanent.
//
// Deltas are shown post-then-edit (display.Edit, an Editor and Finisher):
// the first delta posts a message, later ones edit it with m.replace at most
// once per display.Options.Interval (500 ms), and Finish edits it to exactly
// the final text (M11). Draft handles are stored, so a final arriving after
// a restart still edits its draft. Activity thinking and tool show the bot
// typing with DefaultTypingTimeout, refreshed by the kit, and cleared with
// typing=false (C5–C7); Dendrite does not report the expiry in /sync.
//
// # Bounds and defaults
//
//   - sign-ins: DefaultMaxBindings (1,000) channels in the Store; no TTL
//     (the users' sign-ins, removed with their kit binding).
//   - draft handles: MaxDraftsPerBinding (64) per channel, oldest first out.
//   - uploads remembered for retries: DefaultUploadCache (1,024), LRU.
//   - /sync: TimelineLimit (50) events per batch; a gap is filled from
//     /messages up to MaxGapEvents (500); failures back off from
//     SyncBackoffMin (1 s) to SyncBackoffMax (30 s).
//   - homeserver requests: DefaultHTTPTimeout (90 s) each; mautrix's own
//     retries and rate-limit sleeps are off, the kit's pacing retries.
//   - files: the kit's limits (32 MiB per file, 1 h TTL).
//
// End-to-end encryption is not supported: use an unencrypted room.
package matrixbridge
