package xmppbridge

// xmpp.go is the XMPP side: the bot's session, what it sends (messages,
// corrections, chat states, uploads) and how it reads conversations.

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"mellium.im/sasl"
	"mellium.im/xmlstream"
	"mellium.im/xmpp"
	"mellium.im/xmpp/dial"
	"mellium.im/xmpp/jid"
	"mellium.im/xmpp/ping"
	"mellium.im/xmpp/upload"

	"github.com/xagentkit/imv2"
)

// Backoff of the session's redial: from redialMin doubling to redialMax.
const (
	redialMin = time.Second
	redialMax = 30 * time.Second
)

// roomSuffix marks a conversation key that is a group chat: the query of
// an XMPP URI that joins a room (RFC 5122, XEP-0147), as in
// "team@conference.example.org?join". Any other key is a contact's bare
// JID, chatted with 1:1.
const roomSuffix = "?join"

// errOffline says the bot's session is not up: nothing was sent.
var errOffline = errors.New("xmpp: not connected to the server")

// peer is where a conversation key's messages go, and their type.
func peer(key string) (to, typ string) {
	if room, ok := strings.CutSuffix(key, roomSuffix); ok {
		return room, "groupchat"
	}
	return key, "chat"
}

// run keeps the bot's one session up until Close, dialing again with
// backoff whenever it drops. Every conversation shares it.
func (br *Bridge) run() {
	defer close(br.done)
	wait := redialMin
	for br.ctx.Err() == nil {
		began := br.cfg.Clock.Now()
		s, ended, err := br.dial(br.ctx)
		if err == nil {
			br.serve(s, ended)
		} else {
			br.cfg.Logger.Warn("xmppbridge: sign-in failed", "jid", br.me.String(), "err", err)
		}
		if br.cfg.Clock.Now().Sub(began) >= redialMax {
			wait = redialMin
		}
		timer := make(chan struct{})
		t := br.cfg.Clock.AfterFunc(wait, func() { close(timer) })
		select {
		case <-timer:
		case <-br.ctx.Done():
			t.Stop()
		}
		wait = min(2*wait, redialMax)
	}
}

// dial connects, secures the stream with STARTTLS, signs in with SCRAM
// (PLAIN only inside TLS), binds a resource, starts reading the stream
// and sends the initial presence, so the server routes the bot's
// messages to it. ended gets the read loop's end.
func (br *Bridge) dial(ctx context.Context) (s *xmpp.Session, ended chan error, err error) {
	ctx, cancel := context.WithTimeout(ctx, br.cfg.DialTimeout)
	defer cancel()
	var conn net.Conn
	if br.cfg.Server != "" {
		conn, err = (&net.Dialer{}).DialContext(ctx, "tcp", br.cfg.Server)
	} else {
		conn, err = dial.Client(ctx, "tcp", br.me)
	}
	if err != nil {
		return nil, nil, err
	}
	tc := br.cfg.TLS.Clone()
	tc.ServerName = cmp.Or(tc.ServerName, br.me.Domainpart())
	s, err = xmpp.NewClientSession(ctx, br.me, conn, xmpp.StartTLS(tc),
		xmpp.SASL("", br.cfg.Password, sasl.ScramSha256, sasl.ScramSha1, sasl.Plain), xmpp.BindResource())
	if err != nil {
		_ = conn.Close()
		return nil, nil, err
	}
	ended = make(chan error, 1)
	go func() { ended <- s.Serve(xmpp.HandlerFunc(br.handle)) }()
	// The ping's answer says the server took the presence: from now on it
	// routes the bot's messages here.
	if err = s.Encode(ctx, presence{}); err == nil {
		err = ping.Send(ctx, s, br.me.Domain())
	}
	if err != nil {
		_ = s.Conn().Close()
		<-ended
		return nil, nil, err
	}
	return s, ended, nil
}

// serve offers s to sends and readers until its stream ends or Close.
func (br *Bridge) serve(s *xmpp.Session, ended chan error) {
	gone := make(chan struct{})
	br.mu.Lock()
	br.s, br.gone = s, gone
	close(br.up)
	br.mu.Unlock()
	stop := context.AfterFunc(br.ctx, func() { _ = s.Close(); _ = s.Conn().Close() })
	err := <-ended
	stop()
	_ = s.Conn().Close()
	br.mu.Lock()
	br.s, br.up = nil, make(chan struct{})
	close(gone)
	br.mu.Unlock()
	if br.ctx.Err() == nil {
		br.cfg.Logger.Warn("xmppbridge: session ended; signing in again", "err", err)
	}
}

// session is the session and a channel closed when it ends; wait waits
// for one to be up, else an offline session is errOffline.
func (br *Bridge) session(ctx context.Context, wait bool) (*xmpp.Session, <-chan struct{}, error) {
	for {
		br.mu.Lock()
		s, up, gone := br.s, br.up, br.gone
		br.mu.Unlock()
		if s != nil {
			return s, gone, nil
		} else if !wait {
			return nil, nil, errOffline
		}
		select {
		case <-up:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-br.done:
			return nil, nil, errOffline
		}
	}
}

// send writes a stanza — none larger than MaxStanzaBytes: a server closes
// the stream of a client that sends one — and, with confirm, waits for the server's answer
// to a ping sent after it: a server handles a stream's stanzas in order,
// so the answer says it took the stanza. An error before it was written
// is not posted; a later one may have been applied.
func (br *Bridge) send(ctx context.Context, confirm bool, v any) error {
	s, _, err := br.session(ctx, false)
	if err != nil {
		return imv2.NotPosted(err)
	}
	if b, err := xml.Marshal(v); err != nil || len(b) > br.cfg.MaxStanzaBytes {
		return imv2.Refused(fmt.Errorf("xmpp: the message is larger than the server takes (%d bytes, MaxStanzaBytes %d) or not XML: %v", len(b), br.cfg.MaxStanzaBytes, err))
	}
	if err := s.Encode(ctx, v); err != nil {
		return imv2.NotPosted(fmt.Errorf("xmpp: send: %w", err))
	}
	if confirm {
		if err := ping.Send(ctx, s, br.me.Domain()); err != nil {
			return fmt.Errorf("xmpp: the server did not confirm the message: %w", err)
		}
	}
	return nil
}

// say sends text to the conversation key as a new message with stanza ID
// id (also its XEP-0359 origin-id), with chat state active.
func (br *Bridge) say(ctx context.Context, key, id, text string) error {
	to, typ := peer(key)
	return br.send(ctx, true, message{ID: id, To: to, Type: typ, Body: text, OriginID: &idAttr{id}, Other: chatStateOf("active")})
}

// correct replaces the text of the message whose stanza ID is orig
// (XEP-0308: every correction names the original message, never an
// earlier correction). Made again, it shows the same text.
func (br *Bridge) correct(ctx context.Context, key, orig, text string) error {
	to, typ := peer(key)
	id := newID()
	return br.send(ctx, true, message{ID: id, To: to, Type: typ, Body: text, Replace: &idAttr{orig}, OriginID: &idAttr{id}})
}

// chatState sends an XEP-0085 chat state (composing, active).
func (br *Bridge) chatState(ctx context.Context, key, name string) error {
	to, typ := peer(key)
	return br.send(ctx, false, message{To: to, Type: typ, Other: chatStateOf(name)})
}

// attach uploads a file with XEP-0363 HTTP File Upload (a slot from the
// upload service, then an HTTP PUT) and sends its URL as a message whose
// body is the URL and whose XEP-0066 out-of-band data names it, the way
// XMPP clients share files. A failed upload has shown nothing.
func (br *Bridge) attach(ctx context.Context, key, id, name, mime string, size int64, r io.Reader) error {
	s, _, err := br.session(ctx, false)
	if err != nil {
		return imv2.NotPosted(err)
	}
	mime = cmp.Or(mime, "application/octet-stream")
	slot, err := upload.GetSlot(ctx, upload.File{Name: name, Size: int(size), Type: mime}, br.upload, s)
	if err != nil {
		return imv2.NotPosted(fmt.Errorf("xmpp: upload slot: %w", err))
	}
	req, err := slot.Put(ctx, r)
	if err != nil {
		return imv2.NotPosted(err)
	}
	req.ContentLength = size
	req.Header.Set("Content-Type", mime)
	resp, err := br.cfg.HTTPClient.Do(req)
	if err != nil {
		return imv2.NotPosted(fmt.Errorf("xmpp: upload: %w", err))
	}
	_ = resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return imv2.NotPosted(fmt.Errorf("xmpp: upload: HTTP %d", resp.StatusCode))
	}
	url := slot.GetURL.String()
	to, typ := peer(key)
	return br.send(ctx, true, message{ID: id, To: to, Type: typ, Body: url, OriginID: &idAttr{id}, OOB: &oob{URL: url}})
}

// fetch downloads an inbound file's URL, at most max bytes, from a host
// of Config.FileHosts only: a URL in a message is the sender's to choose,
// and the Connector must not fetch whatever it names.
func (br *Bridge) fetch(ctx context.Context, rawURL string, max int64) ([]byte, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil || !slices.Contains(br.cfg.FileHosts, req.URL.Host) || (req.URL.Scheme != "https" && req.URL.Scheme != "http") {
		return nil, "", errors.New("xmppbridge: file URL not on an allowed host")
	}
	resp, err := br.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	switch {
	case resp.StatusCode != http.StatusOK:
		return nil, "", fmt.Errorf("xmppbridge: file download: HTTP %d", resp.StatusCode)
	case err != nil:
		return nil, "", err
	case int64(len(data)) > max:
		return nil, "", errors.New("xmppbridge: shared file larger than the file limit")
	}
	return data, resp.Header.Get("Content-Type"), nil
}

// incoming is a person's message of a conversation, as the kit gets it.
type incoming struct {
	// id is the platform's ID of the message: its XEP-0359 stanza-id
	// (given by the bot's server for a 1:1 message, by the room for a
	// group message), the same when the message is delivered again (a
	// room's history on a rejoin); else its origin-id or stanza id.
	id, text string
	url      string // an attached file's URL (XEP-0066 out of band data)
}

// handle reads a message of the stream and hands it to the readers of its
// conversation (the kit runs one per bound channel, Listen; it sends the
// message once per channel). Skipped: errors, messages without a body or
// file (chat states), corrections (the profile has no edit), the bot's
// own messages and a room's messages without an occupant (its subject). A
// conversation with no reader (its channel not open) misses the message.
func (br *Bridge) handle(t xmlstream.TokenReadEncoder, start *xml.StartElement) error {
	var m message
	if start.Name.Local != "message" || xml.NewTokenDecoder(xmlstream.MultiReader(xmlstream.Token(start.Copy()), t)).Decode(&m) != nil {
		return nil // the handler's reader lacks the start a decoder must see
	}
	from, err := jid.Parse(m.From)
	if err != nil || m.Type == "error" || m.Replace != nil || (m.Body == "" && m.OOB == nil) {
		return nil
	}
	key, by := from.Bare().String(), br.me.Bare().String()
	switch {
	case m.Type == "groupchat":
		if from.Resourcepart() == "" || from.Resourcepart() == br.cfg.Nick {
			return nil
		}
		key, by = key+roomSuffix, key
	case from.Bare().Equal(br.me.Bare()):
		return nil
	}
	in := incoming{id: eventID(m, by), text: m.Body}
	if m.OOB != nil && m.OOB.URL != "" {
		in.url = m.OOB.URL
		if in.text == in.url {
			in.text = "" // clients repeat the URL as the body
		}
	}
	br.cfg.Logger.Debug("xmppbridge: message read", "conversation", key, "event", in.id, "delayed", m.Delay != nil)
	br.mu.Lock()
	var readers []chan incoming
	for ch, k := range br.readers {
		if k == key {
			readers = append(readers, ch)
		}
	}
	br.mu.Unlock()
	for _, ch := range readers {
		select {
		case ch <- in:
		case <-br.ctx.Done():
		}
	}
	return nil
}

// eventID is the message's ID: the stanza-id given by by, else the
// sender's origin-id or id, else a random one (never a duplicate).
func eventID(m message, by string) string {
	for _, s := range m.StanzaIDs {
		if s.By == by && s.ID != "" {
			return "sid:" + s.ID
		}
	}
	if m.OriginID != nil && m.OriginID.ID != "" {
		return "oid:" + m.OriginID.ID
	}
	return "id:" + cmp.Or(m.ID, newID())
}

// read reads the conversation key until ctx ends, handing each message to
// deliver, across sessions: a session that drops is waited for again, so
// the kit's reader never ends for it. A group chat is joined on every
// session, with its history since the binding was made: what was said
// since then and not handed over yet reaches the kit, which knows what it
// had (a rejoin replays it with the same stanza-ids).
func (br *Bridge) read(ctx context.Context, key string, since time.Time, deliver func(context.Context, incoming) error) error {
	ch := make(chan incoming, 64)
	br.mu.Lock()
	br.readers[ch] = key
	br.mu.Unlock()
	defer func() {
		br.mu.Lock()
		delete(br.readers, ch)
		br.mu.Unlock()
	}()
	for {
		s, gone, err := br.session(ctx, true)
		if err != nil {
			return err
		}
		if room, typ := peer(key); typ == "groupchat" {
			join := presence{To: room + "/" + br.cfg.Nick, MUC: &mucJoin{History: &history{Since: since.UTC().Format(time.RFC3339)}}}
			if err := s.Encode(ctx, join); err != nil {
				return err
			}
		}
		br.readyOnce.Do(func() { close(br.ready) })
	recv:
		for {
			select {
			case in := <-ch:
				if err := deliver(ctx, in); err != nil {
					br.cfg.Logger.Warn("xmppbridge: message not handed to xAgent", "conversation", key, "err", err)
				}
			case <-gone:
				break recv
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
}

// Ready waits until the bot is signed in and the messages of a bound
// conversation are read: xAgent opened a channel. A 1:1 message sent
// before misses it (the bridge does not read the server's archive).
func (br *Bridge) Ready(ctx context.Context) error {
	select {
	case <-br.ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// newID is a random stanza ID.
func newID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}
