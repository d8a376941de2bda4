// Package sim is an xAgent simulator: it dials a Connector's data plane,
// says hello, opens a channel and answers every user message the way an
// agent would — chat.activity thinking, then tool web_search, then a reply
// streamed in deltas, then the final (with an optional file uploaded
// through POST /files/uploads first), then idle. Connector authors develop
// against it without an xAgent; cmd/imv2sim, the quickstart and the
// conformance suite run it.
package sim

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/protocol"
	"github.com/xagentkit/imv2/xfiles"
)

// Config configures a Simulator. Connector is required.
type Config struct {
	// Connector is the Connector's base URL (http://host:port); the data
	// plane is its /ws.
	Connector string
	// APIKey is sent as a bearer token on /ws and /files/uploads.
	APIKey string
	// CardID, when set, is the connector_card_id the Connector must have:
	// the Card is always fetched from /connector-card.json, and a Card
	// naming another fails Start.
	CardID string
	// Rate is deltas per second of a streamed reply; 0 sends them as fast
	// as the channel takes them.
	Rate float64
	// Attach is a file uploaded and attached to every final, if set.
	Attach string
	// Drop and Duplicate are percentages (0–100) of outbound frames the
	// simulator drops or sends twice, to exercise the Connector's dedup.
	Drop, Duplicate float64
	// Reply makes the reply text for a user message; default echoes it.
	Reply func(userText string) string
	// Log receives one line per event the simulator sees; nil is quiet.
	Log io.Writer
	// Options configure the xAgent Channel (ack timeout, stores …).
	Options *imv2.Options
	// HTTPClient is used for uploads; default http.DefaultClient.
	HTTPClient *http.Client
	// Logger receives data-plane debug lines.
	Logger *slog.Logger
}

// Simulator is a running xAgent stand-in.
type Simulator struct {
	cfg    Config
	client *dataplane.Client
	ch     *imv2.Channel

	mu     sync.Mutex
	users  []imv2.ChatMessage // user messages received, in order
	finals []imv2.ChatMessage // finals sent, newest last (at most maxFinals)
	wg     sync.WaitGroup
	ctx    context.Context
	cancel context.CancelFunc
	logMu  sync.Mutex
}

// Start dials the Connector and opens one channel.
func Start(ctx context.Context, cfg Config) (*Simulator, error) {
	if cfg.Connector == "" {
		return nil, fmt.Errorf("sim: Config.Connector is required")
	}
	cfg.Connector = strings.TrimRight(cfg.Connector, "/")
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = http.DefaultClient
	}
	if cfg.Reply == nil {
		cfg.Reply = func(s string) string { return "You said: " + s }
	}
	s := &Simulator{cfg: cfg}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	dc := dataplane.ClientConfig{
		URL:        cfg.Connector,
		APIKey:     cfg.APIKey,
		CardID:     cfg.CardID,
		HTTPClient: cfg.HTTPClient,
		Target:     imv2.TargetFunc(s.onUserMessage),
		Options:    cfg.Options,
		Logger:     cfg.Logger,
	}
	if cfg.Drop > 0 || cfg.Duplicate > 0 {
		dc.WrapConn = func(c dataplane.Conn) dataplane.Conn { return &faultyConn{Conn: c, drop: cfg.Drop, dup: cfg.Duplicate} }
	}
	client, err := dataplane.Dial(ctx, dc)
	if err != nil {
		s.cancel()
		return nil, err
	}
	ch, err := client.OpenChannel(ctx, "")
	if err != nil {
		client.Close()
		s.cancel()
		return nil, err
	}
	s.client, s.ch = client, ch
	s.logf("open channel %s", ch.ID())
	return s, nil
}

// FetchCard reads and validates the Connector Card at
// base/connector-card.json; it is dataplane.FetchCard, which Start's Dial
// calls itself.
func FetchCard(ctx context.Context, client *http.Client, base string) (*protocol.Card, error) {
	return dataplane.FetchCard(ctx, client, base)
}

// Channel returns the simulator's xAgent channel.
func (s *Simulator) Channel() *imv2.Channel { return s.ch }

// Client returns the data-plane client.
func (s *Simulator) Client() *dataplane.Client { return s.client }

// UserMessages returns the user messages received so far, in order.
func (s *Simulator) UserMessages() []imv2.ChatMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]imv2.ChatMessage(nil), s.users...)
}

// Wait blocks until every reply started so far has sent its final.
func (s *Simulator) Wait() { s.wg.Wait() }

// Close stops the replies in progress and the connection.
func (s *Simulator) Close() error {
	s.cancel()
	s.wg.Wait()
	return s.client.Close()
}

// onUserMessage is the agent: it takes the message (so the Connector gets
// accepted) and answers it on its own goroutine.
func (s *Simulator) onUserMessage(_ context.Context, channelID string, m *imv2.ChatMessage) error {
	s.mu.Lock()
	s.users = append(s.users, *m)
	s.mu.Unlock()
	names := make([]string, 0, len(m.Files))
	for _, f := range m.Files {
		names = append(names, f.Filename)
	}
	s.logf("user %s: %q files=%v", m.MessageID, m.Text, names)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		text := m.Text
		if text == "" && len(m.Files) > 0 {
			text = "a file named " + m.Files[0].Filename
		}
		if err := s.Reply(s.ctx, channelID, s.cfg.Reply(text)); err != nil {
			s.logf("reply failed: %v", err)
		}
	}()
	return nil
}

// maxFinals bounds the finals a Simulator remembers for Resend.
const maxFinals = 1000

// Finals returns the finals sent so far (the newest maxFinals), in order.
func (s *Simulator) Finals() []imv2.ChatMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]imv2.ChatMessage(nil), s.finals...)
}

// Resend transmits m again as a new chat.message packet with the same
// message_id and content — what xAgent does when an ack was lost — and
// returns the Connector's ack (duplicate, for a final it already posted).
func (s *Simulator) Resend(ctx context.Context, channelID string, m imv2.ChatMessage) (*imv2.ChatMessageAck, error) {
	p, err := imv2.NewChatMessage(channelID, imv2.ToConnector, m)
	if err != nil {
		return nil, err
	}
	ans, err := s.client.Request(ctx, p)
	if err != nil {
		return nil, err
	}
	return imv2.DecodeChatMessageAck(ans)
}

// Reply streams one assistant message on channelID: activity thinking,
// tool web_search, the text in word-sized deltas at Config.Rate, the final
// (with Config.Attach uploaded first) and idle.
func (s *Simulator) Reply(ctx context.Context, channelID, text string) error {
	var attach []string
	if s.cfg.Attach != "" {
		attach = []string{s.cfg.Attach}
	}
	return s.ReplyWith(ctx, channelID, text, attach...)
}

// ReplyWith is Reply with these files uploaded and attached to the final.
func (s *Simulator) ReplyWith(ctx context.Context, channelID, text string, attach ...string) error {
	ch := s.client.Channel(channelID)
	if ch == nil {
		return fmt.Errorf("sim: channel %s is not open", channelID)
	}
	_ = ch.SendActivity(ctx, imv2.ChatActivity{Status: imv2.ActivityThinking})
	_ = ch.SendActivity(ctx, imv2.ChatActivity{Status: imv2.ActivityTool, ToolName: "web_search"})
	r := ch.NewReply("")
	var tick <-chan time.Time
	if s.cfg.Rate > 0 {
		t := time.NewTicker(time.Duration(float64(time.Second) / s.cfg.Rate))
		defer t.Stop()
		tick = t.C
	}
	for _, piece := range Pieces(text) {
		if tick != nil {
			select {
			case <-tick:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if err := r.Delta(ctx, piece); err != nil {
			s.logf("delta not sent: %v", err)
		}
	}
	final := imv2.ChatMessage{Text: text}
	for _, path := range attach {
		f, err := s.upload(ctx, channelID, path)
		if err != nil {
			return err
		}
		final.Files = append(final.Files, f)
	}
	if err := r.Final(ctx, final); err != nil {
		return err
	}
	final.MessageID = r.MessageID()
	s.mu.Lock()
	if len(s.finals) == maxFinals {
		s.finals = s.finals[1:]
	}
	s.finals = append(s.finals, final)
	s.mu.Unlock()
	s.logf("final %s: %q files=%d", r.MessageID(), text, len(final.Files))
	return ch.SendActivity(ctx, imv2.ChatActivity{Status: imv2.ActivityIdle})
}

// upload sends path to the Connector (M7) and returns the file for a final.
func (s *Simulator) upload(ctx context.Context, channelID, path string) (imv2.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return imv2.File{}, err
	}
	defer f.Close()
	res, err := xfiles.Upload(ctx, s.cfg.HTTPClient, s.cfg.Connector, s.cfg.APIKey, channelID, filepath.Base(path), f)
	if err != nil {
		return imv2.File{}, err
	}
	return res.File(), nil
}

// Fetch downloads an inbound file from the Connector (T4): its
// download_url resolved against the Connector's base URL, capped at 32 MiB.
func (s *Simulator) Fetch(ctx context.Context, f imv2.File) ([]byte, error) {
	return xfiles.Fetch(ctx, s.cfg.HTTPClient, s.cfg.Connector, f, 32<<20)
}

// Pieces splits text into word-sized deltas that concatenate back to it.
func Pieces(text string) []string {
	var out []string
	for len(text) > 0 {
		i := strings.IndexByte(text[1:], ' ')
		if i < 0 {
			out = append(out, text)
			break
		}
		out = append(out, text[:i+1])
		text = text[i+1:]
	}
	return out
}

func (s *Simulator) logf(format string, args ...any) {
	if s.cfg.Log == nil {
		return
	}
	s.logMu.Lock()
	defer s.logMu.Unlock()
	fmt.Fprintf(s.cfg.Log, "imv2sim: "+format+"\n", args...)
}

// faultyConn drops or duplicates a percentage of outbound IM packets.
// Control packets (hello, channel.open …) pass, so the session comes up.
type faultyConn struct {
	dataplane.Conn
	drop, dup float64
}

func (f *faultyConn) Write(ctx context.Context, p *imv2.Packet) error {
	if !strings.HasPrefix(p.Type, "chat.") {
		return f.Conn.Write(ctx, p)
	}
	r := rand.Float64() * 100
	switch {
	case r < f.drop:
		return nil
	case r < f.drop+f.dup:
		if err := f.Conn.Write(ctx, p); err != nil {
			return err
		}
	}
	return f.Conn.Write(ctx, p)
}
