//go:build unix

package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/examples/telegram/internal/botapitest"
	"github.com/xagentkit/imv2/examples/telegram/tgbridge"
	"github.com/xagentkit/imv2/protocol"
)

// agent plays xAgent for the Connector's side, in the harness's process
// (its CPU is not the Connector's): one data-plane connection, a channel
// paired with each chat, and each user message answered with reply(text)
// in chunks pieces, gap apart, then the final; a channel's messages one
// after the other, as bot.mjs answers a chat's.
type agent struct {
	cli    *dataplane.Client
	chunks int
	gap    time.Duration
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	queue map[string]chan string // user texts waiting, by channel
}

func startAgent(ctx context.Context, addr, apiKey string, chunks int, gap time.Duration) (*agent, error) {
	a := &agent{chunks: chunks, gap: gap, queue: map[string]chan string{}}
	a.ctx, a.cancel = context.WithCancel(ctx)
	cli, err := dataplane.Dial(ctx, dataplane.ClientConfig{URL: "http://" + addr, APIKey: apiKey,
		Target: imv2.TargetFunc(a.take), Advanced: dataplane.ClientAdvanced{CardID: tgbridge.CardID}})
	if err != nil {
		a.cancel()
		return nil, err
	}
	a.cli = cli
	return a, nil
}

func (a *agent) close() {
	a.cancel()
	_ = a.cli.Close()
	a.wg.Wait()
}

// take acks a user message at once and queues it for its channel's
// replier: the ack says the message is the agent's (A4), the work is
// elsewhere.
func (a *agent) take(_ context.Context, chID string, m *imv2.ChatMessage) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	q, ok := a.queue[chID]
	if !ok {
		q = make(chan string, 1024)
		a.queue[chID] = q
		a.wg.Add(1)
		go a.replier(chID, q)
	}
	select {
	case q <- m.Text:
		return nil
	default:
		return imv2.NotPosted(fmt.Errorf("bench agent: channel %s has 1,024 messages waiting", chID))
	}
}

func (a *agent) replier(chID string, q chan string) {
	defer a.wg.Done()
	for {
		select {
		case text := <-q:
			_ = a.stream(chID, reply(text))
		case <-a.ctx.Done():
			return
		}
	}
}

func (a *agent) stream(chID, text string) error {
	// Thinking, which the first delta clears (C6), as xAgent says it. The
	// Connector shows typing only until the first text, which comes
	// at once here, so it makes no sendChatAction; the Chat SDK makes one
	// for each private message it takes.
	r, err := a.cli.NewReply(chID, "")
	if err != nil {
		return err
	}
	_ = r.Activity(a.ctx, imv2.ChatActivity{Status: imv2.ActivityThinking})
	for i, p := range pieces(text, a.chunks) {
		if i > 0 {
			select {
			case <-time.After(a.gap):
			case <-a.ctx.Done():
				return a.ctx.Err()
			}
		}
		if err := r.Delta(a.ctx, p); err != nil {
			return err
		}
	}
	_, err = r.Final(a.ctx, imv2.ChatMessage{Text: text})
	return err
}

// pair opens a channel and binds it to chat as a person does: the code
// auth.start hands out, sent to the bot with /start in the chat.
func (a *agent) pair(ctx context.Context, srv *botapitest.Server, chat int64) error {
	ch, err := a.cli.OpenChannel(ctx, "")
	if err != nil {
		return err
	}
	ack, err := a.auth(ctx, ch, protocol.TypeAuthStart, protocol.AuthStart{FlowID: tgbridge.PairFlow})
	if err != nil {
		return err
	}
	_, code, ok := strings.Cut(ack.QRCodeText, "?start=")
	if !ok {
		return fmt.Errorf("auth.start answered no deep link: %q", ack.QRCodeText)
	}
	if err := srv.Say(ctx, chat, "/start "+code); err != nil {
		return err
	}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		ack, err := a.auth(ctx, ch, protocol.TypeAuthStatus, protocol.AuthStatusRequest{FlowID: tgbridge.PairFlow})
		if err != nil {
			return err
		}
		if ack.Status == protocol.AuthAuthenticated {
			return nil
		}
	}
	return fmt.Errorf("chat %d: not paired in a minute", chat)
}

func (a *agent) auth(ctx context.Context, chID, typ string, payload any) (*protocol.AuthAck, error) {
	p, err := imv2.NewPacket(typ, chID, payload)
	if err != nil {
		return nil, err
	}
	ans, err := a.cli.Request(ctx, p)
	if err != nil {
		return nil, err
	}
	var ack protocol.AuthAck
	if err := ans.DecodePayload(&ack); err != nil {
		return nil, err
	}
	return &ack, nil
}

// reply and pieces are bot.mjs's reply and pieces: both sides stream the
// same text in the same chunks. The text has no MarkdownV2 character, so
// the Chat SDK's escaping leaves it as it is.
func reply(userText string) string {
	return "answer to " + userText + " lorem ipsum dolor sit amet consectetur adipiscing elit"
}

func pieces(text string, n int) []string {
	out := make([]string, 0, n)
	for i := range n {
		out = append(out, text[i*len(text)/n:(i+1)*len(text)/n])
	}
	return out
}
