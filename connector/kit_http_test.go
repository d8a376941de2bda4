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

// TestKit_W1_H4_MetricsApartFromTheKeyAndEveryEndpointServed: one Handler
// serves card, health, skill and /metrics; /health needs the API key,
// /metrics its own token (the API key does not open it, issue 38). Without
// a token /metrics is 404 on the Connector's address and open on
// StartMonitor's, which serves the probes too and nothing of xAgent's.
func TestKit_W1_H4_MetricsApartFromTheKeyAndEveryEndpointServed(t *testing.T) {
	const metricsToken = "scraper-token-0123456789abcdef"
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "calls 1\n") })
	_, url := startKit(t, newPretend(0), testKey, connector.Options{Advanced: connector.Advanced{Metrics: metrics, MetricsToken: metricsToken}, Skill: []byte("---\nname: " + protocol.SkillName(testCard().ConnectorCardID) + "\ndescription: a test skill\n---\n\n# skill\n")})
	// Without a MetricsToken: /metrics is off the Connector's address
	// (xAgent's key does not open it) and open on StartMonitor's.
	k2, url2 := startKit(t, newPretend(0), testKey, connector.Options{Advanced: connector.Advanced{Metrics: metrics}})
	mon, err := k2.StartMonitor("127.0.0.1:0")
	require.NoError(t, err)
	get := func(url, path, key string) (int, string) {
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
		url, path, key string
		status         int
	}{
		{url, "/connector-card.json", "", 200},
		{url, "/skill.md", "", 200},
		{url, "/health", "", 401},
		{url, "/health", testKey, 200},
		{url, "/health", metricsToken, 401},
		{url, "/metrics", "", 401},
		{url, "/metrics", "wrong", 401},
		{url, "/metrics", testKey, 401},
		{url, "/metrics", metricsToken, 200},
		{url2, "/metrics", testKey, 404},
		{url2, "/metrics", "", 404},
		{mon, "/metrics", "", 200},
		{mon, "/readyz", "", 200},
		{mon, "/livez", "", 200},
		{mon, "/health", testKey, 404},
		{mon, "/ws", testKey, 404},
	} {
		status, body := get(c.url, c.path, c.key)
		require.Equal(t, c.status, status, "%s%s with key %q: %s", c.url, c.path, c.key, body)
		if c.path == "/metrics" && status == 200 {
			require.Equal(t, "calls 1\n", body)
		}
	}
	require.NoError(t, k2.Close())
	_, err = http.Get(mon + "/metrics")
	require.Error(t, err, "Close stops the monitoring address too")
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

// TestKit_RoutesServedBeforeTheKitsOwn: a route of Advanced.Routes (a
// platform's webhook) is served at its exact path on the Connector's
// address, without the API key, and not on StartMonitor's; the kit's own
// endpoints stay as they are, and New refuses a route that would shadow
// one of them or is no path.
func TestKit_RoutesServedBeforeTheKitsOwn(t *testing.T) {
	hook := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusAccepted) })
	k, url := startKit(t, newPretend(0), testKey, connector.Options{Advanced: connector.Advanced{Routes: map[string]http.Handler{"/tg/hook": hook}}})
	mon, err := k.StartMonitor("127.0.0.1:0")
	require.NoError(t, err)
	for _, c := range []struct {
		method, url, path string
		status            int
	}{
		{http.MethodPost, url, "/tg/hook", http.StatusAccepted},
		{http.MethodPost, url, "/tg/hook/", http.StatusNotFound},
		{http.MethodGet, url, "/health", http.StatusUnauthorized},
		{http.MethodGet, url, "/connector-card.json", http.StatusOK},
		{http.MethodPost, mon, "/tg/hook", http.StatusNotFound},
	} {
		req, err := http.NewRequest(c.method, c.url+c.path, nil)
		require.NoError(t, err)
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		require.Equal(t, c.status, res.StatusCode, "%s %s%s", c.method, c.url, c.path)
	}
	for _, p := range []string{"/ws", "/health", "/metrics", "/readyz", "/files/refs/x", "tg/hook"} {
		_, err := connector.New(kitCard(""), newPretend(0), &connector.Options{APIKey: testKey, Advanced: connector.Advanced{Routes: map[string]http.Handler{p: hook}}})
		require.ErrorContains(t, err, "Advanced.Routes", p)
	}
}
