//go:build unix

package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2/examples/xmpp/xmppbridge"
)

// TestReadyz_FollowsTheServer: /readyz is 200 with no xAgent connected
// (xAgent is the client; its absence is not the Connector's failure),
// 503 naming the server while Prosody is down, and 200 again within a
// few seconds of Prosody's restart after 16 s down: the sign-in backoff
// is bounded at 4 s. Before: 503 "context deadline exceeded" until
// xAgent opened a channel, then 200 for good, Prosody down or not; the
// backoff grew to 30 s (after 16 s down, the next try came ~14 s after
// the restart).
func TestReadyz_FollowsTheServer(t *testing.T) {
	p := startProsody(t)
	addr, logs := freeAddr(t), &lines{}
	conn := startConnector(t, p, addr, aliceJID, "", logs)
	defer conn.stop(t)

	code, body := waitReadyz(t, addr, func(code int, _ string) bool { return code == http.StatusOK })
	require.Equal(t, http.StatusOK, code, "no xAgent: %s", body)

	p.stop()
	code, body = waitReadyz(t, addr, func(code int, _ string) bool { return code != http.StatusOK })
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Contains(t, body, "not signed in to the server")
	t.Logf("/readyz while Prosody is down: %d %s", code, body)
	time.Sleep(16 * time.Second) // the outage: the backoff grows meanwhile

	p.start(t)
	back := time.Now()
	code, body = waitReadyz(t, addr, func(code int, _ string) bool { return code == http.StatusOK })
	took := time.Since(back)
	t.Logf("/readyz ready %v after Prosody listened again", took.Round(10*time.Millisecond))
	require.Equal(t, http.StatusOK, code, body)
	require.Less(t, took, 6*time.Second, "the sign-in backoff is bounded at a few seconds")
}

// TestSignIn_WrongPasswordFailsFast: a password the server refuses ends
// the sign-in at once: SignIn returns the refusal, /readyz says the
// credentials were refused, and the bridge does not try again (one
// error line, no retries). Before: it retried for ever, /readyz said
// "context deadline exceeded".
func TestSignIn_WrongPasswordFailsFast(t *testing.T) {
	p := startProsody(t)
	addr, logs := freeAddr(t), &lines{}
	conn := startConnector(t, p, addr, aliceJID, "", logs, func(c *xmppbridge.Config) { c.Password = "not-the-password" })
	defer conn.stop(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := conn.b.SignIn(ctx)
	require.ErrorContains(t, err, "refused the credentials of "+botJID+" (not-authorized)")

	code, body := readyz(t, addr)
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Contains(t, body, "refused the credentials")
	t.Logf("/readyz with a wrong password: %d %s", code, body)
	time.Sleep(3 * time.Second) // what a retry loop would fill
	require.Equal(t, 1, logs.count("refused the bot's credentials"))
	require.Zero(t, logs.count("sign-in failed"), "no retry")
	require.False(t, strings.Contains(body, "deadline"))
}
