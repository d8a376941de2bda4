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
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/xfiles"

	"mellium.im/sasl"
	"mellium.im/xmlstream"
	"mellium.im/xmpp"
	"mellium.im/xmpp/dial"
	"mellium.im/xmpp/jid"
	"mellium.im/xmpp/ping"
	"mellium.im/xmpp/upload"
)

// Backoff of the session's redial: from redialMin doubling to redialMax,
// so the bot is back within a few seconds of a server restart.
const (
	redialMin = 500 * time.Millisecond
	redialMax = 4 * time.Second
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
// backoff whenever it drops. Every conversation shares it. A server that
// refuses the bot's credentials ends it: signing in again with the same
// password cannot succeed, and a retry loop would only hide the cause.
func (br *Bridge) run() {
	defer close(br.done)
	wait := redialMin
	for br.ctx.Err() == nil {
		began := br.cfg.Clock.Now()
		s, ended, err := br.dial(br.ctx)
		br.signedIn(err)
		if err == nil {
			br.serve(s, ended)
		} else if cond, ok := refusedCredentials(err); ok {
			br.mu.Lock()
			br.refused = fmt.Errorf("xmpp: the server refused the credentials of %s (%s): check the password", br.me.Bare(), cond)
			br.changedLocked()
			br.mu.Unlock()
			br.cfg.Logger.Error("xmppbridge: the server refused the bot's credentials; not signing in again", "jid", br.me.Bare().String(), "condition", cond)
			return
		} else if br.ctx.Err() == nil {
			br.cfg.Logger.Warn("xmppbridge: sign-in failed", "jid", br.me.String(), "err", err, "in", wait)
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

// signedIn records a sign-in's outcome for Ready and SignIn.
func (br *Bridge) signedIn(err error) {
	br.mu.Lock()
	defer br.mu.Unlock()
	br.lastErr = err
	if br.tried != nil {
		close(br.tried)
		br.tried = nil
	}
}

// refusedCredentials reports whether err is the server's SASL refusal of
// the bot's credentials (RFC 6120, 6.5), and its condition. A temporary
// failure is not one.
func refusedCredentials(err error) (string, bool) {
	for _, e := range unwrapAll(err) {
		v := reflect.ValueOf(e)
		if v.Kind() != reflect.Struct || v.Type().PkgPath() != "mellium.im/xmpp/internal/saslerr" || v.Type().Name() != "Error" {
			continue
		}
		cond := fmt.Sprint(v.FieldByName("Condition").Interface())
		switch cond {
		case "not-authorized", "account-disabled", "credentials-expired", "invalid-authzid":
			return cond, true
		}
	}
	return "", false
}

// unwrapAll is err and every error it wraps.
func unwrapAll(err error) []error {
	var out []error
	for stack := []error{err}; len(stack) > 0; {
		e := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if e == nil {
			continue
		}
		out = append(out, e)
		switch w := e.(type) {
		case interface{ Unwrap() error }:
			stack = append(stack, w.Unwrap())
		case interface{ Unwrap() []error }:
			stack = append(stack, w.Unwrap()...)
		}
	}
	return out
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
	br.changedLocked()
	br.mu.Unlock()
	stop := context.AfterFunc(br.ctx, func() { _ = s.Close(); _ = s.Conn().Close() })
	err := <-ended
	stop()
	_ = s.Conn().Close()
	br.mu.Lock()
	br.s, br.up = nil, make(chan struct{})
	for _, r := range br.rooms {
		r.joined, r.reason = false, "" // the room forgets the bot with its session
	}
	close(gone)
	br.changedLocked()
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

// fileClient is the download client of inbound files: cfg.HTTPClient on
// xfiles' guard (public addresses only unless PrivateFileHosts, no
// proxy), following a redirect only to a host of FileHosts.
func fileClient(cfg Config) (*http.Client, error) {
	c := *cfg.HTTPClient
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if !slices.Contains(cfg.FileHosts, req.URL.Host) {
			return fmt.Errorf("%w: a redirect to %s, not a file host", errFileURL, req.URL.Host)
		}
		return nil
	}
	var trusted []string
	if cfg.PrivateFileHosts {
		for _, h := range cfg.FileHosts {
			if _, _, err := net.SplitHostPort(h); err == nil {
				trusted = append(trusted, h)
			} else {
				trusted = append(trusted, net.JoinHostPort(h, "80"), net.JoinHostPort(h, "443"))
			}
		}
	}
	fc, err := xfiles.GuardedClient(&c, trusted...)
	if err != nil {
		return nil, fmt.Errorf("xmppbridge: Config.HTTPClient: %w", err)
	}
	return fc, nil
}

// errFileURL refuses an inbound file's URL.
var errFileURL = errors.New("xmppbridge: file URL not on an allowed host")

// fetch downloads an inbound file's URL, at most max bytes, from a host
// of Config.FileHosts only, every redirect hop included: a URL in a
// message is the sender's to choose, and the Connector must not fetch
// whatever it names.
func (br *Bridge) fetch(ctx context.Context, rawURL string, max int64) ([]byte, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil || !slices.Contains(br.cfg.FileHosts, req.URL.Host) || (req.URL.Scheme != "https" && req.URL.Scheme != "http") {
		return nil, "", errFileURL
	}
	resp, err := br.files.Do(req)
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
	// room's history on a rejoin, the archive's copy); else its
	// origin-id or stanza id.
	id, text string
	url      string // an attached file's URL (XEP-0066 out of band data)
	// arch is the archive's ID of the message (its stanza-id), "" when
	// the server did not archive it.
	arch string
	from string // the sender: a room occupant's nick; "" in a 1:1 chat
	skip bool   // read from the archive, and no person's message: not for the kit
}

// handle reads a stanza of the stream. A person's message goes to the
// readers of its conversation (the kit runs one per bound channel,
// Listen; it sends the message once per channel) without waiting for
// them: each holds what it can and reads the rest from the archive (see
// queue). A result of an archive query goes to the query; a room's
// answer to the bot's join to the room's state. Skipped: errors,
// messages without a body or file (chat states), corrections (the
// profile has no edit), the bot's own messages and a room's messages
// without an occupant (its subject). A conversation with no reader (its
// channel not open) misses the message.
func (br *Bridge) handle(t xmlstream.TokenReadEncoder, start *xml.StartElement) error {
	d := xml.NewTokenDecoder(xmlstream.MultiReader(xmlstream.Token(start.Copy()), t))
	switch start.Name.Local {
	case "presence":
		var p presenceIn
		if d.Decode(&p) == nil {
			br.onPresence(p)
		}
		return nil
	case "message":
	default:
		return nil
	}
	var m message
	if d.Decode(&m) != nil {
		return nil // the handler's reader lacks the start a decoder must see
	}
	if m.Result != nil {
		br.archived(m.From, m.Result)
		return nil
	}
	in, key, ok := br.incomingOf(m)
	if !ok {
		return nil
	}
	br.cfg.Logger.Debug("xmppbridge: message read", "conversation", key, "event", in.id, "delayed", m.Delay != nil)
	br.mu.Lock()
	var readers []*queue
	for q, k := range br.readers {
		if k == key {
			readers = append(readers, q)
		}
	}
	br.mu.Unlock()
	for _, q := range readers {
		if !q.add(in) {
			br.cfg.Logger.Warn("xmppbridge: user message dropped: the reader holds its bound and the server keeps no archive to read it from", "conversation", key, "event", in.id, "sender_queue", occupantQueue, "reader_queue", readerQueue)
		}
	}
	return nil
}

// incomingOf is a message as the kit gets it and the conversation key it
// belongs to; ok is false for what the kit does not get (see handle).
func (br *Bridge) incomingOf(m message) (in incoming, key string, ok bool) {
	from, err := jid.Parse(m.From)
	if err != nil || m.Type == "error" || m.Replace != nil || (m.Body == "" && m.OOB == nil) {
		return in, "", false
	}
	key, by := from.Bare().String(), br.me.Bare().String()
	switch {
	case m.Type == "groupchat":
		if from.Resourcepart() == "" || from.Resourcepart() == br.nickOf(key) {
			return in, "", false
		}
		in.from = from.Resourcepart()
		key, by = key+roomSuffix, key
	case from.Bare().Equal(br.me.Bare()):
		return in, "", false
	}
	in.id, in.arch, in.text = eventID(m, by), archiveID(m, by), m.Body
	if m.OOB != nil && m.OOB.URL != "" {
		in.url = m.OOB.URL
		if in.text == in.url {
			in.text = "" // clients repeat the URL as the body
		}
	}
	return in, key, true
}

// archiveID is the ID the archive by gave the message: its XEP-0359
// stanza-id by it, the last one. A server appends its own after the
// message's content, and Prosody 0.12 keeps a sender's <stanza-id/>
// naming the bot's JID beside it (it strips it from its own copy only):
// the first would be the sender's forgery, which could make another
// message a duplicate (dropped) at will.
func archiveID(m message, by string) string {
	id := ""
	for _, s := range m.StanzaIDs {
		if s.By == by && s.ID != "" {
			id = s.ID
		}
	}
	return id
}

// eventID is the message's ID: the stanza-id given by by, else the
// sender's origin-id or id, else a random one (never a duplicate).
func eventID(m message, by string) string {
	if id := archiveID(m, by); id != "" {
		return "sid:" + id
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
//
// A message the kit cannot take yet (the channel's pending store is full:
// xAgent does not ack) is waited for by the kit's Inbox.Receive: the
// reader waits, and drops nothing. Meanwhile the stream's messages are held in a queue
// with a share per sender (a room occupant's flood fills its own share);
// what a full share cannot hold is read from the server's archive
// (XEP-0313) once the reader has room for it.
func (br *Bridge) read(ctx context.Context, key string, since time.Time, deliver func(context.Context, incoming) error) error {
	q := newQueue()
	br.mu.Lock()
	br.readers[q] = key
	br.changedLocked()
	br.mu.Unlock()
	defer func() {
		br.mu.Lock()
		delete(br.readers, q)
		br.changedLocked()
		br.mu.Unlock()
	}()
	roomJID, typ := peer(key)
	for {
		s, gone, err := br.session(ctx, true)
		if err != nil {
			return err
		}
		if typ == "groupchat" {
			if err := br.join(ctx, s, roomJID, since); err != nil {
				return err
			}
		}
	recv:
		for {
			if in, ok := q.next(); ok {
				// The kit waits while the channel's pending store is
				// full (Inbox.Receive), so this returns only once the
				// message is pending, refused for good, or ctx ended.
				if err := deliver(ctx, in); ctx.Err() != nil {
					return ctx.Err()
				} else if err != nil {
					br.cfg.Logger.Warn("xmppbridge: message not handed to xAgent", "conversation", key, "event", in.id, "err", err)
				}
				continue
			}
			if after, due := q.scanDue(); due {
				if err := br.catchUp(ctx, s, key, q, after, since); err != nil {
					if ctx.Err() != nil {
						return ctx.Err()
					}
					br.cfg.Logger.Warn("xmppbridge: catch-up from the archive failed; trying again on the next session", "conversation", key, "err", err)
					select {
					case <-gone:
					case <-ctx.Done():
						return ctx.Err()
					}
					break recv
				}
				continue
			}
			rejoin, stop := br.rejoinTimer(typ, roomJID)
			select {
			case <-q.wake:
			case <-rejoin:
				if br.rejoinDue(roomJID) {
					if err := br.join(ctx, s, roomJID, since); err != nil {
						br.cfg.Logger.Warn("xmppbridge: room join not sent", "room", roomJID, "err", err)
					}
				}
			case <-gone:
				stop()
				break recv
			case <-ctx.Done():
				stop()
				return ctx.Err()
			}
			stop()
		}
	}
}

// rejoinTimer fires when a room the bot is not in is due for a join
// again; nil (and a no-op stop) for a 1:1 chat or a room it is in.
func (br *Bridge) rejoinTimer(typ, roomJID string) (<-chan struct{}, func()) {
	br.mu.Lock()
	r := br.rooms[roomJID]
	br.mu.Unlock()
	if typ != "groupchat" || r == nil || br.inRoom(roomJID) {
		return nil, func() {}
	}
	fired := make(chan struct{})
	t := br.cfg.Clock.AfterFunc(rejoinAfter, func() { close(fired) })
	return fired, func() { t.Stop() }
}

// inRoom reports whether the room confirmed the bot's presence.
func (br *Bridge) inRoom(roomJID string) bool {
	br.mu.Lock()
	defer br.mu.Unlock()
	r := br.rooms[roomJID]
	return r != nil && r.joined
}

// catchUp reads one page of the archive after after into q. A refusing
// archive ends the catch-up: the messages it should have given are lost,
// and said so.
func (br *Bridge) catchUp(ctx context.Context, s *xmpp.Session, key string, q *queue, after string, since time.Time) error {
	page, complete, err := br.fetchArchive(ctx, s, key, after, since)
	if errors.Is(err, errArchiveRefused) {
		n := q.refused()
		br.cfg.Logger.Error("xmppbridge: the server's archive refused a catch-up; messages it holds are not handed to xAgent", "conversation", key, "senders", n, "err", err)
		return nil
	} else if err != nil {
		return err
	}
	br.cfg.Logger.Debug("xmppbridge: messages read from the archive", "conversation", key, "count", len(page), "complete", complete)
	if lost := q.scanned(page, complete); lost > 0 {
		br.cfg.Logger.Error("xmppbridge: messages not held were not found in the archive; they are not handed to xAgent", "conversation", key, "senders", lost)
	}
	return nil
}

// Ready reports whether the bridge can serve now (the kit's /readyz asks
// it): the bot is signed in to the server, and in every room a reader
// reads. Its error says what is wrong: the server unreachable (with the
// last sign-in's error), the credentials refused, a room not joined (and
// why). It never waits: xAgent's absence (no channel open, no reader) is
// not the bridge's failure.
func (br *Bridge) Ready(context.Context) error {
	br.mu.Lock()
	defer br.mu.Unlock()
	switch {
	case br.refused != nil:
		return br.refused
	case br.ctx.Err() != nil:
		return errors.New("xmpp: closed")
	case br.s == nil && br.lastErr != nil:
		return fmt.Errorf("xmpp: not signed in to the server: %v", br.lastErr)
	case br.s == nil:
		return errors.New("xmpp: signing in to the server")
	}
	return br.roomsNotJoinedLocked()
}

// Reading waits until a reader of a bound conversation runs on a live
// session (xAgent opened a channel) and, for a room, the room confirmed
// the bot's join; it fails early with the reason when the server refused
// the bot's credentials.
func (br *Bridge) Reading(ctx context.Context) error {
	for {
		br.mu.Lock()
		changed := br.changed
		ok := br.s != nil && len(br.readers) > 0 && br.roomsNotJoinedLocked() == nil
		refused := br.refused
		br.mu.Unlock()
		switch {
		case refused != nil:
			return refused
		case ok:
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// SignIn waits for the outcome of the bot's first sign-in and returns the
// server's refusal of its credentials, if it refused them; nil when it
// signed in or could not reach the server (the bridge keeps trying).
func (br *Bridge) SignIn(ctx context.Context) error {
	br.mu.Lock()
	tried := br.tried
	br.mu.Unlock()
	if tried != nil {
		select {
		case <-tried:
		case <-ctx.Done():
			return ctx.Err()
		case <-br.done:
		}
	}
	br.mu.Lock()
	defer br.mu.Unlock()
	return br.refused
}

// changedLocked wakes whoever waits for a change of the session, the
// readers or a room (Reading); under br.mu.
func (br *Bridge) changedLocked() {
	close(br.changed)
	br.changed = make(chan struct{})
}

// newID is a random stanza ID.
func newID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}
