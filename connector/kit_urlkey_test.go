package connector_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/boltstore"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/dataplane"
	"github.com/xagentkit/imv2/internal/testwait"
)

// holdingAgent is an xAgent that refuses (retryable) every user message
// until accept is set, and reports each delivery it saw.
type holdingAgent struct {
	accept atomic.Bool
	seen   chan imv2.ChatMessage
}

func (a *holdingAgent) PostMessage(_ context.Context, _ string, m *imv2.ChatMessage) error {
	a.seen <- *m
	if !a.accept.Load() {
		return imv2.NotPosted(errors.New("not yet"))
	}
	return nil
}

// TestKit_T3_M6_PendingDownloadURLSurvivesRestart: a user message with a
// file, still pending when the Connector restarts on the same boltstore
// file, is resent after the restart with the download_url it was stored
// with — and that URL downloads from the restarted process, whose signing
// key is derived from the same API key.
func TestKit_T3_M6_PendingDownloadURLSurvivesRestart(t *testing.T) {
	t.Parallel()
	const apiKey = "sk-kit-restart-0123456789abcdef"
	// The files outlive the process: a DiskFileStore with Keep, closed and made
	// anew on the same directory by each start, as a restarted process's.
	dir := t.TempDir()
	var files *connector.DiskFileStore
	t.Cleanup(func() { files.Close() })
	delivered := make(chan string, 16)
	r := startRestartable(t, func(st *boltstore.Store) (*connector.Connector, error) {
		if files != nil {
			files.Close()
		}
		var err error
		if files, err = connector.NewDiskFileStore(connector.DiskFileStoreOptions{Dir: dir, Keep: true}); err != nil {
			return nil, err
		}
		return connector.New(kitCard(apiKey), newPretend(0), &connector.Options{
			APIKey: apiKey, Store: st, Files: files, DefaultConversation: func(string) string { return "room-1" },
			Advanced: connector.Advanced{Channel: &imv2.Options{OnDelivered: func(_ string, m imv2.ChatMessage, _ imv2.AckStatus) { delivered <- m.MessageID }}},
		})
	})
	a := &holdingAgent{seen: make(chan imv2.ChatMessage, 256)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := dataplane.Dial(ctx, dataplane.ClientConfig{
		URL: r.URL(), APIKey: apiKey, Target: a,
		Advanced: dataplane.ClientAdvanced{ReconnectMin: 20 * time.Millisecond, ReconnectMax: 200 * time.Millisecond},
	})
	require.NoError(t, err)
	defer c.Close()
	ch, err := c.OpenChannel(ctx, "")
	require.NoError(t, err)
	ev := fileEvent("update-1")
	id := connector.EventMessageID(ev.Conversation, ev.EventID)
	require.NoError(t, r.K.Receive(ctx, ev))
	first := testwait.Recv(t, (<-chan imv2.ChatMessage)(a.seen), 20*time.Second)
	require.Equal(t, id, first.MessageID)
	require.Len(t, first.Files, 1)
	url := first.Files[0].DownloadURL
	r.stop()

	st, err := boltstore.Open(r.path, boltstore.Options{})
	require.NoError(t, err)
	pending, err := st.List(ctx, ch)
	require.NoError(t, err)
	require.NoError(t, st.Close())
	require.Len(t, pending, 1, "the refused message is pending across the restart")
	require.Equal(t, url, pending[0].Message.Files[0].DownloadURL)

	a.accept.Store(true)
	r.restart()
	defer r.stop()
	require.Equal(t, id, testwait.Recv(t, (<-chan string)(delivered), 20*time.Second), "the pending message resent and acked")
	for len(a.seen) > 0 { // every delivery, before and after the restart
		m := <-a.seen
		require.Equal(t, id, m.MessageID)
		require.Equal(t, url, m.Files[0].DownloadURL, "resent with the stored URL")
	}

	res, err := http.Get(r.URL() + url)
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode, "the pending message's download_url after the restart")
	require.Equal(t, "a photo", string(body))
}

// TestKit_T3_URLKeyOptionSignsAcrossReplicas: Options.Advanced.URLKey reaches the
// Handler: two Connectors with different API keys and one URLKey verify
// each other's URLs; without it they do not (each derives from its own
// API key), and a short one fails New.
func TestKit_T3_URLKeyOptionSignsAcrossReplicas(t *testing.T) {
	t.Parallel()
	key := []byte("a shared 32-byte download secret")
	files := connector.NewMemoryFileStore(connector.MemoryFileStoreOptions{})
	download := func(urlKey []byte) int {
		k1, _ := startKit(t, newPretend(0), "sk-replica-one-0123456789", connector.Options{Files: files, Advanced: connector.Advanced{URLKey: urlKey}})
		_, base2 := startKit(t, newPretend(0), "sk-replica-two-0123456789", connector.Options{Files: files, Advanced: connector.Advanced{URLKey: urlKey}})
		f, err := k1.OfferFile(context.Background(), "cch_1", "a.txt", "text/plain", strings.NewReader("hello"))
		require.NoError(t, err)
		res, err := http.Get(base2 + f.DownloadURL)
		require.NoError(t, err)
		res.Body.Close()
		return res.StatusCode
	}
	require.Equal(t, http.StatusOK, download(key), "one URLKey")
	require.Equal(t, http.StatusForbidden, download(nil), "keys derived from two API keys")
	_, err := connector.New(kitCard(""), newPretend(0), &connector.Options{Advanced: connector.Advanced{URLKey: key[:31]}})
	require.ErrorContains(t, err, "URLKey")
}
