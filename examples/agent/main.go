// Command agent is an agent on the xAgent side of the wire: it dials a
// Connector by its base URL, opens a channel (or reopens the one in its
// state file), hands each user message to a brain and answers with a
// streamed reply — activity, deltas, now and then a file, the final —
// and prints each final's outcome. The brain here is a fake one; put
// yours behind the Brain interface.
//
//	go run ./examples/agent -url http://127.0.0.1:8080 [-key KEY] [-state agent.db]
//
// It has no retry loop of its own: Dial, OpenChannel and Upload wait and
// retry what the Connector refuses for now, finals stay pending (in the
// state file, across a restart) until the Connector acknowledges them, and
// a reply follows a channel the Connector replaced.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/boltstore"
	"github.com/xagentkit/imv2/dataplane"
)

func main() {
	url := flag.String("url", "", "the Connector's base URL (required)")
	key := flag.String("key", os.Getenv("CONNECTOR_API_KEY"), "the Connector's API key (default $CONNECTOR_API_KEY)")
	state := flag.String("state", "", "a state file: the channel and unacked finals survive a restart")
	flag.Usage = func() {
		fmt.Fprint(flag.CommandLine.Output(), "usage: agent -url URL [-key KEY] [-state FILE]\n\n"+
			"Answers the user messages of one channel of the Connector at URL with a fake brain.\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *url == "" || flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := Run(ctx, Config{URL: *url, APIKey: *key, State: *state, Brain: &FakeBrain{}}, os.Stdout)
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(1)
	}
}

// Brain answers a question. It may take as long as it needs: it runs on
// the agent's worker, not in the Connector's delivery of the question.
type Brain interface {
	Answer(ctx context.Context, question string) (Answer, error)
}

// Answer is what a brain says: the tool it used ("" for none), the text
// in the pieces it streams, and a file to attach (nil for none).
type Answer struct {
	Tool   string
	Pieces []string
	File   *File
}

// File is an attachment's name and bytes.
type File struct {
	Name string
	Data []byte
}

// FakeBrain answers in 3 to 10 pieces after using a tool, with a file
// every 7th answer.
type FakeBrain struct{ n atomic.Int64 }

// Answer echoes the question word by word.
func (b *FakeBrain) Answer(_ context.Context, question string) (Answer, error) {
	n := b.n.Add(1)
	a := Answer{Tool: "web_search"}
	for i := range 3 + n%8 {
		a.Pieces = append(a.Pieces, fmt.Sprintf("%s%d ", strings.Fields(question + " ok")[0], i))
	}
	if n%7 == 0 {
		a.File = &File{Name: fmt.Sprintf("answer-%d.txt", n), Data: []byte("notes for: " + question)}
	}
	return a, nil
}

// Config is what Run needs.
type Config struct {
	URL, APIKey string
	State       string // bolt file; "" keeps everything in memory
	Brain       Brain
	// Options, when set, tune every channel (ack timeout, retries); its
	// stores and callbacks are the agent's.
	Options *imv2.Options
}

type question struct {
	channelID string
	m         imv2.ChatMessage
}

type agent struct {
	client *dataplane.Client
	brain  Brain
	inbox  chan question
	out    io.Writer
}

// PostMessage takes a user message. Its return is the ack (A4): nil tells
// the Connector the message is the agent's now, so it is only queued here
// and answered by the worker. A full queue answers "retry later": the
// Connector resends the same message after a backoff.
func (a *agent) PostMessage(_ context.Context, channelID string, m *imv2.ChatMessage) error {
	select {
	case a.inbox <- question{channelID, *m}:
		return nil
	default:
		return imv2.NotPosted(errors.New("agent: busy"))
	}
}

// Run dials the Connector and answers until ctx ends.
func Run(ctx context.Context, cfg Config, out io.Writer) error {
	a := &agent{brain: cfg.Brain, inbox: make(chan question, 16), out: out}
	opts := &imv2.Options{}
	if cfg.Options != nil {
		*opts = *cfg.Options
	}
	opts.OnDelivered = func(channelID string, m imv2.ChatMessage, st imv2.AckStatus) {
		fmt.Fprintf(out, "final %s %s\n", m.MessageID, st) // accepted, or duplicate: shown before
	}
	opts.OnFailed = func(channelID string, m imv2.ChatMessage, err *imv2.Error) {
		// Not shown and not resent: a permanent refusal, the pending TTL
		// expired, or delivery_outcome_unknown (the Connector cannot tell
		// whether the platform showed it; a resend might show it twice).
		fmt.Fprintf(out, "final %s failed: %s\n", m.MessageID, err.Code)
	}
	ccfg := dataplane.ClientConfig{URL: cfg.URL, APIKey: cfg.APIKey, Target: a, Options: opts}
	if cfg.State != "" {
		st, err := boltstore.Open(cfg.State, boltstore.Options{})
		if err != nil {
			return err
		}
		defer st.Close()
		ccfg.Store, opts.Pending, opts.Completed = st, st, st
	}
	first := make(chan []string, 1) // the channels Dial reopened from the state file
	ccfg.OnConnected = func(_ string, ids []string) {
		select {
		case first <- ids:
		default: // a reconnect: it reopened them by itself
		}
	}
	client, err := dataplane.Dial(ctx, ccfg) // retries until ctx ends
	if err != nil {
		return err
	}
	defer client.Close()
	a.client = client
	if reopened := <-first; len(reopened) == 0 {
		ch, err := client.OpenChannel(ctx, "")
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "agent: channel %s open\n", ch)
	} else {
		fmt.Fprintf(out, "agent: channel %s reopened\n", reopened[0])
	}
	for {
		select {
		case q := <-a.inbox:
			if err := a.answer(ctx, q); err != nil {
				fmt.Fprintf(out, "answer to %s: %v\n", q.m.MessageID, err)
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// answer streams one reply. Deltas and activity are best effort (a lost
// one is made good by the final); the final stays pending until acked.
func (a *agent) answer(ctx context.Context, q question) error {
	r, err := a.client.NewReply(q.channelID, "")
	if err != nil {
		return err
	}
	_ = r.Activity(ctx, imv2.ChatActivity{Status: imv2.ActivityThinking})
	ans, err := a.brain.Answer(ctx, q.m.Text)
	if err != nil {
		return err
	}
	if ans.Tool != "" {
		_ = r.Activity(ctx, imv2.ChatActivity{Status: imv2.ActivityTool, ToolName: ans.Tool})
	}
	for _, p := range ans.Pieces {
		_ = r.Delta(ctx, p)
	}
	final := imv2.ChatMessage{Text: strings.Join(ans.Pieces, "")}
	if ans.File != nil {
		// Waits for the channel across a reconnect and retries refusals
		// for now; what is left is permanent (too large, refused).
		f, err := a.client.Upload(ctx, r.ChannelID(), ans.File.Name, bytes.NewReader(ans.File.Data))
		if err != nil {
			final.Text += "\n(the file could not be attached: " + err.Error() + ")"
		} else {
			final.Files = []imv2.File{f}
		}
	}
	_, err = r.Final(ctx, final) // pending now; the outcome comes to OnDelivered or OnFailed
	return err
}
