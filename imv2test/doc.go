// Package imv2test is the conformance suite of the xAgent IM Profile v2
// (xagent.im.v2): to this profile what h2spec is to HTTP/2. Point it at
// any Connector — built on this SDK, on another library, in another
// language — and it says which rules the Connector breaks. Pointed the
// other way it plays a Connector against an xAgent-side implementation.
//
// # Running it
//
//	rep, err := imv2test.CheckConnector(ctx, imv2test.Connector{URL: "http://127.0.0.1:8787"}, nil)
//	rep.WriteTable(os.Stdout) // check, rule IDs, pass/FAIL/skip, one-line reason
//
// The same from a shell: imv2sim conform -connector URL [-api-key KEY]
// [-json], which exits non-zero on any failure; -exec "CMD" starts a
// Connector under the command-line contract `imv2sim conform -h` states
// and observes it. A Connector built with connector.New is checked in
// process with RunKit(t, k, nil), which watches the kit's platform calls
// itself (the platform records nothing); one built on the lower layers
// calls RunConnector, which hands it a RecordingTarget. Both report one
// subtest per check, a skipped check as a skipped subtest with its
// reason. CheckXAgent (with SDKXAgent for this SDK's dataplane.Client)
// runs the xAgent-side checks.
//
// # Fake time
//
// A run is mostly waiting: for what must not happen (Quiet), for bounds
// to expire, for resends; about 15 s on the wall clock. A Connector in
// this process — CheckKit, a Connector with Handler instead of URL, or
// CheckXAgent with Config.InMemory — is served on an in-memory network,
// and every wait reads package time, so inside a testing/synctest bubble
// the same run costs well under a second: the bubble's clock moves only
// when the suite and the Connector are both idle, so each window of
// "nothing more happens" is exact, not a guess. A bubble cannot start
// subtests: run the checks inside it and ReportTo outside (see CheckKit).
//
// # Checks
//
// Checks are data: txtar scripts under testdata/conformance/connector and
// testdata/conformance/xagent, embedded in the package, run by one
// driver. Each check is named after the profile's consistency question it
// answers (profile §11, rules K1–K12) with a sub-check suffix, and
// lists the rule IDs it exercises:
//
//	K1   Card and Descriptor declare the profile; Card, health, skill, /ws, hello (3.0 and newer admitted), channel.open, descriptor
//	K2   delta+final and final-only both work; delta sequencing (gaps, conflicts, retransmissions)
//	K3   business idempotency by message_id only; exactly-once display; single flight
//	K4   acks match reply_to, channel and message; request_id echo; protocol errors answer their packet
//	K5   no temporary text when the target cannot stream
//	K6   delta state bounded: open streams, text per stream, idle TTL
//	K7   no session, role or user ID field accepted or sent, at any depth; other unknown members ignored (E5)
//	K8   inbound files downloadable without credentials; outbound files uploaded to the channel first
//	K9   files only in finals; text and all files one ack unit, acked after the side effect
//	K10  session sync, history snapshots, replays, UI projections not accepted
//	K11  reconnect restores routing and pending delivery, no completed history
//	K12  chat.activity loads with IM v2, clears, times out, and degrades safely
//
// `imv2sim conform -list` prints every check with its rules; together they
// cover every rule of families P, I, E, M, D, A, C, S, X, W, H and T that
// is observable over the wire, and NotObservable says why the others are
// not (a test keeps both lists complete and disjoint).
//
// A check may need what a run cannot provide: an observer of the target
// side, a user who types, an API key, a target that streams or cannot, a
// typing indicator, a short declared TTL. It is then skipped — reported as skip with the
// reason, neither passed nor failed.
//
// # Observers
//
// Some rules show only on the target side: one display per message (M11,
// A6), no temporary text on a target that cannot stream (K5), typing
// (C5–C7). An Observer reports those side effects as the Events of the
// console example's -json contract (draft, post, edit, final, typing,
// typing_clear, sent, failed). In process it is the kit's own record of
// its platform calls (RunKit) or the RecordingTarget the suite supplies; out of process a StreamObserver reading the Connector's
// JSON-lines stdout (Process does both, plus the User on stdin). A check
// ignores events of message IDs an earlier check used, since an
// out-of-process stream may deliver them late.
//
// # Script language
//
// A txtar file holds checks (sections named K<n>.<sub>) and data files
// (any other section, for uploads and user files). A check starts with
// directives — title TEXT, rules ID…, needs NEED…, and on the xAgent side
// card-profiles ID… (the supports.profiles of the Card the suite serves
// for that check; an xAgent that then refuses its channel has started
// correctly) — then one command per line; # starts a comment. The first failing command fails the check,
// with its reason.
//
// Variables: $NAME or ${NAME} is a value; an unbound one gets a fresh
// unique ID on first use (so $M1 is "a new message_id"). ${NAME.path.0.x}
// reads a saved packet or HTTP body (as=NAME). ${text:N} is N bytes of
// text. Predefined: $CH after open CH, $CARD_ID, $CONNECTOR_ID, $WAIT,
// $QUIET, $LAG, $RESEND, $DELTA_STREAMS, $DELTA_CHUNKS, $TTL_WAIT,
// $ACTIVITY_WAIT. Values put inside JSON strings are escaped.
//
// Both sides:
//
//	send TYPE [id=ID] [channel=ID] [request_id=ID] [reply_to=ID] [JSON]
//	        one packet; channel defaults to $CH, id to a fresh packet_id
//	sendraw TEXT | sendbinary TEXT    a frame sent verbatim (malformed on purpose)
//	flood N TYPE [channel=ID] JSON    N packets, $I = 1…N
//	expect TYPE[|TYPE] [message_id=V] [reply_to=V] [request_id=V] [channel=V] [code=C]
//	       [valid] [as=NAME] [within=D] [JSON]
//	        the first received packet of TYPE with that message_id (else reply_to, else
//	        request_id); every other key, the JSON subset of its payload and, with valid,
//	        the root package's strict decoder must agree
//	expect-none TYPE[|TYPE]|any [keys…] [for=D] [JSON]   nothing matching arrives (default $QUIET)
//	expect-rejected PACKET_ID [message_id=V] [retryable=false|true|any]
//	        an error packet answering it, or a rejected ack with a code and retryable
//	ack NAME [status=S] [code=C] [retryable=B]   acknowledge a chat.message saved as NAME
//	observe KIND[|KIND] [message_id=V] [count=N | min=N max=N] [within=D] [JSON]
//	        at least min events (default 1) within D; with a max, none beyond it for $QUIET
//	observe-none KIND[|KIND] [message_id=V] [for=D] [JSON]
//	observe-order ID ID… [within=D]   every message's final within D, and the messages
//	        first shown (draft, post, edit or final) in the order listed
//	sync                              ping → pong: the peer has read all sent before
//	disconnect | sleep D | set NAME VALUE
//
// Connector side (the suite plays xAgent):
//
//	card [valid]                      GET /connector-card.json; valid: H1, H2, P1, P2, P8
//	dial [auth=none|key|bad] [subprotocol=none] [status=CODE]   GET /ws; with status, refused
//	hello [resume] | connect [resume] connector.hello (resume: the last connector_id)
//	open NAME [reuse] [valid]         channel.open; binds $NAME; reuse: the same ID back (W5);
//	                                  valid: the Descriptor against the Card (P2, P3, H5)
//	descriptor ID | close ID          connection.descriptor.get | channel.close
//	http METHOD PATH [auth=…] [status=200|204|4xx] [as=NAME] [JSON]
//	upload FILE [channel=ID|none] [auth=…] [status=…] [as=NAME]   POST /files/uploads (T1)
//	fetch URL [status=…] [body=FILE]  GET a download_url without credentials (M6, T2, T3)
//	user TEXT | user-file FILE        make the Connector send a user message (User)
//
// xAgent side (the suite plays a Connector; the XAgent under test dials it):
//
//	accept [resume]                   the next connection and its hello (W3, W4, P3, W11)
//	accept-open NAME [reuse]          the next channel.open, answered with a Descriptor
//	reply [stream] [text=T] [files=A,B]   ask the XAgent for an assistant message
//	expect-stream [text-only] [as=NAME] [within=D] [JSON]
//	        deltas 1, 2, 3 … of one message_id, then its final (D2, D6, M10; D7)
//	assert-uploaded NAME              every file of a saved final was uploaded first (M7)
//
// JSON in expect and observe is a subset: objects may have more members,
// arrays must match element by element; "*" means present, "!absent"
// absent, "~RE" a value matching the regular expression.
//
// # Tolerances and bounds
//
// Config holds the timing tolerances, kept short so a run takes seconds:
// Wait 5 s for anything expected (spent only when it is missing), Quiet
// 300 ms of watching for what must not happen, Lag 500 ms between an
// accepted ack and the observer's report of its final, Resend 15 s for an
// xAgent's resend. K6 probes bounds from outside: DeltaStreams (1024)
// streams and DeltaBytes (2 MiB) of text; a Connector whose caps lie
// above the probes fails. Idle TTL and activity timeout are observed only
// when the Connector declares them short (Connector.DeltaIdleTTL,
// ActivityTimeout; RunKit reads them from the kit and observes them when
// at most 10 s). What the suite keeps from a peer is bounded too:
// 100,000 unread frames per connection (then it hangs up), MaxEvents
// observer events, 16 MiB per frame, 1,024 uploads per xAgent check;
// everything lives only as long as its check.
//
// # Resends
//
// Playing xAgent, the suite does what xAgent does with a final the
// Connector rejected with retryable=true (A7, A8): it sends it again, same
// message_id and content under a new packet_id, after a backoff from
// RetryMin (100 ms) doubling each time, at most RetryAttempts (8) times
// and within RetryBudget (half of Wait) of the first rejection. A script
// sees only the terminal answer (an answer to a resend counts as the
// answer to the script's packet), or the last retryable rejection when
// the resends ran out: a correct Connector whose platform rate-limits
// passes, one that never accepts fails. Config.Log (imv2sim conform -v;
// go test -v with RunConnector) shows every ack with its status, code and
// retryable, and each resend.
//
// # Not observable
//
// Partially observable rules are checked as far as the wire shows them:
// the completed-record bound (S4, S6: 100,000 records by default here) is
// not probed; C5's degrade for a target without typing and C7's typing
// refresh need such a target; A4 and M14 are semantics of the agent.
// Rules no check can decide at all are listed by NotObservable.
package imv2test
