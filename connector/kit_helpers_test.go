package connector_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/boltstore"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/imv2test"
	"github.com/xagentkit/imv2/protocol"
)

// pretend is an in-memory chat service with every capability: it records
// what it shows as the conformance suite's events, and answers every
// every-th call with a rate limit (Retry-After limitDelay) before doing
// anything.
type pretend struct {
	imv2test.Recorder
	every int

	mu       sync.Mutex
	calls    int
	limited  int
	posts    map[string][]string // conversation key → message IDs of finals, in display order
	released []string
}

const limitDelay = 200 * time.Millisecond

var errTooMany = errors.New("429 Too Many Requests")

func newPretend(every int) *pretend { return &pretend{every: every, posts: map[string][]string{}} }

func (p *pretend) call() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	if p.every > 0 && p.calls%p.every == 0 {
		p.limited++
		return imv2.RetryAfter(errTooMany, limitDelay)
	}
	return nil
}

func (p *pretend) final(to connector.Conversation, m *connector.Message) error {
	if err := p.call(); err != nil {
		return err
	}
	e := imv2test.Event{Event: "final", MessageID: m.MessageID, Text: &m.Text}
	for _, f := range m.Attachments {
		if _, err := io.Copy(io.Discard, f); err != nil {
			return err
		}
		e.Files = append(e.Files, imv2test.EventFile{FileRef: f.FileRef, Type: string(f.Type), Filename: f.Filename})
	}
	p.mu.Lock()
	p.posts[to.Key] = append(p.posts[to.Key], m.MessageID)
	p.mu.Unlock()
	p.Record(e)
	return nil
}

func (p *pretend) finals(key string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.posts[key]...)
}

func (p *pretend) Post(_ context.Context, to connector.Conversation, m *connector.Message) error {
	return p.final(to, m)
}

func (p *pretend) Finish(_ context.Context, to connector.Conversation, _ string, m *connector.Message) error {
	return p.final(to, m)
}

func (p *pretend) Draft(_ context.Context, _ connector.Conversation, d connector.Draft) (string, error) {
	if err := p.call(); err != nil {
		return "", err
	}
	p.Record(imv2test.Event{Event: "draft", MessageID: d.MessageID, Text: &d.Text})
	return d.MessageID, nil
}

func (p *pretend) PostDraft(_ context.Context, _ connector.Conversation, messageID, text string) (string, error) {
	if err := p.call(); err != nil {
		return "", err
	}
	p.Record(imv2test.Event{Event: "post", MessageID: messageID, Text: &text})
	return messageID, nil
}

func (p *pretend) Edit(_ context.Context, _ connector.Conversation, handle, text string) error {
	if err := p.call(); err != nil {
		return err
	}
	p.Record(imv2test.Event{Event: "edit", MessageID: handle, Text: &text})
	return nil
}

func (p *pretend) Typing(_ context.Context, _ connector.Conversation, a imv2.ChatActivity) error {
	if err := p.call(); err != nil {
		return err
	}
	if a.Status == imv2.ActivityIdle {
		p.Record(imv2test.Event{Event: "typing_clear"})
	} else {
		p.Record(imv2test.Event{Event: "typing", Status: string(a.Status), ToolName: a.ToolName})
	}
	return nil
}

func (p *pretend) Released(_ context.Context, key string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.released = append(p.released, key)
	return nil
}

// kitUser is the conformance suite's User: a person typing in the
// conversation the channel is bound to (each channel its own here).
type kitUser struct{ k *connector.Connector }

func (u kitUser) Say(ctx context.Context, channelID, text string) error {
	return u.k.Receive(ctx, connector.InboundEvent{Conversation: channelID, EventID: imv2.NewMessageID(), Text: text})
}

func (u kitUser) SendFile(ctx context.Context, channelID, filename string, data []byte) error {
	open := func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }
	return u.k.Receive(ctx, connector.InboundEvent{Conversation: channelID, EventID: imv2.NewMessageID(),
		Files: []connector.InboundFile{{Filename: filename, Open: open}}})
}

// Short bounds the kit Connector declares, so K6.c and K12.d observe them.
const (
	kitDeltaTTL    = 3 * time.Second
	kitSweep       = 50 * time.Millisecond
	kitActivityTTL = time.Second
)

// kitCard is testCard without the API-key requirement, for runs without one.
func kitCard(apiKey string) *protocol.Card {
	c := testCard()
	if apiKey == "" {
		c.Security = nil
	}
	return c
}

// startKit serves a Connector on the kit for p over httptest.
func startKit(t *testing.T, p connector.Platform, apiKey string, opts connector.Options) (*connector.Connector, string) {
	t.Helper()
	opts.APIKey = apiKey
	if opts.Advanced.Channel == nil {
		opts.Advanced.Channel = &imv2.Options{DeltaIdleTTL: kitDeltaTTL, DeltaSweep: kitSweep, ActivityTimeout: kitActivityTTL}
	}
	if opts.DefaultConversation == nil {
		opts.DefaultConversation = func(id string) string { return id }
	}
	k, err := connector.New(kitCard(apiKey), p, &opts)
	require.NoError(t, err)
	hs := httptest.NewServer(k)
	t.Cleanup(func() {
		hs.Close()
		k.Close()
	})
	return k, hs.URL
}

// restartable is a kit Connector on a boltstore file, serving a loopback
// address that outlives it: stop and restart it as a process restart
// would, keeping only the file and the address.
type restartable struct {
	t    *testing.T
	path string
	addr string
	// start builds the Connector on the opened store; called again by
	// each restart, so every start gets fresh Options.
	start func(st *boltstore.Store) (*connector.Connector, error)
	K     *connector.Connector
	Bolt  *boltstore.Store
	done  chan error
}

// startRestartable opens a boltstore file in t.TempDir() and serves the
// Connector start builds on it on a loopback address.
func startRestartable(t *testing.T, start func(st *boltstore.Store) (*connector.Connector, error)) *restartable {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	r := &restartable{t: t, path: filepath.Join(t.TempDir(), "kit.db"), addr: ln.Addr().String(), start: start}
	r.serve(ln)
	return r
}

// URL is the Connector's base URL, the same across restarts.
func (r *restartable) URL() string { return "http://" + r.addr }

func (r *restartable) serve(ln net.Listener) {
	r.t.Helper()
	st, err := boltstore.Open(r.path, boltstore.Options{})
	require.NoError(r.t, err)
	k, err := r.start(st)
	require.NoError(r.t, err)
	r.K, r.Bolt, r.done = k, st, make(chan error, 1)
	go func(done chan error) { done <- k.Serve(context.Background(), ln) }(r.done)
}

// stop closes the Connector, waits for Serve to return and closes the store.
// A Close that comes before the Serve goroutine registered its listener
// makes Serve fail with imv2.ErrClosed, as documented: that is no error.
func (r *restartable) stop() {
	r.t.Helper()
	require.NoError(r.t, r.K.Close())
	if err := <-r.done; !errors.Is(err, imv2.ErrClosed) {
		require.NoError(r.t, err)
	}
	require.NoError(r.t, r.Bolt.Close())
}

// restart serves a new Connector on the same file and address.
func (r *restartable) restart() {
	r.t.Helper()
	ln, err := net.Listen("tcp", r.addr)
	require.NoError(r.t, err)
	r.serve(ln)
}
