// Package connector is the Connector kit for the xAgent IM Profile v2:
// New builds a whole Connector around one Platform value — the chat
// service's post, and optionally its drafts, edits, typing and readers —
// with the data plane (dataplane.Server), the display strategies (Mode:
// stream, edit, buffer), conversation bindings, file resolution and
// platform pacing. See New, Platform (with its error table) and Options.
//
// The kit serves it all over HTTP: one http.Handler for the control plane
// (H1, H3, H4), the transfer plane (T1–T3) and, behind the same API key
// check, the /ws data plane (W1). Handler, NewHandler and NewServer are
// that layer on its own, for an author who builds the rest by hand.
//
// To test a Connector built with New: imv2test.RunKit(t, k, nil) runs the
// conformance suite in process (the kit shows it every platform call; the
// platform records nothing), and imv2test.StartSim(t, k, sim.Config{})
// plays xAgent end to end over loopback. Editor's doc sketches a platform
// in edit mode; examples/telegram is the reference for bridging a bot API
// (long polling, rate limits with retry_after, drafts or edits, typing).
//
// # The kit in brief
//
// Each item names the type whose doc holds the details and the bounds.
//
//   - Bindings. A channel is bound to a platform conversation (state.Binding.Key,
//     opaque) by a sign-in flow, by Bind, or, for a Card without auth flows,
//     once at the channel's issue (Options.DefaultConversation). The
//     Descriptor's status follows it: created, connected, expired (Expire),
//     revoked (Revoke). state.Binding.Data keeps the platform's own tokens and
//     cursor (UpdateBinding), never sent to xAgent. Bindings live in the
//     state.Store beside pending and completed state, so they survive restarts;
//     a Releaser hears when a conversation's last binding goes.
//   - Sign-in. A SignIn runs auth.start; the kit binds on success and
//     answers auth.logout, and answers auth.status and auth.cancel from the
//     binding unless the platform is a SignInStatus or SignInCanceler.
//     A SignInError is the user's to fix, sent as status failed.
//   - Inbound. Receive turns a platform event into a user message whose
//     message_id is EventMessageID(conversation, event ID), so a replayed
//     event is a duplicate, across restarts too with a durable Store (M9).
//     While a channel's pending store is full Receive waits for room (on
//     the kit's clock, until ctx ends), so a caller handing events one
//     after another keeps their order with no retry loop. A Listener is a
//     platform that reads each bound conversation itself: the kit runs,
//     restarts and stops its reader per binding.
//   - Files. Every file_ref of a final is resolved against the channel's
//     uploads before the platform is called: unknown, expired or another
//     channel's is rejected invalid_packet, retryable=false (M7, M12); the
//     platform gets the files opened (Message.Attachments). An InboundEvent's files are
//     stored and offered with signed download URLs (M6, T3), once per
//     event: a replay is skipped before they are stored again.
//   - Drafts across restarts. The handle of every draft shown is kept in
//     state.Binding.Drafts until its final is shown, so a final arriving after a
//     restart finishes its draft instead of posting a second message (M11).
//   - Errors. One contract for every platform call (package imv2, the
//     error contract; what the kit does with each outcome is on
//     Platform): imv2.Refused never retried, imv2.NotPosted and
//     imv2.RetryAfter retried within Pace, any other error may have been
//     posted, and the Channel decides a final of unknown outcome once
//     (PostChecker, IdempotentPlatform, else delivery_outcome_unknown).
//   - Pacing. Pace is the one bound on the platform's rate, per
//     conversation and in total, measured from when calls leave (late
//     timers do not bunch them); a method that calls the platform after
//     other work, or several times, calls Turn just before each call.
//   - Order. The Channel's rule (package imv2, "Order"): replies show in
//     the order they started in every mode, overlapping ones too; a
//     final given up retryable holds the channel's later messages
//     (channel_busy, retryable) until xAgent resends it.
//   - Replicas. Replicas on one shared Store reach a channel open on another
//     replica through Options.Advanced.Relay; they need a shared FileStore and the
//     same API key or Options.Advanced.URLKey (see Download URLs below). With a
//     Store that is a state.BindingUpdater (the SDK's are) UpdateBinding is a
//     compare-and-swap, so replicas do not undo each other's changes;
//     the kit's own lock orders it within one process.
//
// Endpoints (paths are relative to the Connector base URL; mount the
// Handler under a prefix with http.StripPrefix if the base URL has one):
//
//	GET  /connector-card.json   public: the Card given in HandlerConfig (H1)
//	GET  /skill.md              public: HandlerConfig.Markdown, or 404 without one (H3)
//	GET  /health                API key: status, card ID and version, protocol, build (H4)
//	GET  /ws                    API key, then HandlerConfig.WS (W1)
//	POST /files/uploads         API key + X-XAgent-Connector-Channel-ID: multipart "file" (T1, M7)
//	GET  /files/refs/{file_ref} signed URL from DownloadURL or OfferFile (T2, T3, M6)
//	GET  /livez                 public, Connector only: 200 while the process serves HTTP
//	GET  /readyz                public, Connector only: 200, or 503 and why (shutting down, store, ReadyChecker)
//	GET  /metrics               Advanced.MetricsToken (never the API key; 404 with a key and no token), Connector only: Prometheus text (below), or Advanced.Metrics
//	*    Advanced.Routes        their own credential, Connector only: a platform's webhook, for example
//
// # Metrics
//
// A Connector serves its metrics by default (on its own address when it
// has no API key or has Advanced.MetricsToken, and on StartMonitor's
// address, which a scraper reaches without xAgent's credential), in the
// Prometheus text format, without the Prometheus client: the series of the metrics
// module (imv2_events_total, imv2_messages_sent_total,
// imv2_resends_total, imv2_acks_received_total, imv2_acks_sent_total,
// imv2_deltas_rejected_total, imv2_target_call_duration_seconds), then
// imv2_store_errors_total{store,op} (the Store New was given, counted),
// imv2_pending_messages (user messages accepted and not yet acked or
// failed, those waiting for the send window included) and
// imv2_waiting_messages (the part not yet transmitted),
// imv2_ack_latency_seconds (first transmission to ack),
// imv2_open_connections, imv2_open_channels,
// imv2_listener_failures_total, imv2_build_info, and the Go (go_*) and,
// on Linux, process (process_*) series under client_golang's names.
// Labels are bounded: codes from the peer by the SDK's list plus 32.
// Options.Advanced.Metrics replaces the handler (the metrics module's
// Collector, say: pass it as Advanced.Channel.Observer too).
//
// # API key
//
// When HandlerConfig.APIKey is set, /health, /ws and /files/uploads need
// "Authorization: Bearer <key>": the scheme in any case, one or more
// spaces, then the key (RFC 9110 §11.4), read by the same parser as the
// data plane's, so the two never disagree on a header. The Handler keeps only a SHA-256 digest of
// the key and compares digests with crypto/subtle, so neither the length nor
// the content leaks through timing. The key is never logged and never
// written into a response; a wrong or missing key gets 401.
//
// # Download URLs
//
// xAgent fetches a download_url without any header, so the URL itself is the
// authorization (T3). DownloadURL returns a relative URI
//
//	/files/refs/{file_ref}?ch={channel}&exp={unix seconds}&sig={HMAC-SHA256}
//
// signed with a 256-bit key derived with HKDF-SHA256 (info URLKeyInfo) from
// HandlerConfig.URLKey or, without one, from the API key: a restarted Connector
// and its replicas verify each other's URLs (a pending user message is
// resent after a restart with the URL it was stored with), and rotating the
// key invalidates outstanding URLs. Without either the key is drawn from
// crypto/rand when the Handler is built, and a restart makes old URLs
// invalid. A URL that verifies still needs its file: MemoryFileStore and a
// plain DiskFileStore keep files for one process, so after a restart it
// downloads only from a DiskFileStore with Keep (DiskFileStoreOptions.Keep) or a
// FileStore of your own, and on a replica only from one on storage the
// replicas share (Options.Files). A signature is stateless: it needs no
// server-side token table (one map keyed by remote input fewer to bound),
// it binds the file, the channel and the expiry together, and it is
// checked with hmac.Equal. A bad or missing signature gets 403; an
// expired URL, an unknown or expired file gets 404; a file of another
// channel gets 403. A file_ref outside [A-Za-z0-9_-]{16,128} gets 404
// before storage is touched, so "..", "/" or percent-encodings never reach
// a FileStore.
//
// # Defaults
//
// Every limit has a HandlerConfig field; zero takes the default:
//
//	MaxUploadBytes        32 MiB per uploaded file (413 above)
//	MaxConcurrentUploads  8 upload bodies read at once beyond the peers' floors of
//	                      1 each (for up to 64 connector_ids; 503 uploads_busy above)
//	FileTTL               1 h  lifetime of a stored file (NewMemoryFileStore)
//	URLTTL                1 h  lifetime of a signed download URL
//	UploadTimeout         5 min to read a body of the largest size; in proportion
//	                      below (declared size, 1 MiB at least: about 9 s), so the
//	                      slowest link served is about 110 KiB/s whatever the size,
//	                      kept up as the body comes (a trickle is cut after ~9 s)
//	DownloadTimeout       5 min to write one download
//
// The default FileStore is a MemoryFileStore: at most 1024 files and 256 MiB in
// total, 32 MiB per file, each file expiring FileTTL after its upload.
// NewDiskFileStore keeps the bytes in files in a private directory instead,
// with the same caps, so large files do not live in RAM. Neither runs a
// goroutine: expired files are swept on every Put and dropped when opened.
// A full store answers 503 rather than evicting live files whose URLs may
// still be in flight. Uploads get seven eighths of a store, one channel's
// uploads an eighth of its files and a quarter of its bytes; the rest is
// kept for the Connector's own user files (OfferFile). HandlerConfig.ChannelOpen
// (the kit sets it) refuses an upload to a channel not open, 409
// channel_not_open. A DiskFileStore opens a file without following a symlink
// and serves it only if it is the file it wrote.
//
// # Slow and unauthenticated clients
//
// An answer that does not read the request body (every 401, 403 and other
// error, and every endpoint but /files/uploads) closes the connection at
// once instead of letting net/http drain the body, which a client sending a
// byte at a time could stretch to the read timeout. NewServer sets
// http.Server timeouts (headers 10 s, idle 2 min) and caps connections
// (ServerLimits): at most 1024 served at once, at most 128 of them not yet
// past an API key check or a valid download URL. Over a cap the oldest
// unauthenticated connection that is not mid-request makes room, else the
// newcomer is closed; an authenticated connection never does, so a flood
// without the key cannot lock xAgent out. A connection reading its headers
// holds at most their 64 KiB cap plus net/http's buffers and header map
// (about 130 KiB, an estimate from those caps), so peers without the key
// can make a server hold about 128 × 130 KiB ≈ 16 MiB.
//
// # Uploads and memory
//
// An upload takes an upload slot (its peer's floor of one, held by at most
// 64 peers at once, else one of MaxConcurrentUploads shared) and reserves its
// declared size (Content-Length, or MaxUploadBytes for a chunked body) in
// the store before its body is read; either failing is 503 with
// Retry-After and nothing read. The file part streams into the store,
// which counts bytes against its caps as they arrive; the part headers
// and small fields before it share 64 KiB. An upload in flight holds at
// most UploadOverheadBytes (256 KiB) of buffers, plus, in a MemoryFileStore,
// the file bytes received so far (at most MaxUploadBytes, in 64 KiB
// pieces). HTTP/1.1 serves one request at a time, so that is also the
// bound per connection. Per Handler the worst case is
//
//	(64 + MaxConcurrentUploads) × UploadOverheadBytes   72 × 256 KiB = 18 MiB
//	+ file bytes in flight (MemoryFileStore only), within the store's total
//	  cap shared with the files already stored:           256 MiB
//
// so a default Handler with the default MemoryFileStore holds at most 274 MiB
// for files stored and in flight, and with a DiskFileStore 18 MiB of RAM.
package connector
