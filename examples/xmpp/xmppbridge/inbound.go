package xmppbridge

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"sync"
	"time"

	"mellium.im/xmpp/jid"
)

// roomSuffix marks a conversation key that is a group chat: the query of
// an XMPP URI that joins a room (RFC 5122, XEP-0147), as in
// "team@conference.example.org?join". Any other key is a contact's bare
// JID, chatted with 1:1.
const roomSuffix = "?join"

// peer is where a conversation key's messages go, and their type.
func peer(key string) (to, typ string) {
	if room, ok := strings.CutSuffix(key, roomSuffix); ok {
		return room, "groupchat"
	}
	return key, "chat"
}

// incoming is a person's message of a conversation, as the kit gets it.
type incoming struct {
	// id is the platform's ID of the message: its XEP-0359 stanza-id
	// (given by the bot's server for a 1:1 message, by the room for a
	// group message), the same when the message is delivered again (a
	// room's history on a rejoin); else its origin-id or stanza id.
	id   string
	text string
	url  string // an attached file's URL (XEP-0066 out of band data)
}

// listeners are the readers of conversations: the kit runs one per bound
// channel (Listen), and the session hands each message of a conversation
// to every reader of it (the kit sends it once per channel).
type listeners struct {
	mu    sync.Mutex
	by    map[string]map[chan incoming]struct{}
	ready chan struct{} // closed once a reader runs
}

func newListeners() *listeners {
	return &listeners{by: map[string]map[chan incoming]struct{}{}, ready: make(chan struct{})}
}

func (ls *listeners) add(key string, ch chan incoming) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	select {
	case <-ls.ready:
	default:
		close(ls.ready)
	}
	if ls.by[key] == nil {
		ls.by[key] = map[chan incoming]struct{}{}
	}
	ls.by[key][ch] = struct{}{}
}

func (ls *listeners) remove(key string, ch chan incoming) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	delete(ls.by[key], ch)
	if len(ls.by[key]) == 0 {
		delete(ls.by, key)
	}
}

func (ls *listeners) of(key string) []chan incoming {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	out := make([]chan incoming, 0, len(ls.by[key]))
	for ch := range ls.by[key] {
		out = append(out, ch)
	}
	return out
}

// route hands a message the session read to the readers of its
// conversation. Skipped: errors, messages without a body or file (chat
// states), corrections (the profile has no edit), the bot's own messages
// and a room's messages without an occupant (its subject, notices). A
// conversation with no reader (its channel not open) misses the message.
func (br *Bridge) route(m message) {
	from, err := jid.Parse(m.From)
	if err != nil || m.Type == "error" || m.Replace != nil || (m.Body == "" && m.OOB == nil) {
		return
	}
	key, by := from.Bare().String(), br.me.Bare().String()
	switch {
	case m.Type == "groupchat":
		if from.Resourcepart() == "" || from.Resourcepart() == br.cfg.Nick {
			return
		}
		key, by = key+roomSuffix, key
	case from.Bare().Equal(br.me.Bare()):
		return
	}
	in := incoming{id: eventID(m, by), text: m.Body}
	if m.OOB != nil && m.OOB.URL != "" {
		in.url = m.OOB.URL
		if in.text == in.url {
			in.text = "" // clients repeat the URL as the body
		}
	}
	br.cfg.Logger.Debug("xmppbridge: message read", "conversation", key, "event", in.id, "delayed", m.Delay != nil)
	readers := br.readers.of(key)
	if len(readers) == 0 {
		br.cfg.Logger.Debug("xmppbridge: message of a conversation no open channel is bound to; dropped", "conversation", key)
	}
	for _, ch := range readers {
		select {
		case ch <- in:
		case <-br.ctx.Done():
			return
		}
	}
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
	if m.ID != "" {
		return "id:" + m.ID
	}
	return "rnd:" + newID()
}

// read reads the conversation key until ctx ends or the session does,
// handing each message to deliver. A group chat is joined first, with its
// history since the binding was made: what was said since then and not
// handed over yet reaches the kit, which knows what it had (a rejoin
// after a restart or a lost session replays it with the same stanza-ids).
func (br *Bridge) read(ctx context.Context, key string, since time.Time, deliver func(context.Context, incoming) error) error {
	s, gone, err := br.link.session(ctx)
	if err != nil {
		return err
	}
	ch := make(chan incoming, 64)
	br.readers.add(key, ch)
	defer br.readers.remove(key, ch)
	if room, typ := peer(key); typ == "groupchat" {
		join := presence{To: room + "/" + br.cfg.Nick, MUC: &mucJoin{History: &history{Since: since.UTC().Format(time.RFC3339)}}}
		if err := s.Encode(ctx, join); err != nil {
			return err
		}
	}
	for {
		select {
		case in := <-ch:
			if err := deliver(ctx, in); err != nil {
				br.cfg.Logger.Warn("xmppbridge: message not handed to xAgent", "conversation", key, "err", err)
			}
		case <-gone:
			return errOffline
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// newID is a random stanza ID.
func newID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// Ready waits until the bot is signed in and the messages of a bound
// conversation are read: xAgent opened a channel. A 1:1 message sent
// before misses it (the bridge does not read the server's archive).
func (br *Bridge) Ready(ctx context.Context) error {
	select {
	case <-br.readers.ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
