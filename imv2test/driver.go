package imv2test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/protocol"
)

// run is one check being executed: the script's variables, the current
// data-plane connection and what the side under test provides.
type run struct {
	ctx   context.Context
	cfg   *Config
	check *Check
	conn  *Connector // Connector side
	xa    *xagentRun // xAgent side
	v     *vars
	peer  *peer
	card  *protocol.Card
	saved map[string]*frame // packets bound with as=
	mark  int               // observer events before the check started
	obs   Observer
	// retired holds the IDs earlier checks of this run used: their events
	// may still arrive late on an out-of-process observer and are ignored.
	retired map[string]bool
}

// runCheck executes chk and returns its status and reason.
// retired collects the IDs of finished checks; it is only touched by
// the goroutine running the checks one after the other.
func runCheck(parent context.Context, chk *Check, cfg *Config, c *Connector, xa *xagentRun, retired map[string]bool) (Status, string) {
	ctx, cancel := context.WithTimeout(parent, cfg.CheckTimeout)
	defer cancel()
	r := &run{ctx: ctx, cfg: cfg, check: chk, conn: c, xa: xa, v: newVars(), saved: map[string]*frame{}, retired: retired}
	defer func() {
		for _, v := range r.v.plain {
			if v != "" {
				retired[v] = true
			}
		}
	}()
	r.v.set("WAIT", cfg.Wait.String())
	r.v.set("QUIET", cfg.Quiet.String())
	r.v.set("LAG", cfg.Lag.String())
	r.v.set("RESEND", cfg.Resend.String())
	r.v.set("DELTA_STREAMS", strconv.Itoa(cfg.DeltaStreams))
	r.v.set("DELTA_CHUNKS", strconv.Itoa((cfg.DeltaBytes+deltaChunk-1)/deltaChunk))
	if c != nil {
		r.obs = c.Observer
		if c.DeltaIdleTTL > 0 {
			sweep := c.DeltaSweep
			if sweep <= 0 {
				sweep = c.DeltaIdleTTL
			}
			// Slack for a slow host: the stream must be gone by then.
			r.v.set("TTL_WAIT", (c.DeltaIdleTTL + sweep + max(2*cfg.Quiet, c.DeltaIdleTTL/2)).String())
		}
		if c.ActivityTimeout > 0 {
			r.v.set("ACTIVITY_WAIT", (c.ActivityTimeout + cfg.Wait).String())
		}
	}
	if xa != nil {
		r.obs = xa.agent
		r.v.set("CARD_ID", xa.cardID)
	}
	if r.obs != nil {
		evs, _ := r.obs.Events()
		r.mark = len(evs)
	}
	defer r.cleanup()
	r.logf("=== %s: %s", chk.Name, chk.Title)
	for _, st := range chk.steps {
		if err := r.exec(st); err != nil {
			r.logf("    FAIL line %d: %v", st.line, err)
			verb, _, _ := strings.Cut(st.text, " ")
			return Fail, fmt.Sprintf("%s (line %d): %v", verb, st.line, err)
		}
	}
	if xa != nil {
		if err := xa.replyErr(); err != nil {
			return Fail, err.Error()
		}
	}
	return Pass, ""
}

// deltaChunk is the text size of one delta of the K6.b byte probe.
const deltaChunk = 256 << 10

func (r *run) cleanup() {
	if r.peer != nil {
		r.peer.close()
		r.peer = nil
	}
	if r.xa != nil {
		r.xa.stop()
	}
}

func (r *run) logf(format string, args ...any) {
	if r.cfg.Log != nil {
		fmt.Fprintf(r.cfg.Log, format+"\n", args...)
	}
}

// exec runs one script line, then checks the implementation did nothing
// invalid meanwhile (invalid frames, a broken observer).
func (r *run) exec(st step) error {
	r.logf("  %d: %s", st.line, clip(st.text, 160))
	verb, rest, _ := strings.Cut(st.text, " ")
	rest = strings.TrimSpace(rest)
	cmd := commands[verb]
	if r.check.Side == SideXAgent && xagentCommands[verb] != nil {
		cmd = xagentCommands[verb]
	}
	if cmd == nil {
		return fmt.Errorf("unknown command")
	}
	var toks []token
	if !rawCommands[verb] {
		var err error
		if toks, err = lex(rest); err != nil {
			return err
		}
	}
	if err := cmd(r, &args{r: r, toks: toks, rest: rest}); err != nil {
		return err
	}
	if r.peer != nil {
		if bad := r.peer.takeInvalid(); len(bad) > 0 {
			return fmt.Errorf("received an invalid frame (E1, W2): %v: %s", bad[0].err, clip(string(bad[0].raw), 60))
		}
	}
	if r.obs != nil {
		if err := r.obs.Err(); err != nil {
			return fmt.Errorf("observer: %v", err)
		}
	}
	return nil
}

// args gives a command its expanded arguments.
type args struct {
	r    *run
	toks []token
	rest string
}

// flagWords are bare words that are flags, not positional arguments.
var flagWords = []string{"reuse", "resume", "valid", "stream", "text-only"}

// pos returns the expanded positional arguments (flags excluded).
func (a *args) pos() ([]string, error) {
	var out []string
	for _, t := range a.toks {
		if t.key != "" || t.isJSON || slices.Contains(flagWords, t.val) {
			continue
		}
		s, err := a.r.v.expand(t.val, false)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// opt returns the expanded value of key=… and whether it was given.
func (a *args) opt(key string) (string, bool, error) {
	for _, t := range a.toks {
		if t.key == key {
			s, err := a.r.v.expand(t.val, t.isJSON)
			return s, true, err
		}
	}
	return "", false, nil
}

// flag reports whether a bare word is present (stream, valid, resume …).
func (a *args) flag(word string) bool {
	return slices.ContainsFunc(a.toks, func(t token) bool { return t.key == "" && !t.isJSON && t.val == word })
}

// json returns the expanded JSON argument, "" when absent.
func (a *args) json() (string, error) {
	for _, t := range a.toks {
		if t.key == "" && t.isJSON {
			return a.r.v.expand(t.val, true)
		}
	}
	return "", nil
}

// dur returns key=DURATION, or def.
func (a *args) dur(key string, def time.Duration) (time.Duration, error) {
	s, ok, err := a.opt(key)
	if err != nil || !ok {
		return def, err
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: %v", key, s, err)
	}
	return d, nil
}

// command is one script verb.
type command func(r *run, a *args) error

// commands are the verbs of both sides; xagentCommands add or replace
// verbs for the xAgent side. rawCommands take the rest of the line as is.
var commands map[string]command

var rawCommands = map[string]bool{"user": true, "sendraw": true, "sendbinary": true, "set": true}

func init() {
	commands = map[string]command{
		"card":            cmdCard,
		"dial":            cmdDial,
		"hello":           cmdHello,
		"connect":         cmdConnect,
		"open":            cmdOpen,
		"descriptor":      cmdDescriptor,
		"close":           cmdClose,
		"disconnect":      cmdDisconnect,
		"send":            cmdSend,
		"sendraw":         sendRaw(false),
		"sendbinary":      sendRaw(true),
		"flood":           cmdFlood,
		"expect":          cmdExpect,
		"expect-none":     cmdExpectNone,
		"expect-rejected": cmdExpectRejected,
		"ack":             cmdAck,
		"observe":         cmdObserve,
		"observe-none":    cmdObserveNone,
		"observe-order":   cmdObserveOrder,
		"user":            cmdUser,
		"user-file":       cmdUserFile,
		"http":            cmdHTTP,
		"upload":          cmdUpload,
		"fetch":           cmdFetch,
		"sleep":           cmdSleep,
		"sync":            cmdSync,
		"set":             cmdSet,
	}
}

// connectorOnly are verbs that make no sense when the suite plays the Connector.
var connectorOnly = []string{"card", "dial", "hello", "connect", "open", "descriptor", "close", "user", "user-file", "upload", "fetch"}

func knownVerb(side Side, verb string) bool {
	if side == SideXAgent {
		if xagentCommands[verb] != nil {
			return true
		}
		return commands[verb] != nil && !slices.Contains(connectorOnly, verb)
	}
	return commands[verb] != nil
}

// ---- packets -------------------------------------------------------------

func (r *run) needPeer() (*peer, error) {
	if r.peer == nil {
		return nil, errors.New("no connection (connect first)")
	}
	return r.peer, nil
}

// newPacket builds an envelope for the script's send.
func (r *run) newPacket(typ, channel, payload string) *imv2.Packet {
	p := &imv2.Packet{
		Schema:             imv2.PacketSchema,
		PacketID:           imv2.NewPacketID(),
		ConnectorChannelID: channel,
		Type:               typ,
		Time:               time.Now().UnixMilli(),
	}
	if payload != "" {
		p.Payload = []byte(payload)
	}
	return p
}

// write encodes p and sends it on the current connection.
func (r *run) write(p *imv2.Packet) error {
	pr, err := r.needPeer()
	if err != nil {
		return err
	}
	return pr.sendPacket(p)
}

// defaultChannel is $CH when bound.
func (r *run) defaultChannel() string { return r.v.plain["CH"] }

func cmdSend(r *run, a *args) error {
	pos, err := a.pos()
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("usage: send TYPE [id=ID] [channel=ID] [request_id=ID] [reply_to=ID] [JSON]")
	}
	payload, err := a.json()
	if err != nil {
		return err
	}
	channel, ok, err := a.opt("channel")
	if err != nil {
		return err
	}
	if !ok {
		channel = r.defaultChannel()
	}
	p := r.newPacket(pos[0], channel, payload)
	for key, dst := range map[string]*string{"id": &p.PacketID, "request_id": &p.RequestID, "reply_to": &p.ReplyTo} {
		if v, ok, err := a.opt(key); err != nil {
			return err
		} else if ok {
			*dst = v
		}
	}
	return r.write(p)
}

// sendRaw sends the rest of the line verbatim, as a text or binary frame.
func sendRaw(binary bool) command {
	return func(r *run, a *args) error {
		pr, err := r.needPeer()
		if err != nil {
			return err
		}
		text, err := r.v.expand(a.rest, strings.HasPrefix(a.rest, "{"))
		if err != nil {
			return err
		}
		// A final sent raw is resent after a retryable rejection like any
		// other (A7): a rate-limited Connector may refuse it once. The
		// resends carry its payload as written; the suite encodes their
		// envelopes.
		if p, err := imv2.DecodePacket([]byte(text)); err == nil && !binary && pr.rs != nil {
			pr.rs.track(p)
		}
		return pr.send([]byte(text), binary)
	}
}

func cmdFlood(r *run, a *args) error {
	pos, err := a.pos()
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return errors.New("usage: flood N TYPE [channel=ID] JSON (with $I = 1..N)")
	}
	n, err := strconv.Atoi(pos[0])
	if err != nil || n < 1 || n > 100000 {
		return fmt.Errorf("bad count %q", pos[0])
	}
	channel, ok, err := a.opt("channel")
	if err != nil {
		return err
	}
	if !ok {
		channel = r.defaultChannel()
	}
	for i := 1; i <= n; i++ {
		r.v.set("I", strconv.Itoa(i))
		payload, err := a.json()
		if err != nil {
			return err
		}
		if err := r.write(r.newPacket(pos[1], channel, payload)); err != nil {
			return fmt.Errorf("packet %d: %v", i, err)
		}
	}
	return nil
}

// filter is what expect, expect-none and expect-rejected look for.
type filter struct {
	types     []string // "any" matches every type
	messageID *string
	replyTo   *string
	requestID *string
	channel   *string
	code      *string
	payload   any // expected JSON subset of the payload, or nil
}

func (r *run) parseFilter(a *args, typ string) (*filter, error) {
	f := &filter{types: strings.Split(typ, "|")}
	for key, dst := range map[string]**string{"message_id": &f.messageID, "reply_to": &f.replyTo, "request_id": &f.requestID, "channel": &f.channel, "code": &f.code} {
		v, ok, err := a.opt(key)
		if err != nil {
			return nil, err
		}
		if ok {
			*dst = &v
		}
	}
	js, err := a.json()
	if err != nil {
		return nil, err
	}
	if js != "" {
		if f.payload, err = decodeJSON(js); err != nil {
			return nil, fmt.Errorf("expected JSON: %v", err)
		}
	}
	return f, nil
}

func (f *filter) typeOK(fr *frame) bool {
	return slices.Contains(f.types, "any") || slices.Contains(f.types, fr.p.Type)
}

// selector is the key expect selects by: message_id, else reply_to, else
// request_id. Every other key is asserted on the selected packet.
func (f *filter) selects(fr *frame) bool {
	if !f.typeOK(fr) {
		return false
	}
	switch {
	case f.messageID != nil:
		got, _ := walk(fr.doc, "payload.message_id")
		return got == *f.messageID
	case f.replyTo != nil:
		return fr.replyTo() == *f.replyTo
	case f.requestID != nil:
		return fr.p.RequestID == *f.requestID
	}
	return true
}

// check returns why fr breaks an assertion of f, or "".
func (f *filter) check(fr *frame) string {
	p := fr.p
	if f.replyTo != nil && fr.replyTo() != *f.replyTo {
		return fmt.Sprintf("reply_to is %q, want %q (A1, I4)", p.ReplyTo, *f.replyTo)
	}
	if f.requestID != nil && p.RequestID != *f.requestID {
		return fmt.Sprintf("request_id is %q, want %q (W9)", p.RequestID, *f.requestID)
	}
	if f.channel != nil && p.ConnectorChannelID != *f.channel {
		return fmt.Sprintf("connector_channel_id is %q, want %q (A2, I1)", p.ConnectorChannelID, *f.channel)
	}
	if f.code != nil {
		code := ""
		if p.Error != nil {
			code = string(p.Error.Code)
		}
		if !codeMatches(*f.code, code) {
			return fmt.Sprintf("error code is %q, want %s", code, *f.code)
		}
	}
	if f.payload != nil {
		got, _ := walk(fr.doc, "payload")
		if m := mismatch(f.payload, got, "payload"); m != "" {
			return m
		}
	}
	return ""
}

// all reports whether fr satisfies every key of f (for expect-none).
func (f *filter) all(fr *frame) bool {
	if !f.typeOK(fr) {
		return false
	}
	if f.messageID != nil {
		if got, _ := walk(fr.doc, "payload.message_id"); got != *f.messageID {
			return false
		}
	}
	return f.check(fr) == ""
}

// codeMatches: "*" any non-empty code, "a|b" one of them, "!a|b" none of them.
func codeMatches(pattern, code string) bool {
	if pattern == "*" {
		return code != ""
	}
	if neg, ok := strings.CutPrefix(pattern, "!"); ok {
		return !slices.Contains(strings.Split(neg, "|"), code)
	}
	return slices.Contains(strings.Split(pattern, "|"), code)
}

func (f *filter) String() string {
	s := strings.Join(f.types, "|")
	for k, v := range map[string]*string{"message_id": f.messageID, "reply_to": f.replyTo, "request_id": f.requestID} {
		if v != nil {
			s += fmt.Sprintf(" %s=%s", k, clip(*v, 28))
		}
	}
	return s
}

// sawText lists what did arrive, for a timeout's reason.
func (r *run) sawText() string {
	if r.peer == nil {
		return ""
	}
	seen := r.peer.seen()
	resending := ""
	if r.peer.rs != nil {
		resending = r.peer.rs.pending()
	}
	if len(seen) == 0 {
		return "; nothing else arrived" + resending
	}
	var parts []string
	for _, f := range seen[max(0, len(seen)-4):] {
		parts = append(parts, describe(f))
	}
	return "; queued: " + strings.Join(parts, ", ") + resending
}

func cmdExpect(r *run, a *args) error {
	pr, err := r.needPeer()
	if err != nil {
		return err
	}
	pos, err := a.pos()
	if err != nil {
		return err
	}
	if len(pos) < 1 {
		return errors.New("usage: expect TYPE[|TYPE] [message_id=…] [reply_to=…] [channel=…] [code=…] [valid] [as=NAME] [within=D] [JSON]")
	}
	f, err := r.parseFilter(a, pos[0])
	if err != nil {
		return err
	}
	within, err := a.dur("within", r.cfg.Wait)
	if err != nil {
		return err
	}
	fr, err := pr.await(r.ctx, time.Now().Add(within), f.selects)
	if err != nil {
		return fmt.Errorf("no %s within %v (%v)%s%s", f, within, err, r.sawText(), r.xaHint())
	}
	if why := f.check(fr); why != "" {
		return fmt.Errorf("%s: %s", describe(fr), why)
	}
	if a.flag("valid") {
		if err := r.validate(fr); err != nil {
			return fmt.Errorf("%s is not a valid packet of its type: %v", describe(fr), err)
		}
	}
	return r.save(a, fr)
}

func (r *run) save(a *args, fr *frame) error {
	name, ok, err := a.opt("as")
	if err != nil || !ok {
		return err
	}
	r.saved[name] = fr
	return r.v.bindDoc(name, fr.raw)
}

// validate decodes fr strictly with the root package's decoders, for the
// direction the implementation under test sends in: closed payloads,
// identity fields forbidden (I2, M8, C4, D7).
func (r *run) validate(fr *frame) error {
	dir := imv2.ToXAgent
	if r.check.Side == SideXAgent {
		dir = imv2.ToConnector
	}
	var err error
	switch fr.p.Type {
	case imv2.TypeChatMessage:
		_, err = imv2.DecodeChatMessage(fr.p, dir)
	case imv2.TypeChatMessageAck:
		_, err = imv2.DecodeChatMessageAck(fr.p)
	case imv2.TypeChatMessageDelta:
		if dir != imv2.ToConnector {
			return errors.New("a Connector sent chat.message.delta (D1)")
		}
		_, err = imv2.DecodeChatMessageDelta(fr.p)
	case imv2.TypeChatActivity:
		if dir != imv2.ToConnector {
			return errors.New("a Connector sent chat.activity (C1)")
		}
		_, err = imv2.DecodeChatActivity(fr.p)
	}
	if err == nil {
		if m := undefinedMember(fr.p); m != "" {
			err = fmt.Errorf("member %q is not one the profile defines: read tolerantly, write strictly (E5)", m)
		}
	}
	return err
}

func cmdExpectNone(r *run, a *args) error {
	pr, err := r.needPeer()
	if err != nil {
		return err
	}
	pos, err := a.pos()
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("usage: expect-none TYPE[|TYPE]|any [message_id=…] [reply_to=…] [code=…] [for=D] [JSON]")
	}
	f, err := r.parseFilter(a, pos[0])
	if err != nil {
		return err
	}
	window, err := a.dur("for", r.cfg.Quiet)
	if err != nil {
		return err
	}
	fr, err := pr.await(r.ctx, time.Now().Add(window), f.all)
	switch {
	case errors.Is(err, errTimeout):
		return nil
	case err != nil:
		return err
	}
	return fmt.Errorf("got %s, want no %s within %v", describe(fr), f, window)
}

// cmdExpectRejected: the packet whose packet_id is the argument was
// refused: an error packet replying to it, or a chat.message.ack
// rejected with a stable code and retryable=false (a deterministic
// failure, A8) — E3 lets either carry the refusal.
func cmdExpectRejected(r *run, a *args) error {
	pr, err := r.needPeer()
	if err != nil {
		return err
	}
	pos, err := a.pos()
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("usage: expect-rejected PACKET_ID [message_id=ID] [retryable=true|false|any] [within=D]")
	}
	pkt := pos[0]
	mid, hasMID, err := a.opt("message_id")
	if err != nil {
		return err
	}
	retry, ok, err := a.opt("retryable")
	if err != nil {
		return err
	}
	if !ok {
		retry = "false"
	}
	within, err := a.dur("within", r.cfg.Wait)
	if err != nil {
		return err
	}
	pick := func(f *frame) bool {
		switch f.p.Type {
		case imv2.TypeError:
			return f.replyTo() == pkt
		case imv2.TypeChatMessageAck:
			if hasMID {
				got, _ := walk(f.doc, "payload.message_id")
				return got == mid
			}
			return f.replyTo() == pkt
		}
		return false
	}
	fr, err := pr.await(r.ctx, time.Now().Add(within), pick)
	if err != nil {
		return fmt.Errorf("no rejection of %s within %v (%v)%s", clip(pkt, 30), within, err, r.sawText())
	}
	if fr.p.Type == imv2.TypeError {
		if fr.p.Error == nil || fr.p.Error.Code == "" {
			return fmt.Errorf("error packet without a code (E1)")
		}
		return r.save(a, fr)
	}
	want := map[string]any{"status": "rejected", "code": wildAny}
	if retry != "any" {
		want["retryable"] = retry == "true"
	}
	got, _ := walk(fr.doc, "payload")
	if m := mismatch(want, got, "payload"); m != "" {
		return fmt.Errorf("%s: %s (A3, A8)", describe(fr), m)
	}
	return r.save(a, fr)
}

// cmdAck answers a chat.message saved with as=NAME.
func cmdAck(r *run, a *args) error {
	pos, err := a.pos()
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("usage: ack NAME [status=accepted|duplicate|rejected] [code=C] [retryable=true|false]")
	}
	fr := r.saved[pos[0]]
	if fr == nil {
		return fmt.Errorf("nothing saved as %s", pos[0])
	}
	status, ok, err := a.opt("status")
	if err != nil {
		return err
	}
	if !ok {
		status = string(imv2.AckAccepted)
	}
	var rej *imv2.Error
	if status == string(imv2.AckRejected) {
		code, _, err := a.opt("code")
		if err != nil {
			return err
		}
		retry, _, err := a.opt("retryable")
		if err != nil {
			return err
		}
		rej = &imv2.Error{Code: imv2.Code(code), Message: "rejected by the conformance suite", Retryable: retry == "true"}
	}
	var head struct {
		MessageID string `json:"message_id"`
	}
	if err := fr.p.DecodePayload(&head); err != nil {
		return err
	}
	ack, err := imv2.NewAck(fr.p, head.MessageID, imv2.AckStatus(status), rej)
	if err != nil {
		return err
	}
	return r.write(ack)
}

// ---- observer ------------------------------------------------------------

func cmdObserve(r *run, a *args) error { return r.observe(a, false) }

func cmdObserveNone(r *run, a *args) error { return r.observe(a, true) }

// observe waits until at least min events match (default 1; count=N sets
// min and max), and with a max watches Quiet longer for extra ones.
func (r *run) observe(a *args, none bool) error {
	if r.obs == nil {
		return errors.New("no observer")
	}
	pos, err := a.pos()
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("usage: observe KIND[|KIND] [message_id=ID] [count=N|min=N max=N] [within=D] [JSON]")
	}
	kinds := strings.Split(pos[0], "|")
	mid, hasMID, err := a.opt("message_id")
	if err != nil {
		return err
	}
	js, err := a.json()
	if err != nil {
		return err
	}
	var want any
	if js != "" {
		if want, err = decodeJSON(js); err != nil {
			return fmt.Errorf("expected JSON: %v", err)
		}
	}
	lo, hi := 1, -1
	for key, dst := range map[string]*int{"min": &lo, "max": &hi} {
		if s, ok, err := a.opt(key); err != nil {
			return err
		} else if ok {
			if *dst, err = strconv.Atoi(s); err != nil {
				return fmt.Errorf("%s=%q", key, s)
			}
		}
	}
	if s, ok, err := a.opt("count"); err != nil {
		return err
	} else if ok {
		n, err := strconv.Atoi(s)
		if err != nil {
			return fmt.Errorf("count=%q", s)
		}
		lo, hi = n, n
	}
	window, err := a.dur("within", r.cfg.Wait)
	if err != nil {
		return err
	}
	if none {
		lo, hi = 0, 0
		if window, err = a.dur("for", r.cfg.Quiet); err != nil {
			return err
		}
	}
	desc := strings.Join(kinds, "|")
	if hasMID {
		desc += " for " + clip(mid, 30)
	}
	var lastBad string
	var hit Event // the first matching event, for the reason
	count := func() (int, []Event, <-chan struct{}) {
		evs, wake := r.obs.Events()
		evs = evs[min(r.mark, len(evs)):]
		n := 0
		for _, e := range evs {
			if !slices.Contains(kinds, e.Event) || (hasMID && e.MessageID != mid) || r.retired[e.MessageID] {
				continue
			}
			if want != nil {
				doc, _ := eventDoc(e)
				if m := mismatch(want, doc, "event"); m != "" {
					lastBad = m
					continue
				}
			}
			if n == 0 {
				hit = e
			}
			n++
		}
		return n, evs, wake
	}
	deadline := time.NewTimer(window)
	defer deadline.Stop()
	n, evs, wake := count()
	for n < lo {
		select {
		case <-wake:
		case <-deadline.C:
			reason := fmt.Sprintf("%d %s event(s) within %v, want at least %d", n, desc, window, lo)
			if lastBad != "" {
				reason += "; closest: " + lastBad
			}
			return errors.New(reason + lastEvents(evs))
		case <-r.ctx.Done():
			return r.ctx.Err()
		}
		if err := r.obs.Err(); err != nil {
			return fmt.Errorf("observer: %v", err)
		}
		n, evs, wake = count()
	}
	if hi < 0 {
		return nil
	}
	settle := r.cfg.Quiet
	if none {
		settle = window
	}
	quiet := time.NewTimer(settle)
	defer quiet.Stop()
	for {
		if n > hi {
			if hi == 0 {
				return fmt.Errorf("%d %s event(s), want none; the first: %s", n, desc, eventString(hit))
			}
			return fmt.Errorf("%d %s events, want at most %d%s", n, desc, hi, lastEvents(evs))
		}
		select {
		case <-wake:
			n, evs, wake = count()
		case <-quiet.C:
			return nil
		case <-r.ctx.Done():
			return r.ctx.Err()
		}
	}
}

// cmdObserveOrder waits until every listed message has its final, then
// checks that the messages first appeared in the chat (their first draft,
// post, edit or final) in the order listed: in edit and stream mode a
// message's first draft is its place in the chat (M14, D8).
func cmdObserveOrder(r *run, a *args) error {
	if r.obs == nil {
		return errors.New("no observer")
	}
	ids, err := a.pos()
	if err != nil {
		return err
	}
	if len(ids) < 2 {
		return errors.New("usage: observe-order ID ID… [within=D]")
	}
	window, err := a.dur("within", r.cfg.Wait)
	if err != nil {
		return err
	}
	shown := []string{"draft", "post", "edit", "final"}
	deadline := time.NewTimer(window)
	defer deadline.Stop()
	for {
		evs, wake := r.obs.Events()
		evs = evs[min(r.mark, len(evs)):]
		first := map[string]int{}
		final := map[string]bool{}
		for i, e := range evs {
			if !slices.Contains(shown, e.Event) || !slices.Contains(ids, e.MessageID) {
				continue
			}
			if _, ok := first[e.MessageID]; !ok {
				first[e.MessageID] = i
			}
			final[e.MessageID] = final[e.MessageID] || e.Event == "final"
		}
		missing := slices.IndexFunc(ids, func(id string) bool { return !final[id] })
		if missing < 0 {
			for i := 1; i < len(ids); i++ {
				if first[ids[i]] < first[ids[i-1]] {
					e := evs[first[ids[i]]]
					return fmt.Errorf("message %d of %d (%s) first shown (%s) above message %d (%s), sent before it",
						i+1, len(ids), clip(ids[i], 24), e.Event, i, clip(ids[i-1], 24))
				}
			}
			return nil
		}
		select {
		case <-wake:
		case <-deadline.C:
			return fmt.Errorf("no final for message %d of %d (%s) within %v%s", missing+1, len(ids), clip(ids[missing], 24), window, lastEvents(evs))
		case <-r.ctx.Done():
			return r.ctx.Err()
		}
		if err := r.obs.Err(); err != nil {
			return fmt.Errorf("observer: %v", err)
		}
	}
}

func eventDoc(e Event) (any, error) {
	raw, err := json.Marshal(e)
	if err != nil {
		return nil, err
	}
	return decodeJSON(string(raw))
}

func lastEvents(evs []Event) string {
	if len(evs) == 0 {
		return "; no events since the check started"
	}
	var parts []string
	for _, e := range evs[max(0, len(evs)-4):] {
		parts = append(parts, eventString(e))
	}
	return "; last events: " + strings.Join(parts, ", ")
}

// eventString shows e in a reason: kind, message_id, the text clipped.
func eventString(e Event) string {
	s := e.Event
	if e.MessageID != "" {
		s += " " + clip(e.MessageID, 24)
	}
	if e.Text != nil {
		s += fmt.Sprintf(" %q", clip(*e.Text, 24))
	}
	return s
}

// ---- user ----------------------------------------------------------------

func (r *run) user() (User, error) {
	if r.conn == nil || r.conn.User == nil {
		return nil, errors.New("no user")
	}
	return r.conn.User, nil
}

func cmdUser(r *run, a *args) error {
	u, err := r.user()
	if err != nil {
		return err
	}
	text, err := r.v.expand(a.rest, false)
	if err != nil {
		return err
	}
	return u.Say(r.ctx, r.defaultChannel(), text)
}

func cmdUserFile(r *run, a *args) error {
	u, err := r.user()
	if err != nil {
		return err
	}
	pos, err := a.pos()
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("usage: user-file NAME (a file of the txtar archive)")
	}
	data, ok := r.check.files[pos[0]]
	if !ok {
		return fmt.Errorf("the archive has no file %q", pos[0])
	}
	return u.SendFile(r.ctx, r.defaultChannel(), pos[0], data)
}

// ---- misc ----------------------------------------------------------------

// cmdSync is a barrier: a ping whose pong proves the peer has read
// everything sent before it (it reads in order), e.g. an ack before a
// disconnect, which could otherwise be lost with the connection.
// It asserts nothing about the pong: K4.c does.
func cmdSync(r *run, _ *args) error {
	pr, err := r.needPeer()
	if err != nil {
		return err
	}
	p, err := imv2.NewPacket(protocol.TypePing, "", nil)
	if err != nil {
		return err
	}
	p.RequestID = freshID("req")
	if err := r.write(p); err != nil {
		return err
	}
	_, err = pr.await(r.ctx, time.Now().Add(r.cfg.Wait), func(f *frame) bool {
		return f.p.Type == protocol.TypePong && (f.p.ReplyTo == p.PacketID || f.p.RequestID == p.RequestID)
	})
	if err != nil {
		return fmt.Errorf("no pong within %v (%v)", r.cfg.Wait, err)
	}
	return nil
}

func cmdSleep(r *run, a *args) error {
	pos, err := a.pos()
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("usage: sleep DURATION")
	}
	d, err := time.ParseDuration(pos[0])
	if err != nil {
		return err
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-r.ctx.Done():
		return r.ctx.Err()
	}
}

func cmdSet(r *run, a *args) error {
	name, val, ok := strings.Cut(a.rest, " ")
	if !ok || name == "" {
		return errors.New("usage: set NAME VALUE")
	}
	v, err := r.v.expand(strings.TrimSpace(val), false)
	if err != nil {
		return err
	}
	r.v.set(name, v)
	return nil
}

// authHeader sets Authorization per auth=none|key|bad (default: the
// key when the Connector has one).
func (r *run) authHeader(h http.Header, auth string, key string) error {
	switch auth {
	case "", "key":
		if key != "" {
			h.Set("Authorization", "Bearer "+key)
		}
	case "none":
	case "bad":
		h.Set("Authorization", "Bearer not-the-key-"+freshID("k"))
	default:
		return fmt.Errorf("auth=%q: want none, key or bad", auth)
	}
	return nil
}

// statusMatches: "200", "204|404", "4xx".
func statusMatches(pattern string, code int) bool {
	for _, p := range strings.Split(pattern, "|") {
		if len(p) == 3 && strings.HasSuffix(p, "xx") && strconv.Itoa(code)[:1] == p[:1] {
			return true
		}
		if p == strconv.Itoa(code) {
			return true
		}
	}
	return false
}

func (r *run) xaHint() string {
	if r.xa == nil {
		return ""
	}
	if err := r.xa.replyErr(); err != nil {
		return "; " + err.Error()
	}
	return ""
}
