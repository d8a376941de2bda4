package tgbridge_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/examples/telegram/tgbridge"
	"github.com/xagentkit/imv2/imv2test"
	"github.com/xagentkit/imv2/sim"
)

const hookURL = "https://connector.example.org/telegram/hook"

func withWebhook(c *tgbridge.Config) { c.Webhook = hookURL }

// setWebhook returns the one setWebhook call New made.
func setWebhook(t *testing.T, a *docAPI) apiCall {
	t.Helper()
	sets := a.called("setWebhook")
	require.Len(t, sets, 1)
	return sets[0]
}

// texts is the user messages' texts.
func texts(ms []imv2.ChatMessage) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Text)
	}
	return out
}

// TestDocAPI_Webhook_PostedUpdatesReachXAgentOnce: with Config.Webhook New
// sets the webhook (its URL, a secret_token of the Bot API's alphabet,
// max_connections 1 so updates come one at a time, in order) and never
// polls; updates posted as Telegram posts them reach xAgent in order, and
// an update posted again (Telegram's redelivery after an answer it did
// not get) is answered 200 and not handed over twice.
func TestDocAPI_Webhook_PostedUpdatesReachXAgentOnce(t *testing.T) {
	a := startDocAPI(t)
	b := newBridge(t, a, connector.ModeBuffer, withWebhook)
	hook := setWebhook(t, a)
	require.Equal(t, hookURL, hook.text)
	require.Equal(t, 1, hook.maxConns)
	require.Regexp(t, `^[A-Za-z0-9_-]{16,256}$`, hook.secret)
	s := imv2test.StartSim(t, b.Connector(), sim.Config{Reply: func(text string) string { return "re: " + text }})
	one := update(1, 42, "one", nil)
	for _, u := range []any{one, update(2, 42, "two", nil), one, update(3, 42, "three", nil)} {
		require.Equal(t, http.StatusOK, a.post(t, b.Connector(), u, hook.secret))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, s.WaitAcked(ctx, 3))
	require.Equal(t, []string{"one", "two", "three"}, texts(s.UserMessages()))
	require.Empty(t, a.called("getUpdates"), "a webhook is not polled")
	require.Empty(t, a.called("deleteWebhook"))
}

// TestDocAPI_Webhook_WrongSecretOrNoUpdateRefused: a post without the
// secret, or with another, is answered 401; a GET, a body that is no
// update or one over 1 MiB 400; none reaches xAgent, the next good one
// does.
func TestDocAPI_Webhook_WrongSecretOrNoUpdateRefused(t *testing.T) {
	a := startDocAPI(t)
	b := newBridge(t, a, connector.ModeBuffer, withWebhook)
	secret := setWebhook(t, a).secret
	s := imv2test.StartSim(t, b.Connector(), sim.Config{Reply: func(text string) string { return "re: " + text }})
	require.Equal(t, http.StatusUnauthorized, a.post(t, b.Connector(), update(1, 42, "no secret", nil), ""))
	require.Equal(t, http.StatusUnauthorized, a.post(t, b.Connector(), update(2, 42, "wrong secret", nil), secret[1:]+"x"))
	require.Equal(t, http.StatusBadRequest, a.post(t, b.Connector(), "not an update", secret))
	require.Equal(t, http.StatusBadRequest, a.post(t, b.Connector(), update(3, 42, strings.Repeat("x", 1<<20), nil), secret))
	get, w := httptest.NewRequest(http.MethodGet, hookURL, nil), httptest.NewRecorder()
	get.Header.Set("X-Telegram-Bot-Api-Secret-Token", secret)
	b.Connector().ServeHTTP(w, get)
	require.Equal(t, http.StatusBadRequest, w.Code)
	require.Equal(t, http.StatusOK, a.post(t, b.Connector(), update(4, 42, "good", nil), secret))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, s.WaitAcked(ctx, 1))
	require.Equal(t, []string{"good"}, texts(s.UserMessages()))
}

// TestDocAPI_Webhook_NotStoredIsNot2xx: an update the kit could not
// store (here its state store is closed) is answered 503, so Telegram
// sends it again; 200 comes only once the kit has it.
func TestDocAPI_Webhook_NotStoredIsNot2xx(t *testing.T) {
	a := startDocAPI(t)
	dir := t.TempDir()
	b := newBridge(t, a, connector.ModeBuffer, withWebhook, func(c *tgbridge.Config) { c.StateDir = dir })
	secret := setWebhook(t, a).secret
	s := imv2test.StartSim(t, b.Connector(), sim.Config{Reply: func(text string) string { return "re: " + text }})
	require.Equal(t, http.StatusOK, a.post(t, b.Connector(), update(1, 42, "stored", nil), secret))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, s.WaitAcked(ctx, 1))
	require.NoError(t, b.Close())
	require.Equal(t, http.StatusServiceUnavailable, a.post(t, b.Connector(), update(2, 42, "not stored", nil), secret))
}

// TestDocAPI_Polling_DeletesTheWebhookFirst: a bot whose webhook is still
// set (the Connector ran with Config.Webhook before) is switched back to
// long polling: New calls deleteWebhook, else getUpdates would answer 409
// for good, and the person's message reaches xAgent.
func TestDocAPI_Polling_DeletesTheWebhookFirst(t *testing.T) {
	a := startDocAPI(t)
	a.hook = apiCall{method: "setWebhook", text: hookURL}
	b := newBridge(t, a, connector.ModeBuffer)
	s := imv2test.StartSim(t, b.Connector(), sim.Config{Reply: func(text string) string { return "re: " + text }})
	a.say(42, "polled", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, s.WaitAcked(ctx, 1))
	require.Equal(t, []string{"polled"}, texts(s.UserMessages()))
	require.Len(t, a.called("deleteWebhook"), 1)
}
