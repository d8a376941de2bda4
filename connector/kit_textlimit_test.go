package connector_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/internal/testwait"
)

// TestKit_M11_MaxTextBytesCutsDraftsAndRefusesTheFinal: over loopback,
// with Display.MaxTextBytes 5 a draft is cut to 5 bytes on a rune
// boundary ("abcdé" would split the é: "abcd" is shown), and a final
// over the limit is rejected retryable=false without a platform call; a
// final within it is shown.
func TestKit_M11_MaxTextBytesCutsDraftsAndRefusesTheFinal(t *testing.T) {
	calls := make(finisher, 64)
	next := func() string { return testwait.Recv(t, (<-chan string)(calls), 20*time.Second) }
	_, url := startKit(t, calls, "", connector.Options{Mode: connector.ModeEdit,
		Advanced: connector.Advanced{Display: connector.Display{Interval: time.Nanosecond, MaxTextBytes: 5}}})
	a := newAgent()
	xc, ch := a.dial(t, url)
	ctx := context.Background()

	r := newReply(t, xc, ch)
	require.NoError(t, r.Delta(ctx, "ab"))
	require.Equal(t, "draft ab", next())
	require.NoError(t, r.Delta(ctx, "cdéf"))
	require.Equal(t, "edit ev-"+r.MessageID()+" abcd", next())
	require.NoError(t, final(ctx, r, imv2.ChatMessage{Text: "abcdéf"}))
	o := a.next(t)
	require.NotNil(t, o.err, "a final over the limit is rejected")
	require.False(t, o.err.Retryable, "a final over the limit is refused for good")

	fits := newReply(t, xc, ch)
	require.NoError(t, final(ctx, fits, imv2.ChatMessage{Text: "héll"}))
	require.Equal(t, imv2.AckAccepted, a.next(t).status)
	require.Equal(t, "post héll", next(), "the oversize final never reached the platform")
}
