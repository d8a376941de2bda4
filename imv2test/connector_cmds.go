package imv2test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/protocol"
	"github.com/xagentkit/imv2/xfiles"
)

// Commands of the Connector side: the suite plays xAgent.

func (r *run) httpClient() *http.Client { return r.conn.HTTPClient }

// fetchCard reads /connector-card.json without credentials (H1: it is
// public). It returns the raw body and the Card decoded leniently:
// enough for the card ID the hello needs. The card command validates.
func (r *run) fetchCard() ([]byte, *protocol.Card, error) {
	req, err := http.NewRequestWithContext(r.ctx, http.MethodGet, r.conn.URL+"/connector-card.json", nil)
	if err != nil {
		return nil, nil, err
	}
	resp, err := r.httpClient().Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("GET /connector-card.json: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("GET /connector-card.json without credentials: HTTP %d, want 200 (H1: public)", resp.StatusCode)
	}
	card := new(protocol.Card)
	if err := json.Unmarshal(body, card); err != nil {
		return nil, nil, fmt.Errorf("the Card is not JSON: %v (H1)", err)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.Contains(ct, "json") {
		return body, card, fmt.Errorf("GET /connector-card.json: Content-Type %q, want JSON (H1)", ct)
	}
	return body, card, nil
}

// ensureCard fetches the Card once per check.
func (r *run) ensureCard() (*protocol.Card, error) {
	if r.card != nil {
		return r.card, nil
	}
	body, card, err := r.fetchCard()
	if err != nil {
		return nil, err
	}
	r.card = card
	r.v.set("CARD_ID", card.ConnectorCardID)
	return card, r.v.bindDoc("CARD", body)
}

// cmdCard fetches the Card (binding $CARD_ID and ${CARD.…}); with valid
// it also validates it (H1, H2, P8) and its declaration of the profile
// for target type im (P1, P2, K1).
func cmdCard(r *run, a *args) error {
	if !a.flag("valid") {
		r.card = nil
		_, err := r.ensureCard()
		return err
	}
	body, _, err := r.fetchCard()
	if err != nil {
		return err
	}
	card, err := protocol.DecodeCard(body)
	if err != nil {
		return fmt.Errorf("the Card is invalid: %v", err)
	}
	if !slices.Contains(card.Supports.Profiles, imv2.ProfileIMv2) {
		return fmt.Errorf("the Card's supports.profiles %v does not declare %s (P2, K1)", card.Supports.Profiles, imv2.ProfileIMv2)
	}
	if !slices.Contains(card.Supports.TargetTypes, imv2.TargetTypeIM) {
		return fmt.Errorf("the Card's supports.target_types %v lacks %q (P1)", card.Supports.TargetTypes, imv2.TargetTypeIM)
	}
	r.card = card
	r.v.set("CARD_ID", card.ConnectorCardID)
	return r.v.bindDoc("CARD", body)
}

// wsURL maps the Connector base URL to its /ws endpoint.
func wsURL(base string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", err
	}
	switch u.Scheme {
	case "http":
		u.Scheme = "ws"
	case "https":
		u.Scheme = "wss"
	default:
		return "", fmt.Errorf("base URL scheme %q is not http or https", u.Scheme)
	}
	u.Path = strings.TrimRight(u.Path, "/") + "/ws"
	return u.String(), nil
}

func cmdDial(r *run, a *args) error {
	auth, _, err := a.opt("auth")
	if err != nil {
		return err
	}
	sub, _, err := a.opt("subprotocol")
	if err != nil {
		return err
	}
	status, wantRefusal, err := a.opt("status")
	if err != nil {
		return err
	}
	u, err := wsURL(r.conn.URL)
	if err != nil {
		return err
	}
	h := http.Header{}
	if err := r.authHeader(h, auth, r.conn.APIKey); err != nil {
		return err
	}
	d := websocket.Dialer{HandshakeTimeout: r.cfg.Wait, NetDialContext: r.conn.dial}
	if sub != "none" {
		d.Subprotocols = []string{protocol.Subprotocol}
	}
	ws, resp, err := d.DialContext(r.ctx, u, h)
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	if wantRefusal {
		if err == nil {
			_ = ws.Close()
			return fmt.Errorf("GET /ws was upgraded, want it refused with HTTP %s", status)
		}
		if resp == nil {
			return fmt.Errorf("GET /ws failed without an HTTP answer: %v", err)
		}
		if !statusMatches(status, resp.StatusCode) {
			return fmt.Errorf("GET /ws answered HTTP %d, want %s", resp.StatusCode, status)
		}
		return nil
	}
	if err != nil {
		if resp != nil {
			return fmt.Errorf("GET /ws: HTTP %d: %v", resp.StatusCode, err)
		}
		return fmt.Errorf("GET /ws: %v", err)
	}
	if ws.Subprotocol() != protocol.Subprotocol {
		_ = ws.Close()
		return fmt.Errorf("the Connector selected subprotocol %q, want %s (W1)", ws.Subprotocol(), protocol.Subprotocol)
	}
	if r.peer != nil {
		r.peer.close()
	}
	r.peer = newPeer(ws, newResender(r.cfg, r.logf))
	return nil
}

// request sends p with a fresh request_id and waits for the packet
// answering it (reply_to = its packet_id). An error packet is returned
// as an error naming its code.
func (r *run) request(p *imv2.Packet, want string) (*frame, error) {
	pr, err := r.needPeer()
	if err != nil {
		return nil, err
	}
	p.RequestID = "req_" + uuid.NewString()
	if err := r.write(p); err != nil {
		return nil, err
	}
	fr, err := pr.await(r.ctx, time.Now().Add(r.cfg.Wait), func(f *frame) bool { return f.p.ReplyTo == p.PacketID })
	if err != nil {
		return nil, fmt.Errorf("no answer to %s within %v (%v)%s", p.Type, r.cfg.Wait, err, r.sawText())
	}
	if fr.p.Type == imv2.TypeError {
		return fr, fmt.Errorf("%s was refused: %s", p.Type, errText(fr.p))
	}
	if fr.p.Type != want {
		return fr, fmt.Errorf("%s was answered with %s, want %s", p.Type, fr.p.Type, want)
	}
	if fr.p.RequestID != p.RequestID {
		return fr, fmt.Errorf("%s does not echo request_id (W9): got %q", want, fr.p.RequestID)
	}
	return fr, nil
}

func errText(p *imv2.Packet) string {
	if p.Error == nil {
		return "error packet without error member"
	}
	return string(p.Error.Code) + ": " + clip(p.Error.Message, 80)
}

func cmdHello(r *run, a *args) error {
	card, err := r.ensureCard()
	if err != nil {
		return err
	}
	h := protocol.ConnectorHello{
		ConnectorCardID:   card.ConnectorCardID,
		ProtocolVersion:   r.cfg.HelloVersion,
		SupportedProfiles: []string{imv2.ProfileIMv2},
	}
	if a.flag("resume") {
		h.ConnectorID = r.v.plain["CONNECTOR_ID"]
	}
	p, err := imv2.NewPacket(protocol.TypeConnectorHello, "", h)
	if err != nil {
		return err
	}
	fr, err := r.request(p, protocol.TypeConnectorHelloAck)
	if err != nil {
		return err
	}
	var ack protocol.ConnectorHelloAck
	if err := fr.p.DecodePayload(&ack); err != nil {
		return err
	}
	switch {
	case ack.ConnectorCardID != card.ConnectorCardID:
		return fmt.Errorf("hello.ack connector_card_id %q, want %q (W4)", ack.ConnectorCardID, card.ConnectorCardID)
	case ack.ConnectorID == "":
		return errors.New("hello.ack has no connector_id (W4)")
	}
	if err := ackVersionOK(ack.ProtocolVersion, r.cfg.HelloVersion); err != nil {
		return err
	}
	r.v.set("CONNECTOR_ID", ack.ConnectorID)
	return nil
}

// ackVersionOK checks the hello.ack's protocol_version: the Connector's
// own, major.minor, at least 3.0 and not newer than the hello's (W4); an
// echo of a newer hello is therefore refused only when it is not a
// version the Connector could speak.
func ackVersionOK(ack, hello string) error {
	v, err := protocol.ParseVersion(ack)
	if err != nil {
		return fmt.Errorf("hello.ack protocol_version %q is not major.minor (W4)", ack)
	}
	h, err := protocol.ParseVersion(hello)
	if err != nil {
		return fmt.Errorf("the suite's HelloVersion %q is not major.minor", hello)
	}
	if v.Compare(protocol.Version30) < 0 || v.Compare(h) > 0 {
		return fmt.Errorf("hello.ack protocol_version %s is outside %s–%s, the hello's range (W4)", v, protocol.ProtocolVersion, h)
	}
	return nil
}

func cmdConnect(r *run, a *args) error {
	if err := cmdDial(r, a); err != nil {
		return err
	}
	return cmdHello(r, a)
}

// openAck is the part of channel.open.ack the suite checks.
type openAck struct {
	ConnectorChannelID   string          `json:"connector_channel_id"`
	ConnectionDescriptor json.RawMessage `json:"connection_descriptor"`
}

func cmdOpen(r *run, a *args) error {
	card, err := r.ensureCard()
	if err != nil {
		return err
	}
	pos, err := a.pos()
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("usage: open NAME [reuse] [valid]")
	}
	name, reuse := pos[0], a.flag("reuse")
	requested := ""
	if reuse {
		requested = r.v.plain[name]
		if requested == "" {
			return fmt.Errorf("open %s reuse: $%s is not bound", name, name)
		}
	}
	p, err := imv2.NewPacket(protocol.TypeChannelOpen, requested, nil)
	if err != nil {
		return err
	}
	fr, err := r.request(p, protocol.TypeChannelOpenAck)
	if err != nil {
		return err
	}
	var ack openAck
	if err := fr.p.DecodePayload(&ack); err != nil {
		return err
	}
	id := fr.p.ConnectorChannelID
	switch {
	case id == "":
		return errors.New("channel.open.ack has no envelope connector_channel_id (W5)")
	case ack.ConnectorChannelID != id:
		return fmt.Errorf("channel.open.ack payload.connector_channel_id %q differs from the envelope's %q (W5)", ack.ConnectorChannelID, id)
	case reuse && id != requested:
		return fmt.Errorf("reopening known channel %s returned a new ID %s (W5: a known one is reused)", clip(requested, 30), clip(id, 30))
	case len(ack.ConnectionDescriptor) == 0:
		return errors.New("channel.open.ack has no connection_descriptor (W5)")
	}
	if a.flag("valid") {
		if err := r.checkDescriptor(card, ack.ConnectionDescriptor, id); err != nil {
			return err
		}
	}
	r.v.set(name, id)
	return nil
}

// checkDescriptor validates a Descriptor against the Card (P2, H5) and
// the channel: IM v2 enabled, exactly the intersection the suite's hello
// allowed (P3), for target type im (P1).
func (r *run) checkDescriptor(card *protocol.Card, raw []byte, channel string) error {
	d, err := protocol.DecodeDescriptor(raw, card)
	if err != nil {
		return fmt.Errorf("the Descriptor is invalid: %v", err)
	}
	c := d.Connection
	switch {
	case c.ConnectorChannelID != channel:
		return fmt.Errorf("the Descriptor's connection.connector_channel_id %q, want %q (H5)", c.ConnectorChannelID, channel)
	case r.v.plain["CONNECTOR_ID"] != "" && c.ConnectorID != r.v.plain["CONNECTOR_ID"]:
		return fmt.Errorf("the Descriptor's connection.connector_id %q, want the hello.ack's %q (H5)", c.ConnectorID, r.v.plain["CONNECTOR_ID"])
	case c.TargetType != imv2.TargetTypeIM:
		return fmt.Errorf("the Descriptor's target_type %q, want im (P1)", c.TargetType)
	case !slices.Equal(c.Profiles, []string{imv2.ProfileIMv2}):
		return fmt.Errorf("the Descriptor's connection.profiles %v, want [%s]: the hello offered only it (P2, P3, K1)", c.Profiles, imv2.ProfileIMv2)
	}
	return nil
}

func cmdDescriptor(r *run, a *args) error {
	card, err := r.ensureCard()
	if err != nil {
		return err
	}
	pos, err := a.pos()
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("usage: descriptor CHANNEL_ID")
	}
	p, err := imv2.NewPacket(protocol.TypeDescriptorGet, pos[0], nil)
	if err != nil {
		return err
	}
	fr, err := r.request(p, protocol.TypeDescriptorGetAck)
	if err != nil {
		return err
	}
	var body struct {
		ConnectionDescriptor json.RawMessage `json:"connection_descriptor"`
	}
	if err := fr.p.DecodePayload(&body); err != nil {
		return err
	}
	if len(body.ConnectionDescriptor) == 0 {
		return errors.New("connection.descriptor.get.ack has no connection_descriptor (W7)")
	}
	return r.checkDescriptor(card, body.ConnectionDescriptor, pos[0])
}

func cmdClose(r *run, a *args) error {
	pos, err := a.pos()
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("usage: close CHANNEL_ID")
	}
	p, err := imv2.NewPacket(protocol.TypeChannelClose, pos[0], nil)
	if err != nil {
		return err
	}
	fr, err := r.request(p, protocol.TypeChannelCloseAck)
	if err != nil {
		return err
	}
	if got, _ := walk(fr.doc, "payload.status"); got != "ok" {
		return fmt.Errorf("channel.close.ack status %v, want ok (W6)", got)
	}
	return nil
}

func cmdDisconnect(r *run, _ *args) error {
	if r.peer == nil {
		return errors.New("not connected")
	}
	r.peer.close()
	r.peer = nil
	return nil
}

// ---- HTTP ----------------------------------------------------------------

const maxBody = 8 << 20

// roundTrip sets the Authorization header the auth= option asks for,
// sends req and reads the body (at most maxBody); it fails unless the
// status matches status= (default 200). what names the request in errors.
func roundTrip(r *run, a *args, req *http.Request, what string) (int, []byte, error) {
	auth, _, err := a.opt("auth")
	if err != nil {
		return 0, nil, err
	}
	if err := r.authHeader(req.Header, auth, r.conn.APIKey); err != nil {
		return 0, nil, err
	}
	status, ok, err := a.opt("status")
	if err != nil {
		return 0, nil, err
	}
	if !ok {
		status = "200"
	}
	resp, err := r.httpClient().Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return 0, nil, err
	}
	if !statusMatches(status, resp.StatusCode) {
		return 0, nil, fmt.Errorf("%s: HTTP %d, want %s: %s", what, resp.StatusCode, status, clip(string(body), 80))
	}
	return resp.StatusCode, body, nil
}

func cmdHTTP(r *run, a *args) error {
	pos, err := a.pos()
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return errors.New("usage: http METHOD PATH [auth=none|key|bad] [status=200] [as=NAME] [JSON]")
	}
	req, err := http.NewRequestWithContext(r.ctx, pos[0], r.conn.URL+pos[1], nil)
	if err != nil {
		return err
	}
	_, body, err := roundTrip(r, a, req, pos[0]+" "+pos[1])
	if err != nil {
		return err
	}
	js, err := a.json()
	if err != nil {
		return err
	}
	if js != "" {
		want, err := decodeJSON(js)
		if err != nil {
			return fmt.Errorf("expected JSON: %v", err)
		}
		got, err := decodeJSON(string(body))
		if err != nil {
			return fmt.Errorf("%s %s: body is not JSON: %q", pos[0], pos[1], clip(string(body), 60))
		}
		if m := mismatch(want, got, "body"); m != "" {
			return fmt.Errorf("%s %s: %s", pos[0], pos[1], m)
		}
	}
	if name, ok, err := a.opt("as"); err != nil {
		return err
	} else if ok {
		return r.v.bindDoc(name, body)
	}
	return nil
}

// cmdUpload posts a file of the archive to /files/uploads (T1, M7).
func cmdUpload(r *run, a *args) error {
	pos, err := a.pos()
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("usage: upload NAME [channel=ID|none] [auth=none|key|bad] [status=200] [as=NAME]")
	}
	data, ok := r.check.files[pos[0]]
	if !ok {
		return fmt.Errorf("the archive has no file %q", pos[0])
	}
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, err := mw.CreateFormFile("file", pos[0])
	if err != nil {
		return err
	}
	_, _ = fw.Write(data)
	if err := mw.Close(); err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(r.ctx, http.MethodPost, r.conn.URL+"/files/uploads", &buf)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	channel, ok, err := a.opt("channel")
	if err != nil {
		return err
	}
	if !ok {
		channel = r.defaultChannel()
	}
	if channel != "none" {
		req.Header.Set(xfiles.HeaderChannelID, channel)
	}
	code, body, err := roundTrip(r, a, req, "POST /files/uploads")
	if err != nil {
		return err
	}
	if code/100 != 2 {
		return nil
	}
	var res xfiles.UploadResult
	if err := json.Unmarshal(body, &res); err != nil {
		return fmt.Errorf("POST /files/uploads: body is not the T1 JSON: %v", err)
	}
	switch {
	case res.FileRef == "":
		return errors.New("upload answer has no file_ref (T1)")
	case !res.FileType.Valid():
		return fmt.Errorf("upload answer file_type %q is not image, video, audio or file (T1, M4)", res.FileType)
	case res.ByteSize != int64(len(data)):
		return fmt.Errorf("upload answer byte_size %d, want %d (T1)", res.ByteSize, len(data))
	case res.ExpiresAt <= time.Now().UnixMilli():
		return fmt.Errorf("upload answer expires_at %d is not in the future (T1)", res.ExpiresAt)
	}
	if name, ok, err := a.opt("as"); err != nil {
		return err
	} else if ok {
		return r.v.bindDoc(name, body)
	}
	return nil
}

// cmdFetch downloads a download_url the way xAgent does: no
// Authorization header, a relative URL resolved against the base (M6, T2,
// T3, T4).
func cmdFetch(r *run, a *args) error {
	pos, err := a.pos()
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("usage: fetch URL [status=200] [body=NAME]")
	}
	u, err := xfiles.ResolveDownloadURL(r.conn.URL, pos[0])
	if err != nil {
		return fmt.Errorf("download_url %q: %v (M6)", clip(pos[0], 60), err)
	}
	req, err := http.NewRequestWithContext(r.ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	status, ok, err := a.opt("status")
	if err != nil {
		return err
	}
	if !ok {
		status = "200"
	}
	resp, err := r.httpClient().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return err
	}
	if !statusMatches(status, resp.StatusCode) {
		return fmt.Errorf("GET %s: HTTP %d, want %s (T2, T3)", clip(u.Path, 40), resp.StatusCode, status)
	}
	if resp.StatusCode != http.StatusOK {
		return nil
	}
	if resp.Header.Get("Content-Type") == "" {
		return errors.New("download has no Content-Type (T2)")
	}
	if name, ok, err := a.opt("body"); err != nil {
		return err
	} else if ok {
		want, found := r.check.files[name]
		if !found {
			return fmt.Errorf("the archive has no file %q", name)
		}
		if !bytes.Equal(body, want) {
			return fmt.Errorf("downloaded %d bytes that differ from %s (%d bytes)", len(body), name, len(want))
		}
	}
	return nil
}
