package dataplane

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/protocol"
)

// recordWrites records the type of every packet written.
type recordWrites struct {
	Conn
	mu    *sync.Mutex
	types *[]string
}

func (r *recordWrites) Write(ctx context.Context, p *imv2.Packet) error {
	r.mu.Lock()
	*r.types = append(*r.types, p.Type)
	r.mu.Unlock()
	return r.Conn.Write(ctx, p)
}

// TestClient_P7_RequestRefusesWhatTheCatalogDoesNotCarry: Request wrote
// any packet type, so an internal session.sync_message reached the
// Connector's socket (profile §1, P7). Now a type that is neither a Common
// Protocol request nor negotiated toward the Connector on the channel is
// refused before the write (also a profile packet on a channel not held);
// Common Protocol requests and negotiated packets still go.
func TestClient_P7_RequestRefusesWhatTheCatalogDoesNotCarry(t *testing.T) {
	_, url := startServer(t, nil)
	var mu sync.Mutex
	var written []string
	c, _, _ := dialClient(t, url, func(cfg *ClientConfig) {
		cfg.Advanced.WrapConn = func(conn Conn) Conn { return &recordWrites{Conn: conn, mu: &mu, types: &written} }
	})
	ch, err := c.OpenChannel(ctxWait(t), "")
	require.NoError(t, err)
	require.Equal(t, []string{imv2.ProfileIMv2}, c.Negotiated(ch).Profiles(), "the negotiated catalog is a value on the channel")
	require.True(t, c.Negotiated(ch).Allows(imv2.TypeChatMessageDelta, imv2.ToConnector))
	require.False(t, c.Negotiated(ch).Allows("session.sync_message", imv2.ToConnector))
	require.Nil(t, c.Negotiated("cch_unknown"))

	for _, bad := range []*imv2.Packet{
		mustPacket(t, "session.sync_message", ch),
		mustPacket(t, "session.sync_message", ""),
		mustPacket(t, "ui.projection.push", ch),
		mustPacket(t, imv2.TypeChatMessageDelta, "cch_not_held"),
		mustPacket(t, imv2.TypeChatMessageDelta, ""),
		mustPacket(t, protocol.TypeConnectorHello, ""),
	} {
		_, err := c.Request(ctxWait(t), bad)
		require.ErrorIs(t, err, &imv2.Error{Code: imv2.CodeUnsupportedPacket}, bad.Type)
	}
	_, err = c.Request(ctxWait(t), nil)
	require.Error(t, err)
	require.NoError(t, c.Ping(ctxWait(t)), "a Common Protocol request still goes")
	mu.Lock()
	defer mu.Unlock()
	require.NotContains(t, written, "session.sync_message")
	require.NotContains(t, written, "ui.projection.push")
	require.Contains(t, written, protocol.TypePing)
}

func mustPacket(t *testing.T, typ, channel string) *imv2.Packet {
	t.Helper()
	p, err := imv2.NewPacket(typ, channel, map[string]any{"x": 1})
	require.NoError(t, err)
	return p
}
