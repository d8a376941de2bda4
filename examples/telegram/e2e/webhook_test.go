//go:build unix

package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/dataplane"
)

// TestWebhook_CommandTakesUpdatesByWebhookOnceEachInOrder runs the command
// with -webhook-url over the emulator (the proxy posts its updates on as
// Telegram does, with the secret the command set): a private chat pairs,
// its person writes three messages, each posted to the webhook twice (as
// after an answer Telegram did not get); xAgent gets each once, in order,
// each reply is shown once, and the command never polled. A post without
// the secret is refused 401 on the command's own address.
func TestWebhook_CommandTakesUpdatesByWebhookOnceEachInOrder(t *testing.T) {
	em := startEmulator(t)
	addr := freeAddr(t)
	startProcess(t, em, addr, t.TempDir(), "-webhook-url", "http://"+addr+"/telegram/updates")
	ctx := ctxFor(t, 2*time.Minute)
	ag := startAgent(t, ctx, addr, func(ctx context.Context, r *dataplane.Reply, m imv2.ChatMessage) {
		_ = stream(ctx, r, "You wrote: "+m.Text, 3, 0)
	})
	hookURL, secret := em.Webhook()
	require.Equal(t, "http://"+addr+"/telegram/updates", hookURL)
	require.NotEmpty(t, secret)
	id := ag.pair(t, ctx, em, 42)
	em.PostTwice()
	for _, text := range []string{"one", "two", "three"} {
		em.say(t, 42, text)
	}
	defer func() {
		if t.Failed() {
			t.Logf("shown %v\nxAgent got %q\ncalls %v", em.shown(), ag.userTexts(id), em.callsTo(0))
		}
	}()
	require.Eventually(t, func() bool {
		s := em.shown()[42]
		return len(s) >= 3 && s[len(s)-1].Text == "You wrote: three"
	}, time.Minute, 50*time.Millisecond)
	var shown []string
	for _, s := range em.shown()[42] {
		shown = append(shown, s.Text)
	}
	require.Equal(t, []string{"You wrote: one", "You wrote: two", "You wrote: three"}, shown)
	require.Equal(t, []string{"one", "two", "three"}, ag.userTexts(id))
	require.Zero(t, em.Polls(), "getUpdates calls")
	res, err := http.Post("http://"+addr+"/telegram/updates", "application/json", strings.NewReader(`{"update_id":1}`))
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)
}
