//go:build unix

package e2e

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"mellium.im/sasl"
	"mellium.im/xmlstream"
	"mellium.im/xmpp"
	"mellium.im/xmpp/jid"
	"mellium.im/xmpp/upload"
)

// waitTimeout bounds every wait for something to show up.
const waitTimeout = 60 * time.Second

// seen is a message stanza as the user's client reads it, with the time
// it arrived.
type seen struct {
	XMLName xml.Name `xml:"jabber:client message"`
	ID      string   `xml:"id,attr"`
	From    string   `xml:"from,attr"`
	Type    string   `xml:"type,attr"`
	Body    *string  `xml:"body"`
	Replace *struct {
		ID string `xml:"id,attr"`
	} `xml:"urn:xmpp:message-correct:0 replace"`
	Composing *struct{} `xml:"http://jabber.org/protocol/chatstates composing"`
	Active    *struct{} `xml:"http://jabber.org/protocol/chatstates active"`
	OOB       *struct {
		URL string `xml:"url"`
	} `xml:"jabber:x:oob x"`
	Delay *struct{} `xml:"urn:xmpp:delay delay"`
	At    time.Time `xml:"-"`
}

func (m seen) body() string {
	if m.Body == nil {
		return ""
	}
	return *m.Body
}

// user is a person's XMPP client: alice signed in over the real server,
// recording every message stanza she gets.
type client struct {
	t    *testing.T
	s    *xmpp.Session
	done chan struct{}
	next atomic.Int64

	mu    sync.Mutex
	msgs  []seen
	press []seenPresence
}

// seenPresence is a presence stanza the user's client got: a room
// occupant joining (or leaving, type unavailable).
type seenPresence struct {
	XMLName xml.Name `xml:"jabber:client presence"`
	From    string   `xml:"from,attr"`
	Type    string   `xml:"type,attr"`
}

func newUser(t *testing.T, p *prosody) *client {
	t.Helper()
	return newUserAs(t, p, aliceJID, alicePass)
}

// newUserAs signs in as another account of the server.
func newUserAs(t *testing.T, p *prosody, account, password string) *client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", p.c2s)
	require.NoError(t, err)
	s, err := xmpp.NewClientSession(ctx, jid.MustParse(account), conn,
		xmpp.StartTLS(p.tls()), xmpp.SASL("", password, sasl.ScramSha1), xmpp.BindResource())
	require.NoError(t, err)
	u := &client{t: t, s: s, done: make(chan struct{})}
	go func() {
		defer close(u.done)
		_ = s.Serve(xmpp.HandlerFunc(func(r xmlstream.TokenReadEncoder, start *xml.StartElement) error {
			if start.Name.Local == "presence" {
				var pr seenPresence
				if err := xml.NewTokenDecoder(xmlstream.MultiReader(xmlstream.Token(*start), r)).Decode(&pr); err == nil {
					u.mu.Lock()
					u.press = append(u.press, pr)
					u.mu.Unlock()
				}
				return nil
			}
			if start.Name.Local != "message" {
				return nil
			}
			var m seen
			if err := xml.NewTokenDecoder(xmlstream.MultiReader(xmlstream.Token(*start), r)).Decode(&m); err != nil && !errors.Is(err, io.EOF) {
				return nil
			}
			m.At = time.Now()
			u.mu.Lock()
			u.msgs = append(u.msgs, m)
			u.mu.Unlock()
			return nil
		}))
	}()
	t.Cleanup(func() {
		_ = s.Close()
		_ = s.Conn().Close()
		<-u.done
	})
	u.send(struct {
		XMLName xml.Name `xml:"jabber:client presence"`
	}{})
	return u
}

// send writes a stanza. Its context is never cancelled: mellium's
// Encode arms a goroutine that, when the context ends, sets the
// connection's write deadline in the past; cancelled right after the
// call returns, it can fire during the next call's write (seen: "write
// tcp …: i/o timeout" in a flood under -race). The test's own timeout
// bounds a write that hangs.
func (u *client) send(v any) {
	u.t.Helper()
	require.NoError(u.t, u.s.Encode(context.Background(), v))
}

// out is a message alice sends.
type out struct {
	XMLName  xml.Name `xml:"jabber:client message"`
	ID       string   `xml:"id,attr"`
	To       string   `xml:"to,attr"`
	Type     string   `xml:"type,attr"`
	Body     string   `xml:"body,omitempty"`
	OriginID struct {
		ID string `xml:"id,attr"`
	} `xml:"urn:xmpp:sid:0 origin-id"`
	OOB *struct {
		URL string `xml:"url"`
	} `xml:"jabber:x:oob x"`
}

// say sends text to a JID (type chat, or groupchat for a room) and returns
// when it was sent.
func (u *client) say(to, typ, text string) time.Time {
	u.t.Helper()
	id := "alice-" + strconv.FormatInt(u.next.Add(1), 10)
	m := out{ID: id, To: to, Type: typ, Body: text}
	m.OriginID.ID = id
	at := time.Now()
	u.send(m)
	return at
}

// join enters a room as nick.
func (u *client) join(room, nick string) {
	u.t.Helper()
	u.send(struct {
		XMLName xml.Name `xml:"jabber:client presence"`
		To      string   `xml:"to,attr"`
		X       struct{} `xml:"http://jabber.org/protocol/muc x"`
	}{To: room + "/" + nick})
}

// from returns the messages alice got whose sender starts with prefix (a
// bare JID, or a room occupant's full JID), in order.
func (u *client) from(sender string) []seen {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []seen
	for _, m := range u.msgs {
		if f, err := jid.Parse(m.From); err == nil && (f.Bare().String() == sender || f.String() == sender) {
			out = append(out, m)
		}
	}
	return out
}

// presences returns the presences alice got from a full JID (a room
// occupant), in order.
func (u *client) presences(from string) []seenPresence {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []seenPresence
	for _, p := range u.press {
		if p.From == from {
			out = append(out, p)
		}
	}
	return out
}

func (u *client) waitFor(what string, cond func() bool) {
	u.t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			u.mu.Lock()
			var got strings.Builder
			for _, m := range u.msgs {
				fmt.Fprintf(&got, "\n  %s id=%s type=%s body=%q replace=%v composing=%v active=%v oob=%v", m.From, m.ID, m.Type, m.body(), m.Replace, m.Composing != nil, m.Active != nil, m.OOB)
			}
			u.t.Fatalf("alice never saw %s; she got:%s", what, got.String())
		}
		time.Sleep(10 * time.Millisecond) // polling another process's output, not timing
	}
}

// thread is what alice's client shows of the bot's messages: each message
// with a body that is no correction, its text replaced by its last
// correction (XEP-0308), and the number of corrections it got.
type shown struct {
	ID          string
	Text        string
	URL         string
	Corrections int
	FirstAt     time.Time
	LastAt      time.Time
}

func thread(msgs []seen) []shown {
	var out []shown
	idx := map[string]int{}
	for _, m := range msgs {
		if m.Body == nil {
			continue
		}
		if m.Replace != nil {
			i, ok := idx[m.Replace.ID]
			if !ok {
				out = append(out, shown{ID: "orphan:" + m.Replace.ID, Text: m.body(), FirstAt: m.At, LastAt: m.At})
				continue
			}
			out[i].Text, out[i].LastAt = m.body(), m.At
			out[i].Corrections++
			continue
		}
		s := shown{ID: m.ID, Text: m.body(), FirstAt: m.At, LastAt: m.At}
		if m.OOB != nil {
			s.URL = m.OOB.URL
		}
		idx[m.ID] = len(out)
		out = append(out, s)
	}
	return out
}

// upload puts data on the server's upload service (XEP-0363) and returns
// its URL.
func (u *client) upload(name, mime string, data []byte) string {
	u.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	slot, err := upload.GetSlot(ctx, upload.File{Name: name, Size: len(data), Type: mime}, jid.MustParse(uploadJID), u.s)
	require.NoError(u.t, err)
	req, err := slot.Put(ctx, bytes.NewReader(data))
	require.NoError(u.t, err)
	req.ContentLength = int64(len(data))
	req.Header.Set("Content-Type", mime)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(u.t, err)
	_ = resp.Body.Close()
	require.Equal(u.t, http.StatusCreated, resp.StatusCode)
	return slot.GetURL.String()
}

// share sends a file's URL to a JID the way XMPP clients do.
func (u *client) share(to, url string) {
	u.t.Helper()
	id := "alice-" + strconv.FormatInt(u.next.Add(1), 10)
	m := out{ID: id, To: to, Type: "chat", Body: url, OOB: &struct {
		URL string `xml:"url"`
	}{url}}
	m.OriginID.ID = id
	u.send(m)
}
