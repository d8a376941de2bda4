package connector_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/fakeclock"
	"github.com/xagentkit/imv2/protocol"
	"github.com/xagentkit/imv2/state"
)

// cutOff is a shared store a replica can lose: every read of the channel
// registry fails while down, as over a partitioned link.
type cutOff struct {
	state.Store
	down atomic.Bool
}

var errUnreachable = errors.New("dial tcp 10.0.0.5:5432: i/o timeout")

func (s *cutOff) Known(ctx context.Context, id string) (bool, error) {
	if s.down.Load() {
		return false, errUnreachable
	}
	return s.Store.Known(ctx, id)
}

// nopRelay makes the Connector a replica; nothing is relayed here.
type nopRelay struct{}

func (nopRelay) Send(context.Context, string, imv2.ChatMessage) (string, error) {
	return "", connector.ErrNoChannel
}

// wsStatus is the answer to a WebSocket upgrade request on url's /ws.
func wsStatus(t *testing.T, url string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url+"/ws", nil)
	require.NoError(t, err)
	req.Header.Set("Sec-WebSocket-Protocol", protocol.Subprotocol)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// TestKit_W11_ReplicaLetsGoWhenItLosesItsStore: a replica (Advanced.Relay
// set) whose store reads fail for StoreLossGrace closes xAgent's
// connection, refuses new ones (503) and answers /readyz "store
// unreachable" — not before the grace —; the first read that passes takes
// connections again, and xAgent's client reconnects.
func TestKit_W11_ReplicaLetsGoWhenItLosesItsStore(t *testing.T) {
	clk := fakeclock.New(time.Unix(0, 0))
	st := &cutOff{Store: connector.NewMemoryStore(clk)}
	k, url := startKit(t, newPretend(0), "", connector.Options{Store: st, Advanced: connector.Advanced{Clock: clk, Relay: nopRelay{}}})
	a := newAgent()
	_, ch := a.dial(t, url)
	require.True(t, k.Server().IsOpen(ch))

	st.down.Store(true)
	second := func() { clk.Advance(time.Second) } // the watch reads once a second
	second()                                      // the first failing read
	for range int(connector.StoreLossGrace/time.Second) - 1 {
		second()
		require.True(t, k.Server().IsOpen(ch), "let go before StoreLossGrace")
	}
	second()
	require.Eventually(t, func() bool { return !k.Server().IsOpen(ch) }, 10*time.Second, 5*time.Millisecond, "xAgent's connection let go")
	require.Equal(t, http.StatusServiceUnavailable, wsStatus(t, url), "new connections refused")
	code, body := get(t, url+"/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, "not ready: store unreachable", body)

	st.down.Store(false)
	second()
	require.Eventually(t, func() bool { return k.Server().IsOpen(ch) }, 10*time.Second, 5*time.Millisecond, "xAgent back once the store answers")
	clk.Advance(connector.ReadyInterval)
	code, _ = get(t, url+"/readyz")
	require.Equal(t, http.StatusOK, code)
}
