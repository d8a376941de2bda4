package dataplane

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
)

// TestServer_W5_OnChannelReopenOnEveryReopen: OnChannelReopen is called
// before each channel.open of a channel the Server knew is answered (not
// for one it issues, which gets OnChannelCreate); its error refuses that
// channel.open and keeps the channel.
func TestServer_W5_OnChannelReopenOnEveryReopen(t *testing.T) {
	var created, reopened callLog
	refuse := false
	srv, err := NewServer(ServerConfig{
		Card: testCard(), NewTarget: func(string) imv2.Target { return newRecTarget() },
		OnChannelCreate: func(_ context.Context, id string) error { created.log(id); return nil },
		OnChannelReopen: reopened.hook(&refuse),
	})
	require.NoError(t, err)
	defer srv.Close()
	p, _ := pipeSession(t, srv)
	p.hello("")
	a := p.open("")
	require.Equal(t, a, p.open(a), "a reopen")
	require.Equal(t, a, p.open(a), "a second reopen")
	require.Equal(t, []string{a}, created.got())
	require.Equal(t, []string{a, a}, reopened.got())
	refuse = true
	expectError(t, p.call("channel.open", a, nil), imv2.CodeChannelUnavailable)
	refuse = false
	require.Equal(t, a, p.open(a), "the refused reopen kept the channel")
}
