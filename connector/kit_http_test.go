package connector_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/protocol"
)

// TestKit_W1_H4_MetricsBehindTheKeyAndEveryEndpointServed: one Handler
// serves card, health, skill and /metrics; /metrics and /health need the key.
func TestKit_W1_H4_MetricsBehindTheKeyAndEveryEndpointServed(t *testing.T) {
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "calls 1\n") })
	_, url := startKit(t, newPretend(0), testKey, connector.Options{Advanced: connector.Advanced{Metrics: metrics}, Skill: []byte("---\nname: " + protocol.SkillName(testCard().ConnectorCardID) + "\ndescription: a test skill\n---\n\n# skill\n")})
	get := func(path, key string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, url+path, nil)
		require.NoError(t, err)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(body)
	}
	for _, c := range []struct {
		path, key string
		status    int
	}{
		{"/connector-card.json", "", 200},
		{"/skill.md", "", 200},
		{"/health", "", 401},
		{"/health", testKey, 200},
		{"/metrics", "", 401},
		{"/metrics", "wrong", 401},
		{"/metrics", testKey, 200},
	} {
		status, body := get(c.path, c.key)
		require.Equal(t, c.status, status, "%s with key %q: %s", c.path, c.key, body)
		if c.path == "/metrics" && status == 200 {
			require.Equal(t, "calls 1\n", body)
		}
	}
}

// TestKit_ListenAndServeEndsWithItsContext: ListenAndServe serves until
// its context ends, then returns nil.
func TestKit_ListenAndServeEndsWithItsContext(t *testing.T) {
	k, err := connector.New(kitCard(""), newPretend(0), nil)
	require.NoError(t, err)
	defer k.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- k.ListenAndServe(ctx, addr) }()
	// ListenAndServe tells no one when it listens, so a refused dial is
	// tried again: the one wait in the kit's tests that has no event.
	for guard := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		res, err := http.Get("http://" + addr + "/connector-card.json")
		if err == nil {
			res.Body.Close()
			require.Equal(t, http.StatusOK, res.StatusCode)
			break
		}
		require.True(t, time.Now().Before(guard), "not listening within 20 s: %v", err)
	}
	cancel()
	require.NoError(t, <-done)
}
