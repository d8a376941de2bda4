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

// TestPost_M11_FilesOnlyFinalReplacesTheDraft: a reply drafted as text
// whose final has a file and no text leaves no drafted text in alice's
// chat: the draft is corrected to the kit's placeholder (a correction to
// an empty body is ignored by XMPP clients, so the drafted text stayed),
// then the file follows (M11, M12).
func TestPost_M11_FilesOnlyFinalReplacesTheDraft(t *testing.T) {
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

	const content = "the report\n"
	up, err := xfiles.Upload(ctx, http.DefaultClient, "http://"+addr, apiKey, xch, "report.txt", bytes.NewReader([]byte(content)))
	require.NoError(t, err)
	r, err := cli.NewReply(xch, "")
	require.NoError(t, err)
	require.NoError(t, r.Delta(ctx, "Let me look that up"))
	alice.waitFor("the draft", func() bool { return len(thread(alice.from(botJID))) == 1 })
	_, err = r.Final(ctx, imv2.ChatMessage{Files: []imv2.File{up.File()}})
	require.NoError(t, err)
	require.Equal(t, imv2.AckAccepted, ack.wait(t, r.MessageID()).Status)
	alice.waitFor("the file", func() bool { th := thread(alice.from(botJID)); return len(th) == 2 && th[1].URL != "" })
	th := thread(alice.from(botJID))
	require.Equal(t, "📎", th[0].Text, "the drafted text is not left above a final without it")
	require.Equal(t, content, string(download(t, th[1].URL)))
}
