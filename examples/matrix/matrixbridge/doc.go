// Package matrixbridge is the Matrix reference Connector for the xAgent IM
// Profile v2: one Matrix room per connector_channel_id, built on the
// Connector kit. New hands the Card, the API key, the kit's store
// (boltstore) and the Bridge itself, the kit's Platform, to connector.New;
// the kit serves every endpoint, keeps the channel ↔ room bindings with
// their private Data, answers auth.status and auth.cancel, runs a reader
// per bound room, derives inbound message IDs, resolves the files of a
// final, paces and retries homeserver calls in order, streams replies
// post-then-edit and keeps the draft handles. What the Bridge writes by
// hand is Matrix: the sign-in form, the mautrix client, the /sync reader,
// media, m.replace edits and typing. The command in the parent folder is a
// thin main around New.
//
// # Sign-in
//
// The Card (card.json) has one auth flow, FlowID, of type form: homeserver
// URL, user ID, access token or password, and room. Start
// (connector.SignIn) checks the account (/whoami, or one password login
// that creates a device of the Connector's own), joins the room, takes the
// /sync position and binds the channel to the room ID, its conversation
// key, with the Account (token, device, /sync position) as the binding's
// Data; the kit answers authenticated with a Descriptor in status
// connected. A refusal is a connector.SignInError: status failed with its
// reason. The kit stores the Data in imv2.db (mode 0600) and never sends
// or logs it; the token goes into no Descriptor, ack, message or log line.
// When a binding goes (auth.logout, a new sign-in of the channel, the end
// of the offline grace) Unbound (connector.Unbinder) logs out the device
// the Connector created (a pasted token is left valid).
//
// # Inbound
//
// The kit runs Listen (connector.Listener) for every bound channel xAgent
// has open, after a restart too: each new m.room.message from another
// user is handed to the kit with the room as conversation and the Matrix
// event ID, so its message_id is connector.EventMessageID (MessageID) and
// a /sync replayed after a restart is a duplicate, never a second message.
// m.image, m.video, m.audio and m.file are downloaded from the media
// repository and attached; the kit stores them and offers a signed
// download_url (M6). The /sync position is saved in the binding after each
// batch. A failed /sync returns and the kit calls Listen again after its
// backoff (connector.ListenBackoffMin 1 s to ListenBackoffMax 30 s). A
// token that stopped working (401) turns the channel expired; the bot
// leaving or being removed from the room turns it revoked.
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
// retry_after_ms as imv2.RetryAfter), 5xx and network failures
// retryable — the kit retries them in order first; 400, 401, 403, 404, 413
// permanent.
//
// Deltas are shown post-then-edit (connector.ModeEdit, an Editor and
// Finisher): the first delta posts a message, later ones edit it with
// m.replace at most once per connector.Display.Interval (500 ms), and Finish edits it to exactly
// the final text (M11). The kit keeps the draft handles in the binding, so
// a final arriving after a restart still edits its draft. Activity thinking
// and tool show the bot typing with DefaultTypingTimeout, refreshed by the
// kit, and cleared with typing=false (C5–C7); Dendrite does not report the
// expiry in /sync.
//
// # Bounds and defaults
//
//   - bindings: the kit's (its store's cap; Data at most 16 KiB, 64 draft
//     handles per channel, oldest first out); no TTL (the users'
//     sign-ins, removed by a sign-out or the channel's drop).
//   - uploads remembered for retries: DefaultUploadCache (1,024), LRU.
//   - /sync: TimelineLimit (50) events per batch; a gap is filled from
//     /messages up to MaxGapEvents (500).
//   - homeserver requests: DefaultHTTPTimeout (90 s) each; mautrix's own
//     retries and rate-limit sleeps are off, the kit's pacing retries.
//   - files: the kit's limits (32 MiB per file, 1 h TTL).
//
// End-to-end encryption is not supported: use an unencrypted room.
package matrixbridge
