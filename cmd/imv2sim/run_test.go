package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/internal/testcard"
	"github.com/xagentkit/imv2/protocol"
	"github.com/xagentkit/imv2/state"
)

// platform is a kit Platform that records its posts by conversation,
// signals the first typing indicator, refuses posts while down, and
// signs in through a flow that stays pending until polled twice.
type platform struct {
	mu       sync.Mutex
	posts    map[string][]string // conversation key → texts, in order
	down     bool
	rooms    map[string]string // auth_session_id → room
	polls    int
	typing   chan struct{}
	attempts chan string // every post attempt's text, when set
}

func newPlatform() *platform {
	return &platform{posts: map[string][]string{}, rooms: map[string]string{}, typing: make(chan struct{}, 1)}
}

func (p *platform) Post(_ context.Context, to connector.Conversation, m *connector.Message) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.attempts != nil {
		select {
		case p.attempts <- m.Text:
		default:
		}
	}
	if p.down {
		return imv2.NotPosted(errors.New("platform down")) // not posted
	}
	p.posts[to.Key] = append(p.posts[to.Key], m.Text)
	return nil
}

func (p *platform) Typing(context.Context, connector.Conversation, imv2.ChatActivity) error {
	select {
	case p.typing <- struct{}{}:
	default:
	}
	return nil
}

func (p *platform) setDown(down bool) {
	p.mu.Lock()
	p.down = down
	p.mu.Unlock()
}

func (p *platform) postsTo(key string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.posts[key]...)
}

// Start begins a sign-in to input["room"]: pending, with a QR code.
func (p *platform) Start(_ context.Context, _ string, req protocol.AuthStart) (connector.SignInResult, error) {
	if req.Input["room"] == "" {
		return connector.SignInResult{}, &connector.SignInError{Reason: "room is required"}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	id := imv2.NewMessageID()
	p.rooms[id] = req.Input["room"]
	return connector.SignInResult{Ack: &protocol.AuthAck{AuthSessionID: id, Status: protocol.AuthPending,
		QRCodeText: "xagent://scan-me", PollIntervalMillis: 1}}, nil
}

// Status answers qr_refresh_required on the first poll, scanned on the
// second (which must ask for the refresh) and binds the room on the third.
func (p *platform) Status(_ context.Context, _ string, req protocol.AuthStatusRequest) (connector.SignInResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	room, ok := p.rooms[req.AuthSessionID]
	if !ok {
		return connector.SignInResult{}, imv2.Errorf(protocol.CodeAuthSessionNotFound, "no such session")
	}
	p.polls++
	switch {
	case p.polls == 1:
		return connector.SignInResult{Ack: &protocol.AuthAck{AuthSessionID: req.AuthSessionID, Status: protocol.AuthQRRefreshRequired, PollIntervalMillis: 1}}, nil
	case !req.Refresh && p.polls == 2:
		return connector.SignInResult{}, &connector.SignInError{Reason: "the QR code was not refreshed"}
	case p.polls == 2:
		return connector.SignInResult{Ack: &protocol.AuthAck{AuthSessionID: req.AuthSessionID, Status: protocol.AuthScanned, PollIntervalMillis: 1}}, nil
	}
	return connector.SignInResult{Bind: &state.Binding{Key: room}}, nil
}

// signInPlatform is platform with its sign-in: the Card has an auth flow.
type signInPlatform struct{ *platform }

var (
	_ connector.SignIn       = signInPlatform{}
	_ connector.SignInStatus = signInPlatform{}
)

// plainPlatform hides the sign-in: every channel is bound to "default".
type plainPlatform struct{ p *platform }

func (pp plainPlatform) Post(ctx context.Context, to connector.Conversation, m *connector.Message) error {
	return pp.p.Post(ctx, to, m)
}

func (pp plainPlatform) Typing(ctx context.Context, to connector.Conversation, a imv2.ChatActivity) error {
	return pp.p.Typing(ctx, to, a)
}

// kitServer is a kit Connector on a loopback address that outlives it, so
// a test can stop and restart it as a process.
type kitServer struct {
	t     *testing.T
	addr  string
	start func() (*connector.Connector, error)
	k     *connector.Connector
	done  chan error
}

func serveKit(t *testing.T, start func() (*connector.Connector, error)) *kitServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &kitServer{t: t, addr: ln.Addr().String(), start: start}
	s.serve(ln)
	t.Cleanup(func() {
		if s.k != nil {
			s.stop()
		}
	})
	return s
}

func (s *kitServer) url() string { return "http://" + s.addr }

func (s *kitServer) serve(ln net.Listener) {
	s.t.Helper()
	k, err := s.start()
	require.NoError(s.t, err)
	s.k, s.done = k, make(chan error, 1)
	go func(done chan error) { done <- k.Serve(context.Background(), ln) }(s.done)
}

func (s *kitServer) stop() {
	s.t.Helper()
	require.NoError(s.t, s.k.Close())
	require.NoError(s.t, <-s.done)
	s.k = nil
}

func (s *kitServer) restart() {
	s.t.Helper()
	ln, err := net.Listen("tcp", s.addr)
	require.NoError(s.t, err)
	s.serve(ln)
}

// plainKit serves a kit Connector without auth flows for p.
func plainKit(t *testing.T, p *platform, opts func() *connector.Options) *kitServer {
	return serveKit(t, func() (*connector.Connector, error) {
		o := &connector.Options{Pace: connector.Pace{MaxAttempts: 1}}
		if opts != nil {
			o = opts()
		}
		return connector.New(testcard.IM("simtest", "sim test"), plainPlatform{p}, o)
	})
}

// output is a goroutine-safe writer a test can wait on.
type output struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changed chan struct{}
}

func newOutput() *output { return &output{changed: make(chan struct{}, 1)} }

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	select {
	case o.changed <- struct{}{}:
	default:
	}
	return o.b.Write(p)
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

// waitFor waits until the output holds want n times.
func (o *output) waitFor(ctx context.Context, t *testing.T, want string, n int) {
	t.Helper()
	for strings.Count(o.String(), want) < n {
		select {
		case <-o.changed:
		case <-ctx.Done():
			t.Fatalf("%q not seen %d times: %v\n%s", want, n, ctx.Err(), o.String())
		}
	}
}

// running is one imv2sim run in the background.
type running struct {
	out, errOut *output
	cancel      context.CancelFunc
	res         chan error
}

func startRun(args ...string) *running {
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{out: newOutput(), errOut: newOutput(), cancel: cancel, res: make(chan error, 1)}
	go func() { r.res <- run(ctx, args, r.out, r.errOut) }()
	return r
}

// result waits for the run to end on its own.
func (r *running) result(ctx context.Context, t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.res:
		return err
	case <-ctx.Done():
		r.cancel()
		<-r.res
		t.Fatalf("imv2sim did not end: %v\nstdout:\n%s\nstderr:\n%s", ctx.Err(), r.out, r.errOut)
		return nil
	}
}

// stop interrupts the run, as SIGTERM does, and returns its error.
func (r *running) stop() error {
	r.cancel()
	return <-r.res
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestRun_W12_AuthSignsTheChannelIn: -auth sends auth.start with the
// given input for the Card's only flow, follows a pending flow through
// auth.status (qr_refresh_required answered with refresh, scanned, then
// authenticated) and the scripted finals then
// go to the conversation the sign-in bound; a refused sign-in ends the run
// with the Connector's reason.
func TestRun_W12_AuthSignsTheChannelIn(t *testing.T) {
	ctx := testCtx(t)
	p := newPlatform()
	card := testcard.IM("simtest", "sim test")
	card.AuthFlows = []protocol.AuthFlow{{ID: "room", Type: "form", TargetType: imv2.TargetTypeIM, Title: "Room",
		Fields: []protocol.AuthField{{Name: "room", Label: "Room", InputType: "text", Required: true}}}}
	k := serveKit(t, func() (*connector.Connector, error) { return connector.New(card, signInPlatform{p}, nil) })

	r := startRun("-connector", k.url(), "-auth", "room=!lobby:example.org", "-send", "2", "-rate", "0")
	require.NoError(t, r.result(ctx, t), "stdout:\n%s\nstderr:\n%s", r.out, r.errOut)
	require.Equal(t, []string{"Scripted message 1 of 2.", "Scripted message 2 of 2."}, p.postsTo("!lobby:example.org"))
	require.Contains(t, r.out.String(), "auth room: pending")
	require.Contains(t, r.out.String(), "qr_code_text=xagent://scan-me")
	require.Contains(t, r.out.String(), "auth room: qr_refresh_required")
	require.Contains(t, r.out.String(), "auth room: scanned")
	require.Contains(t, r.out.String(), "auth room: authenticated")

	r = startRun("-connector", k.url(), "-auth", "room=", "-q")
	err := r.result(ctx, t)
	require.ErrorContains(t, err, "room is required")
	require.ErrorContains(t, err, "failed")
}

// TestRun_A5_ConnectorDropMidReplyReconnects: the Connector stops while a
// reply is streaming and comes back after its final was sent into the
// gap; imv2sim reconnects (the restarted Connector gives the channel a new
// ID, W5), the pending final is sent again and acked, and -send ends with
// success instead of exit status 1.
func TestRun_A5_ConnectorDropMidReplyReconnects(t *testing.T) {
	ctx := testCtx(t)
	p := newPlatform()
	k := plainKit(t, p, nil)
	r := startRun("-connector", k.url(), "-send", "1", "-rate", "2")
	select {
	case <-p.typing: // the reply started
	case <-ctx.Done():
		t.Fatal("no typing")
	}
	k.stop()
	r.out.waitFor(ctx, t, "final ", 1) // sent while the Connector is gone
	k.restart()
	require.NoError(t, r.result(ctx, t), "stdout:\n%s\nstderr:\n%s", r.out, r.errOut)
	require.Equal(t, []string{"Scripted message 1 of 1."}, p.postsTo(connector.DefaultConversationKey))
	require.Contains(t, r.out.String(), "reconnected")
}

// TestRun_S1_StateKeepsAPendingFinalAcrossARestart: a final the Connector
// did not accept (the platform is down) is still pending when imv2sim
// stops; imv2sim started again on the same -state file reopens its
// channel and sends the final again, and it is shown.
func TestRun_S1_StateKeepsAPendingFinalAcrossARestart(t *testing.T) {
	ctx := testCtx(t)
	p := newPlatform()
	p.attempts = make(chan string, 1)
	p.setDown(true)
	k := plainKit(t, p, nil)
	path := filepath.Join(t.TempDir(), "sim.db")

	r := startRun("-connector", k.url(), "-state", path, "-send", "1", "-rate", "0")
	select {
	case <-p.attempts: // refused: still pending on the simulator
	case <-ctx.Done():
		t.Fatal("no post attempt")
	}
	require.ErrorContains(t, r.stop(), "1 of 1 finals not acknowledged")
	require.Empty(t, p.postsTo(connector.DefaultConversationKey))

	p.setDown(false)
	r = startRun("-connector", k.url(), "-state", path)
	r.out.waitFor(ctx, t, "reopen channel", 1)
	for len(p.postsTo(connector.DefaultConversationKey)) == 0 {
		select {
		case <-p.attempts:
		case <-ctx.Done():
			t.Fatalf("the pending final was not sent again\n%s", r.out)
		}
	}
	require.NoError(t, r.stop())
	require.Equal(t, []string{"Scripted message 1 of 1."}, p.postsTo(connector.DefaultConversationKey))
}

// TestRun_S8_StateDoesNotRunAUserMessageTwice: imv2sim takes a user
// message and replies, but every chat packet it sends is lost (-drop 100:
// the ack and the final); started again on the same -state file it
// reopens the channel, the Connector's resend of the user message is
// acked duplicate without running it again (no second "user" line), and
// the reply of the first run, still pending, is shown once.
func TestRun_S8_StateDoesNotRunAUserMessageTwice(t *testing.T) {
	ctx := testCtx(t)
	p := newPlatform()
	p.attempts = make(chan string, 1)
	acks := make(chan imv2.AckStatus, 4)
	k := plainKit(t, p, func() *connector.Options {
		return &connector.Options{Advanced: connector.Advanced{Channel: &imv2.Options{AckTimeout: 200 * time.Millisecond,
			OnDelivered: func(_ string, _ imv2.ChatMessage, st imv2.AckStatus) { acks <- st }}}}
	})
	path := filepath.Join(t.TempDir(), "sim.db")

	r := startRun("-connector", k.url(), "-state", path, "-drop", "100", "-rate", "0")
	r.out.waitFor(ctx, t, "open channel", 1)
	require.NoError(t, k.k.Receive(ctx, connector.InboundEvent{Conversation: connector.DefaultConversationKey, EventID: "ev-1", Text: "hello"}))
	r.out.waitFor(ctx, t, "final ", 1) // the reply is pending
	require.NoError(t, r.stop())
	require.Empty(t, p.postsTo(connector.DefaultConversationKey))

	r = startRun("-connector", k.url(), "-state", path, "-rate", "0")
	select {
	case st := <-acks:
		require.Equal(t, imv2.AckDuplicate, st)
	case <-ctx.Done():
		t.Fatalf("the user message was not acked\n%s", r.out)
	}
	for len(p.postsTo(connector.DefaultConversationKey)) == 0 {
		select {
		case <-p.attempts:
		case <-ctx.Done():
			t.Fatalf("the first run's reply was not sent again\n%s", r.out)
		}
	}
	r.out.waitFor(ctx, t, "reopen channel", 1) // the ack may come before Start returns
	require.NoError(t, r.stop())
	require.NotContains(t, r.out.String(), "user ", "the user message ran again")
	require.Equal(t, []string{"You said: hello"}, p.postsTo(connector.DefaultConversationKey))
}

// TestRun_Version: -version prints the module version and exits 0.
func TestRun_Version(t *testing.T) {
	out, errOut := newOutput(), newOutput()
	require.NoError(t, run(context.Background(), []string{"-version"}, out, errOut))
	require.Regexp(t, `^imv2sim \S+ .*go1\.\d+`, out.String())
}
