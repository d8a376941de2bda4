package imv2test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/internal/apikey"
	"github.com/xagentkit/imv2/protocol"
	"github.com/xagentkit/imv2/xfiles"
)

// XAgent is an xAgent-side implementation under test: something that
// dials a Connector, keeps its channel and sends assistant messages.
type XAgent interface {
	// Reply makes the agent send one assistant message on channelID: the
	// text streamed in deltas when r.Stream, then the final with r.Files
	// (uploaded to the Connector first). It may return once the final is
	// pending; the suite reads what reaches the wire.
	Reply(ctx context.Context, channelID string, r Reply) error
	// Close disconnects and stops every goroutine the XAgent started.
	Close() error
}

// Reply is one assistant message an XAgent is asked to send.
type Reply struct {
	Text   string
	Stream bool
	Files  []ReplyFile
}

// ReplyFile is a file to attach to a final.
type ReplyFile struct {
	Name string
	Data []byte
}

// XAgentEnv is what an XAgent is started with: the suite's Connector.
type XAgentEnv struct {
	// URL is the Connector base URL; the data plane is URL/ws.
	URL string
	// APIKey must be sent as a bearer token on /ws and /files/uploads.
	APIKey string
	// CardID is the Connector's connector_card_id.
	CardID string
	// Agent records the user messages the agent receives: call
	// Agent.Record(Event{Event: "user", …}) for each, or use UserRecorder.
	Agent *Recorder
	// HTTPClient and Dialer reach URL; an XAgent in this process makes
	// every request and WebSocket with them. With Config.InMemory they are
	// the only way there.
	HTTPClient *http.Client
	Dialer     *websocket.Dialer
}

// StartXAgent starts an XAgent against env: it dials, says hello and
// opens one channel, and may block until that channel is open (the
// suite answers concurrently). ctx bounds the start. It may return an
// XAgent with an error (it refused the channel but still runs, as K1.y
// expects of an xAgent given a Card without xagent.im.v2); the suite
// closes it either way.
type StartXAgent func(ctx context.Context, env XAgentEnv) (XAgent, error)

// UserRecorder returns an imv2.Target for the xAgent side that records
// every user message as an Event "user" in rec and accepts it.
func UserRecorder(rec *Recorder) imv2.Target {
	return imv2.TargetFunc(func(_ context.Context, _ string, m *imv2.ChatMessage) error {
		e := Event{Event: "user", MessageID: m.MessageID, Text: &m.Text}
		for _, f := range m.Files {
			e.Files = append(e.Files, EventFile{FileRef: f.FileRef, Type: string(f.Type), Filename: f.Filename})
		}
		rec.Record(e)
		return nil
	})
}

// suiteCardID is the connector_card_id of the Connector the suite plays.
const suiteCardID = "imv2test.connector"

// CheckXAgent runs the xAgent-side checks: for each one it serves a fresh
// Connector (Card, health, uploads, /ws) on a loopback port, starts an
// XAgent against it with start, plays the script and stops both.
func CheckXAgent(ctx context.Context, start StartXAgent, cfg *Config) (*Report, error) {
	o := cfg.withDefaults()
	checks, err := selectChecks(SideXAgent, o.Run)
	if err != nil {
		return nil, err
	}
	rep := &Report{Side: SideXAgent}
	retired := map[string]bool{}
	for _, chk := range checks {
		res := Result{Check: chk.Name, Title: chk.Title, Rules: chk.Rules}
		began := time.Now()
		xa := newXAgentRun(ctx, &o, start, chk.cardProfiles)
		res.Status, res.Reason = runCheck(ctx, chk, &o, nil, xa, retired)
		res.Elapsed = time.Since(began)
		rep.Results = append(rep.Results, res)
	}
	return rep, nil
}

// maxUploads bounds the uploads one check's Connector records (they
// live as long as the check).
const maxUploads = 1024

// upload is one file the XAgent uploaded to the suite's Connector.
type upload struct {
	channel string
	size    int
	at      time.Time
}

// xagentRun is the suite's Connector for one xAgent-side check.
type xagentRun struct {
	cfg    *Config
	agent  *Recorder
	cardID string
	// profiles are the Card's supports.profiles (P2).
	profiles []string
	apiKey   string
	key      apikey.Key // apiKey, checked by the one parser the SDK uses
	srv      *http.Server
	served   chan struct{} // closed when srv stopped serving
	client   *http.Client  // env.HTTPClient
	conns    chan *websocket.Conn
	ctx      context.Context
	cancel   context.CancelFunc

	started  chan struct{} // closed when start returned
	xa       XAgent
	startErr error

	mu        sync.Mutex
	uploads   map[string]upload
	replyErrs []error
	wg        sync.WaitGroup // start and reply goroutines
}

func newXAgentRun(parent context.Context, cfg *Config, start StartXAgent, profiles []string) (x *xagentRun) {
	var err error
	if profiles == nil {
		profiles = []string{imv2.ProfileIMv2}
	}
	x = &xagentRun{
		cfg:      cfg,
		agent:    &Recorder{},
		cardID:   suiteCardID,
		profiles: profiles,
		apiKey:   "imv2test-key-" + uuid.NewString(),
		conns:    make(chan *websocket.Conn, 4),
		started:  make(chan struct{}),
		uploads:  map[string]upload{},
	}
	x.key = apikey.New(x.apiKey)
	x.ctx, x.cancel = context.WithCancel(parent)
	env := XAgentEnv{APIKey: x.apiKey, CardID: x.cardID, Agent: x.agent, Dialer: &websocket.Dialer{}}
	x.srv, x.served = &http.Server{Handler: http.HandlerFunc(x.serveHTTP)}, make(chan struct{})
	var ln net.Listener
	if cfg.InMemory {
		pn := newPipeNet()
		ln, env.URL, env.Dialer.NetDialContext = pn, pn.url(), pn.dial
	} else if ln, err = net.Listen("tcp", "127.0.0.1:0"); err == nil {
		env.URL = "http://" + ln.Addr().String()
	}
	x.client = &http.Client{Transport: &http.Transport{DialContext: env.Dialer.NetDialContext}, Timeout: 10 * time.Second}
	env.HTTPClient = x.client
	if err != nil { // no loopback port: the start fails, and so every step
		close(x.served)
		x.startErr = err
		close(x.started)
		return x
	}
	go func() {
		defer close(x.served)
		_ = x.srv.Serve(ln)
	}()
	x.wg.Add(1)
	go func() {
		defer x.wg.Done()
		defer close(x.started)
		ctx, cancel := context.WithTimeout(x.ctx, cfg.Wait*3)
		defer cancel()
		xa, err := start(ctx, env)
		x.mu.Lock()
		x.xa, x.startErr = xa, err
		x.mu.Unlock()
	}()
	return x
}

// stop closes the XAgent, the suite's Connector and every goroutine.
func (x *xagentRun) stop() {
	x.cancel()
	<-x.started
	x.mu.Lock()
	xa := x.xa
	x.mu.Unlock()
	if xa != nil {
		_ = xa.Close()
	}
	x.wg.Wait()
	x.srv.Close()
	<-x.served
	x.client.CloseIdleConnections()
	for {
		select {
		case ws := <-x.conns:
			_ = ws.Close()
		default:
			return
		}
	}
}

func (x *xagentRun) replyErr() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.startErr != nil && slices.Contains(x.profiles, imv2.ProfileIMv2) {
		// With a Card lacking xagent.im.v2, refusing the channel is right (P2).
		return fmt.Errorf("the xAgent failed to start: %v", x.startErr)
	}
	if len(x.replyErrs) > 0 {
		return fmt.Errorf("reply failed: %v", x.replyErrs[0])
	}
	return nil
}

// keyOK checks the Authorization header as the SDK's Connector does
// (internal/apikey: scheme case-insensitive, one or more spaces), so the
// suite's Connector refuses no header a real one accepts.
func (x *xagentRun) keyOK(r *http.Request) bool {
	return x.key.Allow(r.Header.Get("Authorization"))
}

func (x *xagentRun) card() *protocol.Card {
	return &protocol.Card{
		Schema:          protocol.CardSchema,
		ProtocolVersion: protocol.ProtocolVersion,
		Build:           protocol.Build{Version: "1", BuildTime: "2026-11-30T00:00:00Z"},
		ConnectorCardID: x.cardID,
		Connector:       protocol.CardInfo{Name: "imv2test Connector", Version: "1"},
		Supports: protocol.Supports{
			TargetTypes: []string{imv2.TargetTypeIM},
			Targets:     []protocol.SupportedTarget{{TargetType: imv2.TargetTypeIM, Provider: "imv2test", Label: "imv2test"}},
			Profiles:    x.profiles,
		},
	}
}

// serveHTTP is the suite's Connector: Card, health, uploads and /ws.
func (x *xagentRun) serveHTTP(w http.ResponseWriter, r *http.Request) {
	writeJSON := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	switch r.URL.Path {
	case "/connector-card.json":
		writeJSON(http.StatusOK, x.card())
		return
	case "/health":
		if !x.keyOK(r) {
			writeJSON(http.StatusUnauthorized, map[string]any{"error": map[string]string{"code": "unauthorized"}})
			return
		}
		c := x.card()
		writeJSON(http.StatusOK, map[string]any{"status": "ok", "connector_card_id": c.ConnectorCardID,
			"connector_card_version": c.Connector.Version, "protocol_version": c.ProtocolVersion, "build": c.Build})
		return
	case "/files/uploads":
		x.serveUpload(w, r, writeJSON)
		return
	case "/ws":
	default:
		http.NotFound(w, r)
		return
	}
	if !x.keyOK(r) {
		http.Error(w, "missing or wrong API key", http.StatusUnauthorized)
		return
	}
	if !slices.Contains(websocket.Subprotocols(r), protocol.Subprotocol) {
		http.Error(w, "subprotocol "+protocol.Subprotocol+" required", http.StatusBadRequest)
		return
	}
	up := websocket.Upgrader{Subprotocols: []string{protocol.Subprotocol}}
	ws, err := up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	select {
	case x.conns <- ws:
	case <-x.ctx.Done():
		_ = ws.Close()
	}
}

// serveUpload takes POST /files/uploads (T1) and records the file_ref it
// issues, so a final can be checked against it (M7).
func (x *xagentRun) serveUpload(w http.ResponseWriter, r *http.Request, writeJSON func(int, any)) {
	fail := func(status int, code string) {
		writeJSON(status, map[string]any{"error": map[string]string{"code": code}})
	}
	switch {
	case r.Method != http.MethodPost:
		fail(http.StatusMethodNotAllowed, "method_not_allowed")
		return
	case !x.keyOK(r):
		fail(http.StatusUnauthorized, "unauthorized")
		return
	}
	channel := r.Header.Get("X-XAgent-Connector-Channel-ID")
	if channel == "" {
		fail(http.StatusBadRequest, "connector_channel_id_required")
		return
	}
	f, hdr, err := r.FormFile("file")
	if err != nil {
		fail(http.StatusBadRequest, "invalid_upload")
		return
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, 32<<20))
	if err != nil {
		fail(http.StatusBadRequest, "invalid_upload")
		return
	}
	var rb [16]byte
	_, _ = rand.Read(rb[:])
	ref := "file_" + hex.EncodeToString(rb[:])
	x.mu.Lock()
	full := len(x.uploads) >= maxUploads
	if !full {
		x.uploads[ref] = upload{channel: channel, size: len(data), at: time.Now()}
	}
	x.mu.Unlock()
	if full {
		fail(http.StatusServiceUnavailable, "file_store_full")
		return
	}
	writeJSON(http.StatusOK, map[string]any{"file_ref": ref, "file_type": "file", "filename": hdr.Filename,
		"byte_size": len(data), "expires_at": time.Now().Add(time.Hour).UnixMilli()})
}

// ---- commands of the xAgent side ---------------------------------------------

var xagentCommands map[string]command

func init() {
	xagentCommands = map[string]command{
		"accept":          cmdAccept,
		"accept-open":     cmdAcceptOpen,
		"reply":           cmdReply,
		"expect-stream":   cmdExpectStream,
		"assert-uploaded": cmdAssertUploaded,
	}
}

// cmdAccept waits for the xAgent's connection and its hello (W1, W3, W4,
// P3), and answers hello.ack. resume: the hello must carry the
// connector_id issued before (W11), which the ack keeps.
func cmdAccept(r *run, a *args) error {
	x := r.xa
	var ws *websocket.Conn
	select {
	case ws = <-x.conns:
	case <-time.After(r.cfg.Wait):
		return fmt.Errorf("the xAgent did not connect within %v (W1, W11)%s", r.cfg.Wait, r.xaHint())
	case <-r.ctx.Done():
		return r.ctx.Err()
	}
	if r.peer != nil {
		r.peer.close()
	}
	r.peer = newPeer(ws, nil)
	fr, err := r.peer.await(r.ctx, time.Now().Add(r.cfg.Wait), func(*frame) bool { return true })
	if err != nil {
		return fmt.Errorf("no packet after the upgrade within %v (%v)", r.cfg.Wait, err)
	}
	if fr.p.Type != protocol.TypeConnectorHello {
		return fmt.Errorf("the first packet is %s, want connector.hello (W3)", fr.p.Type)
	}
	var h protocol.ConnectorHello
	if err := fr.p.DecodePayload(&h); err != nil {
		return err
	}
	resume := a.flag("resume")
	switch {
	case h.ConnectorCardID != x.cardID:
		return fmt.Errorf("hello connector_card_id %q, want %q (W4)", h.ConnectorCardID, x.cardID)
	case !helloVersionOK(h.ProtocolVersion):
		return fmt.Errorf("hello protocol_version %q is missing, not major.minor or below %s (W4)", h.ProtocolVersion, protocol.ProtocolVersion)
	case h.SupportedProfiles == nil:
		return errors.New("hello has no supported_profiles: profiles must be declared explicitly (P3)")
	case !slices.Contains(h.SupportedProfiles, imv2.ProfileIMv2):
		return fmt.Errorf("hello supported_profiles %v lacks %s (P3)", h.SupportedProfiles, imv2.ProfileIMv2)
	case resume && h.ConnectorID != r.v.plain["CONNECTOR_ID"]:
		return fmt.Errorf("the reconnect's hello has connector_id %q, want the issued %q (W11)", h.ConnectorID, r.v.plain["CONNECTOR_ID"])
	}
	id := r.v.plain["CONNECTOR_ID"]
	if !resume || id == "" {
		id = "conn_" + uuid.NewString()
	}
	ack, err := imv2.NewResponse(fr.p, protocol.TypeConnectorHelloAck, protocol.ConnectorHelloAck{ConnectorCardID: x.cardID, ConnectorID: id, ProtocolVersion: protocol.ProtocolVersion})
	if err != nil {
		return err
	}
	r.v.set("CONNECTOR_ID", id)
	return r.write(ack)
}

// cmdAcceptOpen waits for channel.open and answers it with a Descriptor.
// reuse: the xAgent must reopen the channel it had, by its ID (W11).
func cmdAcceptOpen(r *run, a *args) error {
	pos, err := a.pos()
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("usage: accept-open NAME [reuse]")
	}
	pr, err := r.needPeer()
	if err != nil {
		return err
	}
	fr, err := pr.await(r.ctx, time.Now().Add(r.cfg.Wait), func(f *frame) bool { return f.p.Type == protocol.TypeChannelOpen })
	if err != nil {
		return fmt.Errorf("no channel.open within %v (%v)%s", r.cfg.Wait, err, r.sawText())
	}
	name := pos[0]
	id := fr.p.ConnectorChannelID
	if a.flag("reuse") {
		if want := r.v.plain[name]; id != want {
			return fmt.Errorf("channel.open names %q, want the stored %q (W11)", id, want)
		}
	} else if id == "" {
		id = "cch_" + uuid.NewString()
	}
	d := &protocol.Descriptor{
		Schema: protocol.DescriptorSchema,
		Connection: protocol.Connection{ConnectorCardID: r.xa.cardID, ConnectorID: r.v.plain["CONNECTOR_ID"], ConnectorChannelID: id,
			TargetType: imv2.TargetTypeIM, Profiles: []string{imv2.ProfileIMv2}, Status: protocol.StatusConnected},
		Target: protocol.DescriptorTarget{Provider: "imv2test", Label: "imv2test", DisplayName: "imv2test"},
	}
	ack, err := imv2.NewResponse(fr.p, protocol.TypeChannelOpenAck, protocol.ChannelOpenAck{ConnectorChannelID: id, ConnectionDescriptor: d})
	if err != nil {
		return err
	}
	ack.ConnectorChannelID = id
	r.v.set(name, id)
	return r.write(ack)
}

// cmdReply asks the XAgent for an assistant message; it runs in the
// background and a failure is reported with the next failing step or at
// the end of the check.
func cmdReply(r *run, a *args) error {
	x := r.xa
	select {
	case <-x.started:
	case <-time.After(r.cfg.Wait):
		return fmt.Errorf("the xAgent did not finish starting within %v", r.cfg.Wait)
	}
	if err := x.replyErr(); err != nil {
		return err
	}
	text, _, err := a.opt("text")
	if err != nil {
		return err
	}
	rep := Reply{Text: text, Stream: a.flag("stream")}
	if names, ok, err := a.opt("files"); err != nil {
		return err
	} else if ok {
		for _, n := range strings.Split(names, ",") {
			data, found := r.check.files[n]
			if !found {
				return fmt.Errorf("the archive has no file %q", n)
			}
			rep.Files = append(rep.Files, ReplyFile{Name: n, Data: data})
		}
	}
	channel := r.defaultChannel()
	x.mu.Lock()
	xa := x.xa
	x.mu.Unlock()
	x.wg.Add(1)
	go func() {
		defer x.wg.Done()
		if err := xa.Reply(x.ctx, channel, rep); err != nil && x.ctx.Err() == nil {
			x.mu.Lock()
			x.replyErrs = append(x.replyErrs, err)
			x.mu.Unlock()
		}
	}()
	return nil
}

// cmdExpectStream reads one streamed assistant message: deltas under one
// message_id numbered 1, 2, 3 … (D2), then the final with that
// message_id (M10, D6). text-only: a delta has no member but message_id,
// sequence and text (D7). The JSON, if any, is asserted on the final.
func cmdExpectStream(r *run, a *args) error {
	pr, err := r.needPeer()
	if err != nil {
		return err
	}
	within, err := a.dur("within", r.cfg.Wait)
	if err != nil {
		return err
	}
	js, err := a.json()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(within)
	isIM := func(f *frame) bool {
		return f.p.Type == imv2.TypeChatMessageDelta || f.p.Type == imv2.TypeChatMessage
	}
	first, err := pr.await(r.ctx, deadline, isIM)
	if err != nil {
		return fmt.Errorf("no delta within %v (%v)%s%s", within, err, r.sawText(), r.xaHint())
	}
	if first.p.Type == imv2.TypeChatMessage {
		return errors.New("the final arrived without any delta before it, for a streamed reply")
	}
	mid, _ := walk(first.doc, "payload.message_id")
	seq := int64(0)
	textOnly := a.flag("text-only")
	for f := first; ; {
		if f.p.Type == imv2.TypeChatMessage {
			if m := mismatch(js2any(js), payloadOf(f), "payload"); js != "" && m != "" {
				return fmt.Errorf("the final: %s", m)
			}
			if seq == 0 {
				return errors.New("no delta before the final")
			}
			return r.save(a, f)
		}
		got, _ := walk(f.doc, "payload.sequence")
		if fmt.Sprint(got) != fmt.Sprint(seq+1) {
			return fmt.Errorf("delta %d of %v has sequence %v, want %d (D2)", seq+1, mid, got, seq+1)
		}
		seq++
		if textOnly {
			if obj, ok := payloadOf(f).(map[string]any); ok {
				for k := range obj {
					if k != "message_id" && k != "sequence" && k != "text" {
						return fmt.Errorf("delta %d carries member %q: deltas are text only (D7)", seq, k)
					}
				}
			}
		}
		f, err = pr.await(r.ctx, deadline, func(g *frame) bool {
			got, _ := walk(g.doc, "payload.message_id")
			return isIM(g) && got == mid
		})
		if err != nil {
			return fmt.Errorf("after %d deltas, no further delta or final for %v within %v (%v)%s", seq, mid, within, err, r.xaHint())
		}
	}
}

func payloadOf(f *frame) any {
	p, _ := walk(f.doc, "payload")
	return p
}

func js2any(js string) any {
	if js == "" {
		return nil
	}
	v, _ := decodeJSON(js)
	return v
}

// cmdAssertUploaded: every file of the final saved as NAME was uploaded
// to this suite's /files/uploads for the final's channel before the final
// arrived (M7, T1).
func cmdAssertUploaded(r *run, a *args) error {
	pos, err := a.pos()
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("usage: assert-uploaded NAME")
	}
	fr := r.saved[pos[0]]
	if fr == nil {
		return fmt.Errorf("nothing saved as %s", pos[0])
	}
	files, _ := walk(fr.doc, "payload.files")
	list, _ := files.([]any)
	if len(list) == 0 {
		return errors.New("the final has no files")
	}
	r.xa.mu.Lock()
	defer r.xa.mu.Unlock()
	for i, f := range list {
		ref, _ := walk(f, "file_ref")
		refStr, _ := ref.(string)
		up, ok := r.xa.uploads[refStr]
		switch {
		case !ok:
			return fmt.Errorf("files[%d].file_ref %q was never issued by POST /files/uploads (M7)", i, refStr)
		case up.channel != fr.p.ConnectorChannelID:
			return fmt.Errorf("files[%d] was uploaded for channel %q, the final is on %q (T1)", i, up.channel, fr.p.ConnectorChannelID)
		case up.at.After(fr.at):
			return fmt.Errorf("files[%d] was uploaded after the final arrived (M7)", i)
		}
	}
	return nil
}

// ---- an XAgent on this SDK ----------------------------------------------------

// pieces splits text into word-sized deltas that concatenate back to it.
func pieces(text string) []string {
	var out []string
	for len(text) > 0 {
		i := strings.IndexByte(text[1:], ' ')
		if i < 0 {
			return append(out, text)
		}
		out = append(out, text[:i+1])
		text = text[i+1:]
	}
	return out
}

// SDKXAgent returns the StartXAgent of this SDK's xAgent side: a
// dataplane.Client dialled with cfg — the base URL (the Client fetches the
// Card), APIKey, CardID (which the Card must name) and Target filled in
// from the env, the Target recording user messages — that
// opens one channel. Reply streams with Client.NewReply (deltas 1, 2, 3
// …, then the final) after uploading the files with xfiles.Upload (M7).
// Set cfg.Options (ack timeout, retry bounds) and the reconnect backoff
// to fit Config.Resend.
func SDKXAgent(cfg dataplane.ClientConfig) StartXAgent {
	return func(ctx context.Context, env XAgentEnv) (XAgent, error) {
		c := cfg
		c.URL, c.APIKey, c.Advanced.CardID = env.URL, env.APIKey, env.CardID
		c.Target = UserRecorder(env.Agent)
		if c.Advanced.HTTPClient == nil {
			c.Advanced.HTTPClient = env.HTTPClient
		}
		if c.Advanced.DialContext == nil && env.Dialer != nil {
			c.Advanced.DialContext = env.Dialer.NetDialContext
		}
		client, err := dataplane.Dial(ctx, c)
		if err != nil {
			return nil, err
		}
		x := &sdkXAgent{client: client, url: env.URL, key: env.APIKey, http: env.HTTPClient}
		if _, err := client.OpenChannel(ctx, ""); err != nil {
			return x, err // still connected: a refusal is what K1.y checks
		}
		return x, nil
	}
}

type sdkXAgent struct {
	client *dataplane.Client
	url    string
	key    string
	http   *http.Client
}

func (s *sdkXAgent) Reply(ctx context.Context, channelID string, r Reply) error {
	rep, err := s.client.NewReply(channelID, "")
	if err != nil {
		return err
	}
	if r.Stream {
		for _, p := range pieces(r.Text) {
			if err := rep.Delta(ctx, p); err != nil {
				return err
			}
		}
	}
	m := imv2.ChatMessage{Text: r.Text}
	for _, f := range r.Files {
		res, err := xfiles.Upload(ctx, s.http, s.url, s.key, channelID, f.Name, bytes.NewReader(f.Data))
		if err != nil {
			return err
		}
		m.Files = append(m.Files, res.File())
	}
	_, err = rep.Final(ctx, m)
	return err
}

func (s *sdkXAgent) Close() error { return s.client.Close() }

// helloVersionOK reports whether an xAgent's hello version is one a 3.0
// Connector admits: its own current version, 3.0 or newer (W4).
func helloVersionOK(s string) bool {
	v, err := protocol.ParseVersion(s)
	return err == nil && v.Compare(protocol.Version30) >= 0
}
