package xmppbridge

// room.go joins group chats (XEP-0045) and follows the room's answer: the
// bot's own presence confirms the join; a nick someone else holds is
// answered by joining under another; any other refusal is a readiness
// reason until a later join succeeds.

import (
	"context"
	"encoding/xml"
	"fmt"
	"time"

	"mellium.im/xmpp"
	"mellium.im/xmpp/jid"
)

// rejoinAfter is how long a reader waits before it joins a room again
// that refused it, or that the bot left (kicked, the room closed).
const rejoinAfter = 30 * time.Second

// roomState is what the bridge knows of its presence in one room.
type roomState struct {
	nick   string    // the nick the bot joins as
	joined bool      // the room confirmed the bot's presence (status 110)
	reason string    // why the bot is not in the room; "" while it waits for the answer
	since  time.Time // the history asked for on join
	at     time.Time // of the last join sent
}

// presenceIn is a presence the bot gets: a room's answer to its join.
type presenceIn struct {
	From  string `xml:"from,attr"`
	Type  string `xml:"type,attr"`
	Error *struct {
		Conditions []struct {
			XMLName xml.Name
		} `xml:",any"`
	} `xml:"error"`
	User *struct {
		Status []struct {
			Code string `xml:"code,attr"`
		} `xml:"status"`
	} `xml:"http://jabber.org/protocol/muc#user x"`
}

// self reports whether the presence is the room's presence of the bot
// itself (status code 110).
func (p presenceIn) self() bool {
	if p.User != nil {
		for _, s := range p.User.Status {
			if s.Code == "110" {
				return true
			}
		}
	}
	return false
}

// condition is the error's defined condition (RFC 6120, 8.3.3).
func (p presenceIn) condition() string {
	if p.Error != nil {
		for _, c := range p.Error.Conditions {
			if c.XMLName.Space == "urn:ietf:params:xml:ns:xmpp-stanzas" && c.XMLName.Local != "text" {
				return c.XMLName.Local
			}
		}
	}
	return "unknown error"
}

// joinPresence is the presence that joins roomJID as nick, asking for
// the history since the time given.
func joinPresence(roomJID, nick string, since time.Time) presence {
	return presence{To: roomJID + "/" + nick, MUC: &mucJoin{History: &history{Since: since.UTC().Format(time.RFC3339)}}}
}

// join sends the room's join (on every session: a room forgets the bot
// with its session) under the nick the bot has there.
func (br *Bridge) join(ctx context.Context, s *xmpp.Session, roomJID string, since time.Time) error {
	br.mu.Lock()
	r := br.rooms[roomJID]
	if r == nil {
		r = &roomState{nick: br.cfg.Nick}
		br.rooms[roomJID] = r
	}
	r.joined, r.reason, r.since, r.at = false, "", since, br.cfg.Clock.Now()
	p := joinPresence(roomJID, r.nick, since)
	br.changedLocked()
	br.mu.Unlock()
	return s.Encode(ctx, p)
}

// rejoinDue reports whether the bot should join roomJID again: it is not
// in the room, and the last join is rejoinAfter old.
func (br *Bridge) rejoinDue(roomJID string) bool {
	br.mu.Lock()
	defer br.mu.Unlock()
	r := br.rooms[roomJID]
	return r != nil && !r.joined && br.cfg.Clock.Now().Sub(r.at) >= rejoinAfter
}

// nickOf is the bot's nick in roomJID.
func (br *Bridge) nickOf(roomJID string) string {
	br.mu.Lock()
	defer br.mu.Unlock()
	if r := br.rooms[roomJID]; r != nil {
		return r.nick
	}
	return br.cfg.Nick
}

// onPresence follows a room's answer to the bot's join. A nick held by
// another occupant (conflict) is answered at once by a join under the
// configured nick with a random suffix, which a squatter cannot take
// ahead: a room where the bot cannot speak under its nick is better than
// one it cannot hear at all.
func (br *Bridge) onPresence(p presenceIn) {
	from, err := jid.Parse(p.From)
	if err != nil {
		return
	}
	roomJID := from.Bare().String()
	br.mu.Lock()
	defer br.mu.Unlock()
	r := br.rooms[roomJID]
	if r == nil || from.Resourcepart() != r.nick && !p.self() {
		return // another occupant's presence
	}
	switch {
	case p.Type == "error" && p.condition() == "conflict":
		taken := r.nick
		r.nick = br.cfg.Nick + "-" + newID()[:6]
		r.reason, r.at = "nick "+taken+" taken; joining as "+r.nick, br.cfg.Clock.Now()
		br.cfg.Logger.Warn("xmppbridge: the bot's nick is taken in the room; joining under another", "room", roomJID, "taken", taken, "nick", r.nick)
		br.sendJoinLocked(joinPresence(roomJID, r.nick, r.since))
	case p.Type == "error":
		r.joined, r.reason = false, "the room refused the join: "+p.condition()
		br.cfg.Logger.Warn("xmppbridge: the room refused the bot; joining again later", "room", roomJID, "nick", r.nick, "condition", p.condition(), "in", rejoinAfter)
	case p.Type == "unavailable" && p.self():
		r.joined, r.reason, r.at = false, "the bot is no longer in the room (kicked, or the room closed)", br.cfg.Clock.Now()
		br.cfg.Logger.Warn("xmppbridge: the bot left the room; joining again later", "room", roomJID, "in", rejoinAfter)
	case p.self():
		if !r.joined {
			br.cfg.Logger.Info("xmppbridge: joined the room", "room", roomJID, "nick", from.Resourcepart())
		}
		r.nick, r.joined, r.reason = from.Resourcepart(), true, ""
	default:
		return
	}
	br.changedLocked()
}

// sendJoinLocked sends a join on the current session from a goroutine
// of its own: the session's handler, which asks for it, must not wait on
// its own stream. Under br.mu.
func (br *Bridge) sendJoinLocked(p presence) {
	s := br.s
	if s == nil {
		return // the next session joins again
	}
	br.wg.Add(1)
	go func() {
		defer br.wg.Done()
		ctx, cancel := context.WithTimeout(br.ctx, br.cfg.DialTimeout)
		defer cancel()
		if err := s.Encode(ctx, p); err != nil {
			br.cfg.Logger.Warn("xmppbridge: room join not sent", "room", p.To, "err", err)
		}
	}()
}

// roomsNotJoined says which rooms read by a running reader the bot is
// not in, and why; under br.mu.
func (br *Bridge) roomsNotJoinedLocked() error {
	for _, key := range br.readers {
		roomJID, typ := peer(key)
		if typ != "groupchat" {
			continue
		}
		if r := br.rooms[roomJID]; r == nil || !r.joined {
			reason := "waiting for the room's answer"
			if r != nil && r.reason != "" {
				reason = r.reason
			}
			return fmt.Errorf("xmpp: room %s not joined: %s", roomJID, reason)
		}
	}
	return nil
}
