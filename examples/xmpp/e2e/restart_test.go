//go:build unix

package e2e

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/examples/xmpp/xmppbridge"
	"github.com/xagentkit/imv2/xfiles"
)

// acks records the terminal acks of the xAgent side's finals.
type acks chan imv2.Event

func (a acks) Observe(e imv2.Event) {
	if e.Kind == imv2.EventAcked || e.Kind == imv2.EventFailed {
		a <- e
	}
}

func (a acks) wait(t *testing.T, messageID string) imv2.Event {
	t.Helper()
	deadline := time.After(waitTimeout)
	for {
		select {
		case e := <-a:
			if e.MessageID == messageID {
				return e
			}
		case <-deadline:
			t.Fatalf("no terminal ack for %s", messageID)
		}
	}
}

// TestRestart_M11_S8_FinalCorrectsTheDraftShownBeforeTheCrash streams a
// reply into a 1:1 chat on a real Prosody, crashes the Connector after
// alice saw the draft corrected once, and sends the final to the
// restarted one: the final is a correction of the same draft (M11: the
// draft's handle was kept in the state directory), so alice has one
// message with the final text — neither lost nor shown twice; the same
// final resent is answered duplicate and shows nothing (S8).
func TestRestart_M11_S8_FinalCorrectsTheDraftShownBeforeTheCrash(t *testing.T) {
	p := startProsody(t)
	alice := newUser(t, p)
	addr, state := freeAddr(t), t.TempDir()
	conn := startConnector(t, p, addr, aliceJID, state, nil)
	defer func() { conn.stop(t) }()
	ctx := ctxFor(t)
	ack := make(acks, 16)
	cli, err := dataplane.Dial(ctx, dataplane.ClientConfig{
		URL: "http://" + addr, APIKey: apiKey,
		Target:   imv2.TargetFunc(func(context.Context, string, *imv2.ChatMessage) error { return nil }),
		Options:  &imv2.Options{Observer: ack, RetryMin: 50 * time.Millisecond, RetryMax: 300 * time.Millisecond},
		Advanced: dataplane.ClientAdvanced{CardID: xmppbridge.CardID, ReconnectMin: 20 * time.Millisecond, ReconnectMax: 200 * time.Millisecond},
	})
	require.NoError(t, err)
	defer cli.Close()
	xch, err := cli.OpenChannel(ctx, "")
	require.NoError(t, err)
	require.NoError(t, conn.b.Reading(ctx))

	r, err := cli.NewReply(xch, "")
	require.NoError(t, err)
	require.NoError(t, r.Delta(ctx, "The answer"))
	alice.waitFor("the draft", func() bool { th := thread(alice.from(botJID)); return len(th) == 1 })
	require.NoError(t, r.Delta(ctx, " is"))
	alice.waitFor("a correction", func() bool { th := thread(alice.from(botJID)); return th[0].Corrections == 1 })

	conn.stop(t) // the crash: the stream's final has not come yet
	conn = startConnector(t, p, addr, aliceJID, state, nil)
	const final = "The answer is 42."
	_, err = r.Final(ctx, imv2.ChatMessage{Text: final})
	require.NoError(t, err)
	require.Equal(t, imv2.AckAccepted, ack.wait(t, r.MessageID()).Status)
	alice.waitFor("the final text", func() bool { th := thread(alice.from(botJID)); return th[0].Text == final })

	// The same final again: duplicate, nothing shown. A later reply is
	// the marker that nothing else came.
	_, err = cli.Send(ctx, xch, imv2.ChatMessage{MessageID: r.MessageID(), Text: final})
	require.NoError(t, err)
	require.Equal(t, imv2.AckDuplicate, ack.wait(t, r.MessageID()).Status)
	r2, err := cli.NewReply(xch, "")
	require.NoError(t, err)
	_, err = r2.Final(ctx, imv2.ChatMessage{Text: "marker"})
	require.NoError(t, err)
	require.Equal(t, imv2.AckAccepted, ack.wait(t, r2.MessageID()).Status)
	alice.waitFor("the marker", func() bool { th := thread(alice.from(botJID)); return th[len(th)-1].Text == "marker" })
	th := thread(alice.from(botJID))
	require.Len(t, th, 2, "the reply is one message, corrected, then the marker: %+v", th)
	require.Equal(t, final, th[0].Text)
	require.Equal(t, 2, th[0].Corrections, "one correction before the crash, the final after it")
}

// TestPost_A8_FileRefusedAfterTheTextIsNoSecondText: a final whose text
// is shown but whose file the server's upload service refuses (over its
// 1 MiB limit) is not posted again — that would show the text twice —
// but answered delivery_outcome_unknown, retryable=false (A8), and alice
// has the text once.
func TestPost_A8_FileRefusedAfterTheTextIsNoSecondText(t *testing.T) {
	p := startProsody(t)
	alice := newUser(t, p)
	addr := freeAddr(t)
	conn := startConnector(t, p, addr, aliceJID, "", nil)
	defer conn.stop(t)
	ctx := ctxFor(t)
	ack := make(acks, 16)
	cli, err := dataplane.Dial(ctx, dataplane.ClientConfig{
		URL: "http://" + addr, APIKey: apiKey,
		Target:   imv2.TargetFunc(func(context.Context, string, *imv2.ChatMessage) error { return nil }),
		Options:  &imv2.Options{Observer: ack, RetryMin: 50 * time.Millisecond, RetryMax: 300 * time.Millisecond},
		Advanced: dataplane.ClientAdvanced{CardID: xmppbridge.CardID},
	})
	require.NoError(t, err)
	defer cli.Close()
	xch, err := cli.OpenChannel(ctx, "")
	require.NoError(t, err)
	require.NoError(t, conn.b.Reading(ctx))

	up, err := xfiles.Upload(ctx, http.DefaultClient, "http://"+addr, apiKey, xch, "big.bin", bytes.NewReader(make([]byte, 2<<20)))
	require.NoError(t, err)
	const text = "Here is the big file."
	r, err := cli.NewReply(xch, "")
	require.NoError(t, err)
	_, err = r.Final(ctx, imv2.ChatMessage{Text: text, Files: []imv2.File{up.File()}})
	require.NoError(t, err)
	e := ack.wait(t, r.MessageID())
	require.Equal(t, imv2.EventFailed, e.Kind)
	require.Equal(t, imv2.CodeDeliveryOutcomeUnknown, e.Code)

	r2, err := cli.NewReply(xch, "")
	require.NoError(t, err)
	_, err = r2.Final(ctx, imv2.ChatMessage{Text: "marker"})
	require.NoError(t, err)
	require.Equal(t, imv2.AckAccepted, ack.wait(t, r2.MessageID()).Status)
	alice.waitFor("the marker", func() bool { th := thread(alice.from(botJID)); return th[len(th)-1].Text == "marker" })
	th := thread(alice.from(botJID))
	require.Len(t, th, 2, "the text once, then the marker: %+v", th)
	require.Equal(t, text, th[0].Text)
}
