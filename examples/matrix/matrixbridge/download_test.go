package matrixbridge

import (
	"context"
	"encoding/json"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2/protocol"
	"maunium.net/go/mautrix/event"
)

// TestDownload_HomeserverOnTheGuard: a user's m.file event names media
// on the account's homeserver, here on a loopback address. By default
// the bridge asks it nothing (a sign-in chose that homeserver: it must
// not reach the Connector's own network) and forwards the file's name;
// with PrivateHomeservers the media is downloaded. Before, the download
// went out on the bridge's plain client.
func TestDownload_HomeserverOnTheGuard(t *testing.T) {
	for _, private := range []bool{false, true} {
		f := newFakeHS(t)
		b, err := New(Config{Build: protocol.Build{BuildTime: "1"}, APIKey: "k", PrivateHomeservers: private})
		require.NoError(t, err)
		t.Cleanup(func() { _ = b.Close() })
		acc := Account{Homeserver: f.srv.URL, UserID: "@bot:fake", AccessToken: "tok"}
		var evt event.Event
		require.NoError(t, json.Unmarshal([]byte(`{"type":"m.room.message","event_id":"$1","sender":"@alice:fake","content":{"msgtype":"m.file","body":"a.txt","url":"mxc://fake/m1"}}`), &evt))
		ev, ok, err := b.convert(context.Background(), b.client(acc), acc, "!room:fake", &evt)
		require.NoError(t, err)
		require.True(t, ok)
		f.mu.Lock()
		asked := f.downloads
		f.mu.Unlock()
		if !private {
			require.Zero(t, asked, "the loopback homeserver was asked for media")
			require.Empty(t, ev.Files)
			require.Equal(t, "a.txt", ev.Text, "forwarded as its name")
			continue
		}
		require.Positive(t, asked)
		require.Len(t, ev.Files, 1)
		rc, err := ev.Files[0].Open()
		require.NoError(t, err)
		data, _ := io.ReadAll(rc)
		require.Equal(t, "media bytes", string(data))
	}
}
