package xmppbridge

import (
	"context"
	"crypto/tls"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/xagentkit/imv2/clock"
	"mellium.im/sasl"
	"mellium.im/xmlstream"
	"mellium.im/xmpp"
	"mellium.im/xmpp/dial"
	"mellium.im/xmpp/jid"
	"mellium.im/xmpp/ping"
)

// Backoff of the session's redial: from redialMin doubling to redialMax.
const (
	redialMin = time.Second
	redialMax = 30 * time.Second
)

// errOffline says the bot's session is not up: nothing was sent.
var errOffline = errors.New("xmpp: not connected to the server")

// link is the bot account's one XMPP session, dialed again whenever it
// drops. Every conversation shares it: a message of the session is
// routed by its sender (route), a send goes out on the current session.
type link struct {
	cfg   *Config
	me    jid.JID
	route func(message)

	mu     sync.Mutex
	s      *xmpp.Session // nil while offline
	up     chan struct{} // closed while s is set
	gone   chan struct{} // closed when s ends
	cancel context.CancelFunc
	done   chan struct{}
}

func newLink(cfg *Config, me jid.JID, route func(message)) *link {
	ctx, cancel := context.WithCancel(context.Background())
	l := &link{cfg: cfg, me: me, route: route, up: make(chan struct{}), cancel: cancel, done: make(chan struct{})}
	go l.run(ctx)
	return l
}

// run keeps a session up until ctx ends.
func (l *link) run(ctx context.Context) {
	defer close(l.done)
	wait := redialMin
	for ctx.Err() == nil {
		began := l.cfg.Clock.Now()
		s, ended, err := l.dial(ctx)
		if err == nil {
			l.serve(ctx, s, ended)
		} else {
			l.cfg.Logger.Warn("xmppbridge: sign-in failed", "jid", l.me.String(), "err", err)
		}
		if l.cfg.Clock.Now().Sub(began) >= redialMax {
			wait = redialMin
		}
		sleep(ctx, l.cfg.Clock, wait)
		wait = min(2*wait, redialMax)
	}
}

// dial connects, secures the stream with STARTTLS, signs in with SCRAM
// (PLAIN only inside TLS), binds a resource, starts reading the stream
// and sends the initial presence, so the server routes the bot's
// messages to it. ended gets the read loop's end.
func (l *link) dial(ctx context.Context) (s *xmpp.Session, ended chan error, err error) {
	dctx, cancel := context.WithTimeout(ctx, l.cfg.DialTimeout)
	defer cancel()
	var conn net.Conn
	if l.cfg.Server != "" {
		conn, err = (&net.Dialer{}).DialContext(dctx, "tcp", l.cfg.Server)
	} else {
		conn, err = dial.Client(dctx, "tcp", l.me)
	}
	if err != nil {
		return nil, nil, err
	}
	tc := l.cfg.TLS.Clone()
	if tc.ServerName == "" {
		tc.ServerName = l.me.Domainpart()
	}
	s, err = xmpp.NewClientSession(dctx, l.me, conn,
		xmpp.StartTLS(tc),
		xmpp.SASL("", l.cfg.Password, sasl.ScramSha256, sasl.ScramSha1, sasl.Plain),
		xmpp.BindResource())
	if err != nil {
		_ = conn.Close()
		return nil, nil, err
	}
	ended = make(chan error, 1)
	go func() { ended <- s.Serve(xmpp.HandlerFunc(l.handle)) }()
	// The ping's answer says the server took the presence: from now on it
	// routes the bot's messages here.
	if err = s.Encode(dctx, presence{}); err == nil {
		err = ping.Send(dctx, s, l.me.Domain())
	}
	if err != nil {
		_ = s.Conn().Close()
		<-ended
		return nil, nil, err
	}
	return s, ended, nil
}

// handle decodes a message of the stream and routes it.
func (l *link) handle(t xmlstream.TokenReadEncoder, start *xml.StartElement) error {
	if start.Name.Local != "message" {
		return nil
	}
	var m message
	if err := decode(t, start, &m); err != nil && !errors.Is(err, io.EOF) {
		l.cfg.Logger.Debug("xmppbridge: message not decoded", "err", err)
		return nil
	}
	l.route(m)
	return nil
}

// decode reads the element start opened into v: the handler's reader has
// its content and end only, which a decoder that did not see the start
// refuses.
func decode(r xml.TokenReader, start *xml.StartElement, v any) error {
	return xml.NewTokenDecoder(xmlstream.MultiReader(xmlstream.Token(start.Copy()), r)).Decode(v)
}

// serve offers s to sends until its stream ends or ctx does.
func (l *link) serve(ctx context.Context, s *xmpp.Session, ended chan error) {
	gone := make(chan struct{})
	l.mu.Lock()
	l.s, l.gone = s, gone
	close(l.up)
	l.mu.Unlock()
	stop := context.AfterFunc(ctx, func() { _ = s.Close(); _ = s.Conn().Close() })
	err := <-ended
	stop()
	_ = s.Conn().Close()
	l.mu.Lock()
	l.s, l.up = nil, make(chan struct{})
	close(gone)
	l.mu.Unlock()
	if ctx.Err() == nil {
		l.cfg.Logger.Warn("xmppbridge: session ended; signing in again", "err", err)
	}
}

// session waits for the session to be up and returns it with a channel
// closed when it ends.
func (l *link) session(ctx context.Context) (*xmpp.Session, <-chan struct{}, error) {
	for {
		l.mu.Lock()
		s, up, gone := l.s, l.up, l.gone
		l.mu.Unlock()
		if s != nil {
			return s, gone, nil
		}
		select {
		case <-up:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-l.done:
			return nil, nil, errOffline
		}
	}
}

// current is the session if it is up: sends never wait for a redial.
func (l *link) current() (*xmpp.Session, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.s == nil {
		return nil, errOffline
	}
	return l.s, nil
}

// send writes the stanzas and, with confirm, waits for the server's
// answer to a ping sent after them: a server handles a stream's stanzas
// in order, so the answer says it took every one of them. An error before
// anything was written is not posted; any later one may have been
// applied.
func (l *link) send(ctx context.Context, confirm bool, stanzas ...any) error {
	s, err := l.current()
	if err != nil {
		return notPosted(err)
	}
	for i, v := range stanzas {
		if err := s.Encode(ctx, v); err != nil {
			if i == 0 {
				err = notPosted(err)
			}
			return fmt.Errorf("xmpp: send: %w", err)
		}
	}
	if !confirm {
		return nil
	}
	if err := ping.Send(ctx, s, l.me.Domain()); err != nil {
		return fmt.Errorf("xmpp: the server did not confirm the message: %w", err)
	}
	return nil
}

// close ends the session and the redial loop.
func (l *link) close() {
	l.cancel()
	<-l.done
}

// sleep waits d on c, or until ctx ends.
func sleep(ctx context.Context, c clock.Clock, d time.Duration) {
	ch := make(chan struct{})
	t := c.AfterFunc(d, func() { close(ch) })
	defer t.Stop()
	select {
	case <-ch:
	case <-ctx.Done():
	}
}

// tlsConfig is cfg, or a default that checks the server's certificate.
func tlsConfig(cfg *tls.Config) *tls.Config {
	if cfg == nil {
		return &tls.Config{MinVersion: tls.VersionTLS12}
	}
	return cfg
}
