package dataplane

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2/state"
)

// TestServer_W5_RegistryReusesIDAfterRestart: a Connector restarted on the
// same registry reuses a channel ID it issued before (xAgent reopens with
// its stored ID), while an ID it never issued still gets a new one.
func TestServer_W5_RegistryReusesIDAfterRestart(t *testing.T) {
	reg := state.NewMemoryRegistry(0)
	var mu sync.Mutex
	var opened []string
	_, url := startServer(t, func(c *ServerConfig) { c.Registry = reg })
	p := dialPeer(t, url, nil)
	p.hello("")
	id, _ := p.open("")

	// "Restart": a new Server, same registry.
	_, url2 := startServer(t, func(c *ServerConfig) {
		c.Registry = reg
		c.OnChannelOpen = func(id string) { mu.Lock(); opened = append(opened, id); mu.Unlock() }
	})
	p2 := dialPeer(t, url2, nil)
	p2.hello("")
	again, _ := p2.open(id)
	require.Equal(t, id, again, "W5: a known channel is reused across the restart")
	other, _ := p2.open("cch_never_issued")
	require.NotEqual(t, "cch_never_issued", other, "W5: an unknown channel gets a new ID")
	mu.Lock()
	require.Equal(t, []string{id, other}, opened)
	mu.Unlock()

	full := state.NewMemoryRegistry(1)
	_, url3 := startServer(t, func(c *ServerConfig) { c.Registry = full })
	p3 := dialPeer(t, url3, nil)
	p3.hello("")
	p3.open("")
	ans := p3.call("channel.open", "", nil)
	expectError(t, ans, "connector_channel_unavailable")
}
