package imv2test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/dataplane"
)

// RunConnector runs the Connector-side checks against a Connector built
// with this SDK, in process, one subtest per check: a failed check fails
// its subtest with the reason; a skipped one logs why.
//
// start builds and starts the Connector with target — the suite's
// RecordingTarget, the observer — as its IM platform, registers its own
// shutdown with t.Cleanup, and returns it (URL, APIKey, User …; Observer
// and Buffered are filled in from target). streaming says whether target
// can show temporary text; run once with each to cover D8 and K5.
// cfg may be nil. Under go test -v, a cfg without a Log logs the
// transcript (every step, every ack with its code) to t. The report is
// returned for further assertions.
func RunConnector(t *testing.T, streaming bool, start func(t *testing.T, target *RecordingTarget) Connector, cfg *Config) *Report {
	t.Helper()
	target := NewRecordingTarget(streaming)
	c := start(t, target)
	c.Observer = target
	c.Buffered = !streaming
	return runChecks(t, c, cfg)
}

// RunKit runs the Connector-side checks against k, a Connector built
// with connector.New, in process, one subtest per check. It serves k on a
// loopback port (closed with t.Cleanup) and fills in c: the URL, the User
// (k.Receive into the conversation each channel is bound to) and
// Buffered (k's mode). c gives the rest: the APIKey k was built with, the
// Observer — typically a Recorder the platform calls Record on for every
// final, draft, post, edit, typing and typing_clear it shows — and the
// bounds k declares (DeltaIdleTTL, ActivityTimeout), without which the
// checks that observe them are skipped.
//
//	rec := &imv2test.Recorder{}
//	k, _ := connector.New(card, myChat{rec}, nil)
//	imv2test.RunKit(t, k, imv2test.Connector{Observer: rec}, nil)
func RunKit(t *testing.T, k *connector.Connector, c Connector, cfg *Config) *Report {
	t.Helper()
	url, err := k.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	c.URL, c.User, c.Buffered = url, kitUser{k}, k.Mode() == connector.ModeBuffer
	return runChecks(t, c, cfg)
}

// runChecks runs the Connector-side checks against c, one subtest per
// check; under go test -v a cfg without a Log logs the transcript to t.
func runChecks(t *testing.T, c Connector, cfg *Config) *Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if testing.Verbose() && (cfg == nil || cfg.Log == nil) {
		var o Config
		if cfg != nil {
			o = *cfg
		}
		o.Log = testLog{t}
		cfg = &o
	}
	rep, err := CheckConnector(ctx, c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ReportTo(t, rep)
	return rep
}

// kitUser is a person typing in the conversation a kit channel is bound
// to: each user message is a platform event handed to Receive.
type kitUser struct{ k *connector.Connector }

func (u kitUser) key(ctx context.Context, channelID string) (string, error) {
	b, found, err := u.k.Binding(ctx, channelID)
	switch {
	case err != nil:
		return "", err
	case !found:
		return "", fmt.Errorf("imv2test: channel %s is bound to no conversation", channelID)
	}
	return b.Key, nil
}

// Say sends text as a user message of channelID's conversation.
func (u kitUser) Say(ctx context.Context, channelID, text string) error {
	key, err := u.key(ctx, channelID)
	if err != nil {
		return err
	}
	return u.k.Receive(ctx, connector.InboundEvent{Conversation: key, EventID: imv2.NewMessageID(), Text: text})
}

// SendFile sends data as a file-only user message of channelID's
// conversation.
func (u kitUser) SendFile(ctx context.Context, channelID, filename string, data []byte) error {
	key, err := u.key(ctx, channelID)
	if err != nil {
		return err
	}
	open := func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }
	return u.k.Receive(ctx, connector.InboundEvent{Conversation: key, EventID: imv2.NewMessageID(),
		Files: []connector.InboundFile{{Filename: filename, Open: open}}})
}

// testLog writes a transcript to t.Log, one call per line written.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// ReportTo turns a report into subtests of t: a failed check fails its
// subtest with the reason, a skipped one logs why (it is no pass).
func ReportTo(t *testing.T, rep *Report) {
	t.Helper()
	for _, res := range rep.Results {
		t.Run(res.Check, func(t *testing.T) {
			switch res.Status {
			case Fail:
				t.Errorf("%s [%s]: %s", res.Title, strings.Join(res.Rules, " "), res.Reason)
			case Skip:
				t.Logf("not run: %s", res.Reason)
			}
		})
	}
}

// SDKUser is the User of a Connector built on this SDK: it sends user
// messages on the data-plane Server's Channel and offers files through
// the connector Handler (a signed download_url), as a platform adapter
// does when a person types.
type SDKUser struct {
	Server *dataplane.Server
	Files  *connector.Handler
}

// Say sends text as a user message on channelID.
func (u SDKUser) Say(ctx context.Context, channelID, text string) error {
	ch := u.Server.Channel(channelID)
	if ch == nil {
		return fmt.Errorf("imv2test: channel %s is not known to the Server", channelID)
	}
	_, err := ch.Send(ctx, imv2.ChatMessage{Text: text})
	return err
}

// SendFile offers data as a file and sends a file-only user message.
func (u SDKUser) SendFile(ctx context.Context, channelID, filename string, data []byte) error {
	ch := u.Server.Channel(channelID)
	if ch == nil {
		return fmt.Errorf("imv2test: channel %s is not known to the Server", channelID)
	}
	f, err := u.Files.OfferFile(ctx, channelID, filename, "", bytes.NewReader(data))
	if err != nil {
		return err
	}
	_, err = ch.Send(ctx, imv2.ChatMessage{Files: []imv2.File{f}})
	return err
}
