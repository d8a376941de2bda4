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
	"errors"
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
	"github.com/xagentkit/imv2/state"
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
	// Rate is deltas per second of a streamed reply (one delta per word,
	// Pieces); 0 sends them as fast as the channel takes them. At 0 a
	// whole reply's deltas arrive within a millisecond, so a Connector in
	// edit mode, which edits at most once per interval, shows the final
	// with at most one draft before it: set Rate (20 is a person reading)
	// to see drafts grow.
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
	// Options configure the xAgent Channel (ack timeout, stores …). With
	// durable Pending and Completed stores (boltstore) and a durable
	// Store, a restarted simulator resends the finals it had not seen
	// acknowledged and does not run a user message it already took.
	Options *imv2.Options
	// Store keeps the connector_id and the channel to reopen
	// (dataplane.ClientConfig.Store); with one that outlives the process,
	// Start reopens the stored channel instead of opening a new one.
	// Default: in memory.
	Store state.ChannelStore
	// HTTPClient is used for uploads; default http.DefaultClient.
	HTTPClient *http.Client
	// Logger receives data-plane debug lines.
	Logger *slog.Logger
}

// Simulator is a running xAgent stand-in.
type Simulator struct {
	cfg    Config
	client *dataplane.Client

	mu      sync.Mutex
	chID    string             // the simulator's channel as opened: the first reopened or opened
	dialing bool               // Dial has not returned: OnConnected is its first connect
	closing bool               // Close began: user messages are refused, retryable
	users   []imv2.ChatMessage // user messages received, in order
	finals  []imv2.ChatMessage // finals sent, newest last (at most maxFinals)
	wg      sync.WaitGroup
	ctx     context.Context
	cancel  context.CancelFunc
	logMu   sync.Mutex

	// acked counts the finals that got their terminal ack; ackedNow is
	// closed (and replaced) at each, for WaitAcked.
	acked    int
	failed   *imv2.Error
	ackedNow chan struct{}

	// room is signalled by every terminal ack of a final: a Final refused
	// pending_full waits for it.
	room chan struct{}
	// ready is closed when Start has set client: a user message the
	// reopened channel receives during Dial waits for it to reply.
	ready chan struct{}
}

// Start dials the Connector and opens one channel, or reopens the channel
// Config.Store holds.
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
	s := &Simulator{cfg: cfg, room: make(chan struct{}, 1), ready: make(chan struct{})}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	var reopened []string
	dc := dataplane.ClientConfig{
		URL:     cfg.Connector,
		APIKey:  cfg.APIKey,
		Target:  imv2.TargetFunc(s.onUserMessage),
		Options: s.options(),
		Store:   cfg.Store,
		Logger:  cfg.Logger,
		OnConnected: func(_ string, ids []string) {
			s.mu.Lock()
			dialing := s.dialing
			if dialing {
				reopened = ids
			}
			s.mu.Unlock()
			if !dialing {
				s.logf("reconnected")
			}
		},
		// The Client follows a replaced channel by itself (ChannelID
		// resolves it); the log shows the move.
		OnChannelReplaced: func(old, now string) { s.logf("channel %s reopened as %s", old, now) },
		Advanced:          dataplane.ClientAdvanced{CardID: cfg.CardID, HTTPClient: cfg.HTTPClient},
	}
	if cfg.Drop > 0 || cfg.Duplicate > 0 {
		dc.Advanced.WrapConn = func(c dataplane.Conn) dataplane.Conn { return &faultyConn{Conn: c, drop: cfg.Drop, dup: cfg.Duplicate} }
	}
	s.dialing = true
	client, err := dataplane.Dial(ctx, dc)
	s.mu.Lock()
	s.dialing = false
	s.mu.Unlock()
	if err != nil {
		s.cancel()
		return nil, err
	}
	var ch string
	if len(reopened) > 0 {
		ch = reopened[0]
		s.logf("reopen channel %s", ch)
	} else {
		if ch, err = client.OpenChannel(ctx, ""); err != nil {
			s.cancel()
			client.Close()
			s.wg.Wait()
			return nil, err
		}
		s.logf("open channel %s", ch)
	}
	s.mu.Lock()
	s.client, s.chID = client, ch
	s.mu.Unlock()
	close(s.ready)
	return s, nil
}

// options are Config.Options with OnDelivered and OnFailed also
// signalling room for a final refused pending_full.
func (s *Simulator) options() *imv2.Options {
	var o imv2.Options
	if s.cfg.Options != nil {
		o = *s.cfg.Options
	}
	delivered, failed := o.OnDelivered, o.OnFailed
	o.OnDelivered = func(channelID string, m imv2.ChatMessage, st imv2.AckStatus) {
		if delivered != nil {
			delivered(channelID, m, st)
		}
		s.ack(nil)
		signal(s.room)
	}
	o.OnFailed = func(channelID string, m imv2.ChatMessage, err *imv2.Error) {
		if failed != nil {
			failed(channelID, m, err)
		}
		s.ack(err)
		signal(s.room)
	}
	return &o
}

// signal wakes one waiter on c without blocking; a waiter that comes
// later still finds it.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// FetchCard reads and validates the Connector Card at
// base/connector-card.json; it is dataplane.FetchCard, which Start's Dial
// calls itself.
func FetchCard(ctx context.Context, client *http.Client, base string) (*protocol.Card, error) {
	return dataplane.FetchCard(ctx, client, base)
}

// ChannelID returns the simulator's channel ID: the one Start opened or
// reopened, or, after a restarted Connector replaced it (W5), its
// successor.
func (s *Simulator) ChannelID() string { return s.channelID() }

// Client returns the data-plane client.
func (s *Simulator) Client() *dataplane.Client { return s.client }

// UserMessages returns the user messages received so far, in order.
func (s *Simulator) UserMessages() []imv2.ChatMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]imv2.ChatMessage(nil), s.users...)
}

// Wait blocks until every reply the simulator started by itself, to
// answer a user message, has sent its final; it does not wait for the
// Connector's acks (WaitAcked does).
func (s *Simulator) Wait() { s.wg.Wait() }

// ack counts a final's terminal ack: err is nil when it was delivered.
func (s *Simulator) ack(err *imv2.Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.acked++
	if err != nil && s.failed == nil {
		s.failed = err
	}
	if s.ackedNow != nil {
		close(s.ackedNow)
		s.ackedNow = nil
	}
}

// WaitAcked blocks until n finals sent since Start got their terminal
// ack — the Connector showed them (accepted, duplicate) or refused them
// for good — and fails with the first refusal, if any, or ctx's error.
// Reply returns once its final is sent, before the Connector acks it:
// after n Replies, WaitAcked(ctx, n) is when all n are in the chat.
func (s *Simulator) WaitAcked(ctx context.Context, n int) error {
	for {
		s.mu.Lock()
		done, failed := s.acked >= n, s.failed
		if s.ackedNow == nil {
			s.ackedNow = make(chan struct{})
		}
		next := s.ackedNow
		s.mu.Unlock()
		switch {
		case failed != nil:
			return fmt.Errorf("sim: a final was refused: %w", failed)
		case done:
			return nil
		}
		select {
		case <-next:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Close stops the replies in progress and the connection.
func (s *Simulator) Close() error {
	s.mu.Lock()
	s.closing = true // no wg.Add after this: Add may not race Wait
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	return s.client.Close()
}

// onUserMessage is the agent: it takes the message (so the Connector gets
// accepted) and answers it on its own goroutine.
func (s *Simulator) onUserMessage(_ context.Context, channelID string, m *imv2.ChatMessage) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		// Not taken: the Connector sends it again, to the next run.
		return imv2.NotPosted(errors.New("sim: closing"))
	}
	s.users = append(s.users, *m)
	s.wg.Add(1)
	s.mu.Unlock()
	names := make([]string, 0, len(m.Files))
	for _, f := range m.Files {
		names = append(names, f.Filename)
	}
	s.logf("user %s: %q files=%v", m.MessageID, m.Text, names)
	go func() {
		defer s.wg.Done()
		select {
		case <-s.ready:
		case <-s.ctx.Done(): // Start failed or Close
			return
		}
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
// (with Config.Attach uploaded first) and idle. It blocks while it
// streams and returns once the final is sent — stored as pending and
// resent until acked, not yet acked (WaitAcked waits for that). Replies
// made one after the other on a channel send their finals in that order;
// replies made concurrently interleave their deltas.
func (s *Simulator) Reply(ctx context.Context, channelID, text string) error {
	var attach []string
	if s.cfg.Attach != "" {
		attach = []string{s.cfg.Attach}
	}
	return s.ReplyWith(ctx, channelID, text, attach...)
}

// ReplyWith is Reply with these files uploaded and attached to the final.
//
// A Connector that drops mid-reply does not fail it: the deltas sent
// into the gap are lost (the final carries the whole text, D5), an
// upload waits for the reconnect and is tried again, and the final stays
// pending until the reconnected Connector acks it (A5). A final refused
// pending_full waits for an ack to make room.
func (s *Simulator) ReplyWith(ctx context.Context, channelID, text string, attach ...string) error {
	r, err := s.client.NewReply(channelID, "") // follows a replaced channel (W5)
	if err != nil {
		return err
	}
	// Activity is a snapshot, not retried (C1): one lost to a drop is
	// replaced by the next.
	_ = r.Activity(ctx, imv2.ChatActivity{Status: imv2.ActivityThinking})
	_ = r.Activity(ctx, imv2.ChatActivity{Status: imv2.ActivityTool, ToolName: "web_search"})
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
		f, err := s.upload(ctx, r.ChannelID(), path)
		if err != nil {
			return err
		}
		final.Files = append(final.Files, f)
	}
	if err := s.final(ctx, r, final); err != nil {
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
	_ = r.Activity(ctx, imv2.ChatActivity{Status: imv2.ActivityIdle})
	return nil
}

// final sends m as r's final, waiting for room while the channel's
// pending store is full (pending_full): every terminal ack frees one.
func (s *Simulator) final(ctx context.Context, r *dataplane.Reply, m imv2.ChatMessage) error {
	for {
		_, err := r.Final(ctx, m)
		if !errors.Is(err, &imv2.Error{Code: imv2.CodePendingFull}) {
			return err
		}
		select {
		case <-s.room:
		case <-ctx.Done():
			return ctx.Err()
		case <-s.ctx.Done():
			return imv2.ErrClosed
		}
	}
}

// upload sends path to the Connector (M7) and returns the file for a
// final; Client.Upload waits for the channel across a drop and retries
// the Connector's refusals for now.
func (s *Simulator) upload(ctx context.Context, channelID, path string) (imv2.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return imv2.File{}, err
	}
	defer f.Close()
	return s.client.Upload(ctx, channelID, filepath.Base(path), f)
}

func (s *Simulator) channelID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client == nil {
		return s.chID
	}
	return s.client.Resolve(s.chID)
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
