//go:build unix

package e2e

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/examples/telegram/internal/botapitest"
	"github.com/xagentkit/imv2/examples/telegram/tgbridge"
	"github.com/xagentkit/imv2/protocol"
)

const apiKey = "e2e-api-key-of-at-least-22-chars"

// running is one Connector in this process: the bridge behind an
// http.Server on a fixed loopback address.
type running struct {
	b   *tgbridge.Bridge
	srv *http.Server
	err chan error
}

func startBridge(t *testing.T, em *emulator, addr, stateDir string, opts ...func(*tgbridge.Config)) *running {
	t.Helper()
	cfg := tgbridge.Config{Build: buildForTest, APIKey: apiKey, Token: botapitest.Token, Server: em.API, StateDir: stateDir,
		PollTimeout: 2 * time.Second, Logger: logger(t, &lines{})}
	for _, o := range opts {
		o(&cfg)
	}
	b, err := tgbridge.New(cfg)
	require.NoError(t, err)
	l, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	rc := &running{b: b, srv: connector.NewServer(addr, b.Connector()), err: make(chan error, 1)}
	go func() { rc.err <- rc.srv.Serve(l) }()
	return rc
}

func (rc *running) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, rc.srv.Close())
	require.NoError(t, rc.b.Close())
	require.ErrorIs(t, <-rc.err, http.ErrServerClosed)
}

var buildForTest = protocol.Build{Version: "e2e", BuildTime: "2612040000"}

// logger logs into logs, shown when t fails.
func logger(t *testing.T, logs *lines) *slog.Logger {
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("connector log:\n%s", logs.String())
		}
	})
	return slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// agent plays xAgent: it dials the Connector, pairs channels with chats
// and answers each user message once (by message_id), a channel's
// messages one after the other, with reply.
type agent struct {
	cli   *dataplane.Client
	reply func(ctx context.Context, r *dataplane.Reply, m imv2.ChatMessage)
	mu    sync.Mutex
	seen  map[string]bool
	queue map[string]chan imv2.ChatMessage
	users map[string][]string // user texts by channel, in order
	wg    sync.WaitGroup
	ctx   context.Context
}

func startAgent(t *testing.T, ctx context.Context, addr string, reply func(context.Context, *dataplane.Reply, imv2.ChatMessage)) *agent {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	a := &agent{reply: reply, seen: map[string]bool{}, queue: map[string]chan imv2.ChatMessage{}, users: map[string][]string{}, ctx: ctx}
	cli, err := dataplane.Dial(ctx, dataplane.ClientConfig{URL: "http://" + addr, APIKey: apiKey,
		Target:   imv2.TargetFunc(a.take),
		Options:  &imv2.Options{RetryMin: 50 * time.Millisecond, RetryMax: time.Second},
		Advanced: dataplane.ClientAdvanced{CardID: tgbridge.CardID, ReconnectMin: 20 * time.Millisecond, ReconnectMax: 300 * time.Millisecond},
	})
	if err != nil {
		cancel()
	}
	require.NoError(t, err)
	a.cli = cli
	t.Cleanup(func() { cancel(); cli.Close(); a.wg.Wait() })
	return a
}

func (a *agent) take(_ context.Context, chID string, m *imv2.ChatMessage) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.seen[m.MessageID] {
		return nil
	}
	a.seen[m.MessageID] = true
	a.users[chID] = append(a.users[chID], m.Text)
	q, ok := a.queue[chID]
	if !ok {
		q = make(chan imv2.ChatMessage, 4096)
		a.queue[chID] = q
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			for {
				select {
				case m := <-q:
					if r, err := a.cli.NewReply(chID, ""); err == nil {
						a.reply(a.ctx, r, m)
					}
				case <-a.ctx.Done():
					return
				}
			}
		}()
	}
	q <- *m
	return nil
}

func (a *agent) userTexts(chID string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.users[chID]...)
}

// pair opens a channel and binds it to chat the way a person does: the
// code auth.start hands out, sent to the bot with /start in the chat.
func (a *agent) pair(t *testing.T, ctx context.Context, em *emulator, chat int64) string {
	t.Helper()
	ch, err := a.cli.OpenChannel(ctx, "")
	require.NoError(t, err)
	ack := a.auth(t, ctx, ch, protocol.TypeAuthStart, protocol.AuthStart{FlowID: tgbridge.PairFlow})
	require.Equal(t, protocol.AuthPending, ack.Status)
	_, code, ok := strings.Cut(ack.QRCodeText, "?start=")
	require.True(t, ok, "deep link %q", ack.QRCodeText)
	cmd := "/start " + code
	if chat < 0 {
		cmd = "/start@TestNameBot " + code
	}
	em.say(t, chat, cmd)
	require.Eventually(t, func() bool {
		return a.auth(t, ctx, ch, protocol.TypeAuthStatus, protocol.AuthStatusRequest{FlowID: tgbridge.PairFlow}).Status == protocol.AuthAuthenticated
	}, time.Minute, 50*time.Millisecond)
	return ch
}

func (a *agent) auth(t *testing.T, ctx context.Context, chID, typ string, payload any) protocol.AuthAck {
	t.Helper()
	p, err := imv2.NewPacket(typ, chID, payload)
	require.NoError(t, err)
	ans, err := a.cli.Request(ctx, p)
	require.NoError(t, err)
	var ack protocol.AuthAck
	require.NoError(t, ans.DecodePayload(&ack))
	return ack
}

// stream sends text as reply r in n deltas, gap apart, then its final.
func stream(ctx context.Context, r *dataplane.Reply, text string, n int, gap time.Duration) error {
	runes := []rune(text)
	step := (len(runes) + n - 1) / n
	for i := 0; i < len(runes); i += step {
		if err := r.Delta(ctx, string(runes[i:min(i+step, len(runes))])); err != nil {
			return err
		}
		time.Sleep(gap)
	}
	_, err := r.Final(ctx, imv2.ChatMessage{Text: text})
	return err
}

// lines collects log output.
type lines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func freeAddr(t *testing.T) string {
	port, err := botapitest.FreePort()
	require.NoError(t, err)
	return "127.0.0.1:" + itoa(port)
}
